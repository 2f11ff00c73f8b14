"""The dictionary stage: an English question's German words from a bilingual dictionary, as the
``dict_de`` variant (BM25, the statute vote, articles and feedback search it like any variant).
It needs no LLM, so it runs where the LLM is missing, dropped or switched off, and beside the
LLM's translation where the LLM runs.  German questions are left alone."""

from __future__ import annotations

from collections import Counter

from lexrag.index.language import is_english
from lexrag.index.lexical import QUERY_DEDUP
from lexrag.queries import Variant
from lexrag.stages.base import Phase, register_stage

__all__ = ["DictionaryTranslate"]


class DictionaryTranslate:
    name = "dictionary"
    family = "rewrite"
    needs = ("dictionary", "bm25")  # bm25: for every weighting but uniform, and for compounds (needs_for)
    phase = Phase.REWRITE
    essential = False
    signals = ()

    def needs_for(self, cfg) -> tuple[str, ...]:
        return self.needs if cfg.dictionary.reads_index() else ("dictionary",)

    def enabled(self, cfg, art) -> bool:
        """On with its artifact, and with the BM25 index where the config's weighting or compounds
        read it (lexical on and its artifact loaded): without it the stage is off and the run's
        status says which part is missing, as for any stage."""
        if not cfg.dictionary.enabled or getattr(art, "dictionary", None) is None:
            return False
        return "bm25" not in self.needs_for(cfg) or (cfg.lexical.enabled and getattr(art, "bm25", None) is not None)

    def run(self, batch, ctx):
        d, weighting, compounds = ctx.art.dictionary, ctx.cfg.dictionary.weighting, ctx.cfg.dictionary.compounds
        index = getattr(ctx.art, "bm25", None)  # None only where no setting reads it: enabled() keeps the stage off otherwise
        origin = f"dictionary:{d.doc.get('source', '')}@{d.doc.get('source_version', '')}"
        out = {}
        for q in batch.queries:
            if q.text and is_english(q.text):
                top = self._top_terms(q.text, d, ctx) if weighting == "first_pass" else None
                out[q.query_id] = [Variant("dict_de", d.translate(q.text, weighting, index, top, compounds), origin)]
        return out

    @staticmethod
    def _top_terms(text: str, d, ctx) -> dict[str, int]:
        """term -> how many of the top documents of the first search (the indexed weighting, searched
        with the run's query settings) hold it."""
        index, lc = ctx.art.bm25, ctx.cfg.lexical
        ids, _ = index.search(d.translate(text, "indexed", index), ctx.cfg.dictionary.first_pass_docs, QUERY_DEDUP,
                              lc.question_weight, cache=False)
        return Counter(t for doc in ctx.art.corpus.texts(ids.tolist()) for t in set(index.analyzer(doc or "")))


register_stage(DictionaryTranslate())
