"""The English stage: an English question searched as written in the laws' English texts (the
``bm25_en`` artifact), as the ``bm25_en`` signal that fusion weighs like the others.  German
questions are left alone (the same language test as the dictionary's)."""

from __future__ import annotations

from lexrag.index.language import is_english
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["EnglishBM25"]


class EnglishBM25:
    name = "english"
    reads = ("lexical", "english")  # config sections its output depends on (the signal cache keys on them)
    family = "lexical"
    needs = ("bm25_en",)
    phase = Phase.CONTENT
    essential = False
    signals = ("bm25_en",)

    def enabled(self, cfg, art) -> bool:
        return cfg.english.enabled and getattr(art, "bm25_en", None) is not None

    def run(self, batch, ctx):
        index, k = ctx.art.bm25_en, ctx.cfg.lexical.top_k
        out = Ranking("bm25_en", "lexical")
        for q in batch.queries:
            if q.text and is_english(q.text):
                ids, scores = index.search(q.text, k)
                out.add(q.query_id, ids, scores)
        return [out]


register_stage(EnglishBM25())
