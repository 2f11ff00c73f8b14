"""Lexical stage: BM25 once per query variant (``bm25_query``, ``bm25_de``, ``bm25_hyde``, ...)."""

from __future__ import annotations

from lexrag.ranking import Ranking
from lexrag.signals import VARIANTS
from lexrag.stages.base import Phase, register_stage

__all__ = ["BM25Variants"]


class BM25Variants:
    name = "bm25"
    family = "lexical"
    phase = Phase.CONTENT
    essential = True
    signals = tuple(f"bm25_{v}" for v in VARIANTS)

    def enabled(self, cfg, art) -> bool:
        return cfg.lexical.enabled and art.bm25 is not None

    def run(self, batch, ctx):
        lc = ctx.cfg.lexical
        out: dict[str, Ranking] = {}
        for q in batch.queries:
            for v in lc.variants:
                text = q.variant(v)
                if not text:
                    continue
                ids, scores = ctx.art.bm25.search(text, lc.top_k, dedup=lc.query_dedup)
                out.setdefault(v, Ranking(f"bm25_{v}", "lexical")).add(q.query_id, ids, scores)
        return list(out.values())


register_stage(BM25Variants())
