"""The whole catalogue of :mod:`lexrag.registry`: importing this module imports every module that
declares an artifact (each declares its own spec beside its build and load steps), in build
order; :mod:`lexrag.pipeline.artifacts` adds the parts a run loads that no build makes."""

from lexrag.index import corpus  # noqa: F401  (first: every index is built over it)
from lexrag.index import bm25_build, dictionary, embeddings, english, graph, prior  # noqa: F401
from lexrag.io import wheels  # noqa: F401
from lexrag.llm import cache  # noqa: F401
from lexrag.pipeline import ranker_fit  # noqa: F401
