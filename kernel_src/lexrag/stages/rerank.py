"""Cross-encoder reranking of the fused candidates (bge-reranker-v2-m3 by default on Kaggle)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from lexrag.errors import ModelLoadError
from lexrag.models import load_cross_encoder
from lexrag.ranking import Ranking, best_first_order
from lexrag.stages.base import Phase, register_stage

__all__ = ["Reranker", "RerankError", "Rerank", "TOP_N"]

TOP_N = 300  # fused candidates reranked (the paper's 300)

log = logging.getLogger(__name__)


class RerankError(ModelLoadError):
    """A reranker that cannot be loaded."""


class Reranker:
    """Scores (query, document) pairs with a sentence-transformers CrossEncoder from a local
    folder (loaded by :func:`lexrag.models.load_cross_encoder`); the score is the model's
    sigmoid probability of relevance."""

    def __init__(self, model_path: str | Path, device: str = "auto", max_length: int = 512, batch_size: int = 32, fp16: bool = True):
        self.model = load_cross_encoder(model_path, device, max_length, fp16)
        self.batch_size = batch_size

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty(0, dtype=np.float32)
        out = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False,
                                 convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32).reshape(len(texts))

    def rerank(self, query: str, doc_ids: Sequence[int], texts: Sequence[str], tau: float = 0.5) -> list[tuple[int, float]]:
        """Documents ordered by model score, best first; those scoring below ``tau`` dropped."""
        s = self.scores(query, texts)
        order = best_first_order(doc_ids, s)
        return [(int(doc_ids[i]), float(s[i])) for i in order if s[i] >= tau]


class Rerank:
    """Cross-encoder over the top :data:`TOP_N` of each query's current order; candidates
    scoring below ``rerank.tau`` are dropped (paper: 300, 0.5)."""

    name = "rerank"
    family = "rerank"
    needs = ("reranker",)
    phase = Phase.RERANK
    essential = False
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.rerank.enabled and art.has_model("reranker")

    def run(self, batch, ctx):
        rc, corpus = ctx.cfg.rerank, ctx.art.corpus
        out = Ranking("rerank", "rerank")
        reranker = None
        for q in batch.queries:
            hits = batch.current.get(q.query_id, [])
            if not hits:
                continue
            reranker = reranker or ctx.model("reranker")
            ids = [d for d, _ in hits[:TOP_N]]
            texts = [t or corpus.citations[d] for d, t in zip(ids, corpus.texts(ids))]
            kept = reranker.rerank(q.text, ids, texts, rc.tau)
            if kept:
                out.hits[q.query_id] = kept
            else:  # every candidate below tau: an empty answer scores 0, the fused order keeps a chance
                log.warning("query %r: the reranker scored all %d candidates below tau=%s; the fused order stays",
                            q.query_id, len(ids), rc.tau)
        return out


register_stage(Rerank())
