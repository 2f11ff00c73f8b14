"""The pipeline: :mod:`~lexrag.pipeline.artifacts` loads what a run needs,
:mod:`~lexrag.pipeline.run` walks the stages over the queries (its docstring tells how), under
the time budget of :mod:`~lexrag.pipeline.budget`."""

from lexrag.pipeline.artifacts import Artifacts, llm_cache_dir
from lexrag.pipeline import catalogue  # noqa: F401  (declares every artifact: the catalogue is whole wherever a run is)
from lexrag.pipeline.budget import Budget, projected_seconds
from lexrag.pipeline.context import make_context
from lexrag.pipeline.run import RunResult, retrieve, run_pipeline, walk
from lexrag.pipeline.signal_cache import SignalCache

__all__ = ["Artifacts", "RunResult", "Budget", "SignalCache", "run_pipeline", "retrieve", "make_context", "walk",
           "llm_cache_dir", "projected_seconds"]
