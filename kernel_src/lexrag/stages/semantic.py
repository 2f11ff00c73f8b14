"""Semantic stage: dense retrieval once per query variant (``dense_query``, ``dense_de``,
``dense_hyde``, ...): the English question is the cross-lingual bridge, the German variants
meet the German corpus in its own language.  The encoder is taken from the model pool, so it
takes turns with the reranker and the LLM on one GPU."""

from __future__ import annotations

from lexrag.ranking import Ranking
from lexrag.signals import VARIANTS
from lexrag.stages.base import Phase, register_stage

__all__ = ["DenseVariants", "TOP_K"]

TOP_K = 100  # documents kept per semantic signal (the paper's 100)


class DenseVariants:
    name = "dense"
    reads = ("semantic",)  # config sections its output depends on (the signal cache keys on them)
    family = "semantic"
    needs = ("semantic",)
    phase = Phase.CONTENT
    essential = False
    signals = tuple(f"dense_{v}" for v in VARIANTS)

    def enabled(self, cfg, art) -> bool:
        return cfg.semantic.enabled and art.dense is not None

    def run(self, batch, ctx):
        sc, cache = ctx.cfg.semantic, ctx.signal_cache
        pairs = [(q.query_id, v, q.variant(v)) for q in batch.queries for v in sc.variants if q.variant(v)]
        if not pairs:
            return []
        keys = [cache.text_key("dense", sc, ctx.art.dense, t) if cache is not None else None for _, _, t in pairs]
        found = [cache.get_text(k) if k is not None else None for k in keys]
        todo = sorted({t for (_, _, t), f in zip(pairs, found) if f is None})  # each distinct text encoded once
        if todo:
            encoder = ctx.model("encoder")
            vecs = encoder.encode(todo, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            ids, scores = ctx.art.dense.search(vecs, TOP_K)
            fresh = {t: (i, s) for t, i, s in zip(todo, ids, scores)}
            for k, (_, _, t) in zip(keys, pairs):
                if k is not None and k not in cache.texts:
                    cache.put_text(k, fresh[t])
            found = [f if f is not None else fresh[t] for f, (_, _, t) in zip(found, pairs)]
        out: dict[str, Ranking] = {}
        for (qid, v, _), (i, s) in zip(pairs, found):
            keep = i >= 0
            out.setdefault(v, Ranking(f"dense_{v}", "semantic")).add(qid, i[keep], s[keep])
        return list(out.values())


register_stage(DenseVariants())
