"""One module per stage, each on the protocol of :mod:`lexrag.stages.base`.

Importing this package registers the built-in stages in their phases: rewrite (LLM query
variants) -> content (citation seeds, LLM seeds, BM25, dense) -> seed fusion -> graph and prior
-> fusion -> rerank -> verify -> agentic loop -> count.
"""

from lexrag.stages import (  # noqa: F401
    count,
    fusion,
    graph,
    lexical,
    rerank,
    rewrite,
    seeds,
    semantic,
    verify,  # imported after rerank, so it registers after it: the verifier judges the reranked order
)
from lexrag.stages import agent  # noqa: F401,E402  (after verify: round 0 observes the verified order)
from lexrag.stages import statutes  # noqa: F401,E402  (a content signal: BM25 within the statutes a question names)
from lexrag.stages import feedback  # noqa: F401,E402  (a content signal: BM25 of the question expanded by feedback)
from lexrag.stages.base import (  # noqa: F401
    RETRIEVAL_PHASES,
    BatchState,
    Context,
    Phase,
    Stage,
    register_stage,
    registered_stages,
    stages_for,
    unregister_stage,
)
