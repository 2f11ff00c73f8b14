"""One module per stage, each on the protocol of :mod:`lexrag.stages.base`.

Importing this package registers the built-in stages. Their order inside a phase is
:data:`lexrag.stages.base.STAGE_ORDER`, not the order of the imports below: rewrite (LLM query
variants) -> content (statutes, articles, BM25, citation seeds, LLM seeds, dense, feedback) ->
seed fusion -> graph and prior -> fusion -> learned ranker -> rerank -> verify -> agentic loop -> count.
"""

from lexrag.stages import (  # noqa: F401
    agent,
    articles,
    count,
    dictionary,
    english,
    feedback,
    fusion,
    graph,
    lexical,
    ranker,
    rerank,
    rewrite,
    seeds,
    semantic,
    statutes,
    verify,
)
from lexrag.stages.base import (  # noqa: F401
    RETRIEVAL_PHASES,
    STAGE_ORDER,
    BatchState,
    Context,
    Phase,
    Stage,
    register_stage,
    registered_stages,
    stages_for,
    unregister_stage,
)
