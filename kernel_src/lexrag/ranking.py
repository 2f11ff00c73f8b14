"""The one result type passed between stages, and its check at stage borders."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lexrag.errors import StageError

__all__ = ["Ranking", "RankingError", "FAMILIES", "best_first_order", "best_first"]

FAMILIES = ("seed", "lexical", "semantic", "graph", "prior", "fused", "rerank", "agent", "final")


def best_first_order(ids, scores) -> np.ndarray:
    """Positions of ``ids`` by ``scores`` falling, ties by the lower id: the one top-k rule, so
    that results repeat exactly whatever order the candidates came in."""
    return np.lexsort((np.asarray(ids), -np.asarray(scores)))


def best_first(ids, scores) -> np.ndarray:
    """``ids`` (with their ``scores``, aligned) reordered by :func:`best_first_order`."""
    ids = np.asarray(ids)
    return ids[best_first_order(ids, scores)]


class RankingError(StageError, ValueError):
    """A stage produced a ranking that breaks the contract."""


@dataclass
class Ranking:
    """Per query an ordered list of ``(doc_id, score)``, best first, from one signal.

    ``family`` groups signals for fusion (a cross-signal boost rewards documents found by
    both a content family and the graph family).
    """

    signal: str
    family: str
    hits: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    def add(self, query_id: str, doc_ids: np.ndarray | list[int], scores: np.ndarray | list[float]) -> None:
        self.hits[query_id] = [(int(d), float(s)) for d, s in zip(doc_ids, scores)]

    def doc_ids(self, query_id: str) -> list[int]:
        return [d for d, _ in self.hits.get(query_id, [])]

    def validate(self, n_docs: int | None = None, query_ids: list[str] | None = None) -> "Ranking":
        """Raise :class:`RankingError` naming the signal and query on the first broken rule:
        known family, ids in range, no duplicate doc per query, scores non-increasing."""
        if self.family not in FAMILIES:
            raise RankingError(f"signal {self.signal!r}: unknown family {self.family!r}")
        if query_ids is not None:
            extra = set(self.hits) - set(query_ids)
            if extra:
                raise RankingError(f"signal {self.signal!r}: unknown query ids {sorted(extra)[:5]}")
        for qid, hits in self.hits.items():
            docs = [d for d, _ in hits]
            if len(set(docs)) != len(docs):
                raise RankingError(f"signal {self.signal!r}, query {qid!r}: a document appears twice")
            if n_docs is not None and any(d < 0 or d >= n_docs for d in docs):
                raise RankingError(f"signal {self.signal!r}, query {qid!r}: doc_id outside 0..{n_docs - 1}")
            scores = [s for _, s in hits]
            if any(not np.isfinite(s) for s in scores):
                raise RankingError(f"signal {self.signal!r}, query {qid!r}: non-finite score")
            if any(b > a for a, b in zip(scores, scores[1:])):
                raise RankingError(f"signal {self.signal!r}, query {qid!r}: scores are not sorted best first")
        return self
