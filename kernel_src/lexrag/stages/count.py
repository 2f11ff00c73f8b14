"""How many citations to emit per query: a fixed k or the elbow of the score curve (the count stage)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["elbow_count", "choose_count", "unique_citations", "Count"]


def elbow_count(scores: Sequence[float], min_k: int = 1, max_k: int | None = None) -> int:
    """Number of top scores kept before the sorted score curve bends most (the "kneedle" point).

    The curve of the first ``max_k`` scores is scaled to the unit square; the knee is the
    point farthest below the chord from the first to the last point, and the scores before it
    are kept (a sharp drop after the third score keeps three).  The result is clipped to
    ``[min_k, max_k]`` and never exceeds the number of scores.
    """
    s = np.asarray(scores, dtype=np.float64)
    if max_k is not None:
        s = s[:max_k]
    n = len(s)
    if n == 0:
        return 0
    if n <= 2 or s[0] == s[-1]:
        k = n
    else:
        x = np.linspace(0.0, 1.0, n)
        y = (s - s[-1]) / (s[0] - s[-1])
        chord = 1.0 - x
        k = max(int(np.argmax(chord - y)), 1)
    lo = min(min_k, n)
    return int(min(max(k, lo), n if max_k is None else min(max_k, n)))


def choose_count(scores: Sequence[float], method: str, k: int, min_k: int, max_k: int) -> int:
    if method == "fixed":
        return min(k, len(scores))
    if method == "elbow":
        return elbow_count(scores, min_k=min_k, max_k=max_k)
    raise ValueError(f"unknown count method {method!r} (fixed | elbow)")


def unique_citations(hits, corpus) -> tuple[list[int], list[str], list[float]]:
    """The first document of each distinct citation string, in ranking order."""
    seen: dict[str, tuple[int, float]] = {}
    for doc, score in hits:
        c = corpus.citations[doc]
        if c not in seen:
            seen[c] = (doc, score)
    return [d for d, _ in seen.values()], list(seen), [s for _, s in seen.values()]


class Count:
    """Cut each query's final order at ``count.method``'s number of distinct citations."""

    name = "count"
    family = "final"
    phase = Phase.COUNT
    essential = True
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return True

    def run(self, batch, ctx):
        cc = ctx.cfg.count
        out = Ranking("final", "final")
        for q in batch.queries:
            docs, _, scores = unique_citations(batch.current.get(q.query_id, []), ctx.art.corpus)
            k = choose_count(np.asarray(scores), cc.method, cc.k, cc.min_k, cc.max_k)
            out.hits[q.query_id] = list(zip(docs[:k], scores[:k]))
        return out


register_stage(Count())
