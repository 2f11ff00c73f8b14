"""The dictionary stage: an English question's German words from a bilingual dictionary, as the
``dict_de`` variant (BM25, the statute vote, articles and feedback search it like any variant).
It needs no LLM, so it runs where the LLM is missing, dropped or switched off, and beside the
LLM's translation where the LLM runs.  German questions are left alone."""

from __future__ import annotations

from lexrag.index.dictionary import is_english
from lexrag.queries import Variant
from lexrag.stages.base import Phase, register_stage

__all__ = ["DictionaryTranslate"]


class DictionaryTranslate:
    name = "dictionary"
    family = "rewrite"
    needs = ("dictionary",)
    phase = Phase.REWRITE
    essential = False
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.dictionary.enabled and getattr(art, "dictionary", None) is not None

    def run(self, batch, ctx):
        d = ctx.art.dictionary
        origin = f"dictionary:{d.doc.get('source', '')}@{d.doc.get('source_version', '')}"
        out = {}
        for q in batch.queries:
            if q.text and is_english(q.text):
                out[q.query_id] = [Variant("dict_de", d.translate(q.text), origin)]
        return out


register_stage(DictionaryTranslate())
