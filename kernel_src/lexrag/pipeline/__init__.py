"""The pipeline: loading what a run needs and walking the stages over the queries.

:func:`run_pipeline` turns queries into query states and walks the phases (rewrite -> content
-> seed fusion -> graph and prior -> fusion -> rerank -> count) over them.  Each enabled stage
runs on chunks of ``runtime.batch_size`` queries: the walk times every call, checks the time
budget before it (past the budget only essential stages run: citation seeds, BM25, fusion,
count) and records which queries each stage skipped, then checks every ranking at the border.
Phase by phase over all queries means each model is loaded once per phase and the encoder,
the reranker and the LLM take turns on one GPU (see :class:`lexrag.models.ModelPool`).
:func:`retrieve` runs the retrieval phases alone for any query texts (the agentic loop's call).
"""

from lexrag.pipeline.artifacts import Artifacts, llm_cache_dir
from lexrag.pipeline.budget import Budget, projected_seconds
from lexrag.pipeline.context import make_context
from lexrag.pipeline.run import RunResult, retrieve, run_pipeline, walk
from lexrag.pipeline.signal_cache import SignalCache

__all__ = ["Artifacts", "RunResult", "Budget", "SignalCache", "run_pipeline", "retrieve", "make_context", "walk",
           "llm_cache_dir", "projected_seconds"]
