"""Lexical stage: BM25 once per query variant (``bm25_query``, ``bm25_de``, ``bm25_hyde``, ...)."""

from __future__ import annotations

from lexrag.ranking import Ranking
from lexrag.signals import VARIANTS
from lexrag.stages.base import Phase, register_stage
from lexrag.index.statutes import detector_for

__all__ = ["BM25Variants"]

CODE_VOTE_DEPTH = 50  # law paragraphs that vote for their law code in the statute vote (lexical.code_vote)


class BM25Variants:
    name = "bm25"
    reads = ("lexical",)  # config sections its output depends on (the signal cache keys on them)
    family = "lexical"
    needs = ("bm25",)
    phase = Phase.CONTENT
    essential = True
    signals = tuple(f"bm25_{v}" for v in VARIANTS)

    def enabled(self, cfg, art) -> bool:
        return cfg.lexical.enabled and art.bm25 is not None

    def run(self, batch, ctx):
        lc, cache = ctx.cfg.lexical, ctx.signal_cache
        out: dict[str, Ranking] = {}
        for q in batch.queries:
            for v in lc.variants:
                text = q.variant(v)
                if not text:
                    continue
                key = cache.text_key("bm25", lc, ctx.art.bm25, text) if cache is not None else None
                hit = cache.get_text(key) if key is not None else None
                if hit is None:  # each distinct text searched once per signal cache (ablations, tuning)
                    hit = self.search(ctx.art, lc, text)
                    if key is not None:
                        cache.put_text(key, hit)
                ids, scores = hit
                out.setdefault(v, Ranking(f"bm25_{v}", "lexical")).add(q.query_id, ids, scores)
        return list(out.values())

    @staticmethod
    def search(art, lc, text: str):
        """Top ``lc.top_k`` BM25 hits of ``text``, reshaped by law code when the statute vote or the
        SR-number weight is set (see :meth:`StatuteDetector.rescore`)."""
        if not lc.code_vote and lc.numbered_code_weight == 1.0:
            return art.bm25.query_search(text, lc, lc.top_k)  # among the documents it touched
        scores = art.bm25.query_scores(text, lc)
        if scores is not None:
            scores = detector_for(art.corpus).rescore(scores, lc.code_vote, CODE_VOTE_DEPTH, lc.numbered_code_weight)
        return art.bm25.top(scores, lc.top_k)


register_stage(BM25Variants())
