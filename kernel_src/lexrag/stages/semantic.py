"""Semantic stage: dense retrieval once per query variant (``dense_query``, ``dense_de``,
``dense_hyde``, ...): the English question is the cross-lingual bridge, the German variants
meet the German corpus in its own language.  The encoder is taken from the model pool, so it
takes turns with the reranker and the LLM on one GPU."""

from __future__ import annotations

from lexrag.ranking import Ranking
from lexrag.signals import VARIANTS
from lexrag.stages.base import Phase, register_stage

__all__ = ["DenseVariants"]


class DenseVariants:
    name = "dense"
    family = "semantic"
    phase = Phase.CONTENT
    essential = False
    signals = tuple(f"dense_{v}" for v in VARIANTS)

    def enabled(self, cfg, art) -> bool:
        return cfg.semantic.enabled and art.dense is not None

    def run(self, batch, ctx):
        sc = ctx.cfg.semantic
        pairs = [(q.query_id, v, q.variant(v)) for q in batch.queries for v in sc.variants if q.variant(v)]
        if not pairs:
            return []
        encoder = ctx.model("encoder")
        vecs = encoder.encode([t for _, _, t in pairs], normalize_embeddings=True, convert_to_numpy=True,
                              show_progress_bar=False)
        ids, scores = ctx.art.dense.search(vecs, sc.top_k)
        out: dict[str, Ranking] = {}
        for (qid, v, _), i, s in zip(pairs, ids, scores):
            keep = i >= 0
            out.setdefault(v, Ranking(f"dense_{v}", "semantic")).add(qid, i[keep], s[keep])
        return list(out.values())


register_stage(DenseVariants())
