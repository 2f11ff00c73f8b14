"""Cross-encoder reranking of the fused candidates (bge-reranker-v2-m3 by default on Kaggle)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["Reranker", "RerankError"]


class RerankError(RuntimeError):
    pass


class Reranker:
    """Scores (query, document) pairs with a sentence-transformers CrossEncoder from a local
    folder; the score is the model's sigmoid probability of relevance."""

    def __init__(self, model_path: str | Path, device: str = "auto", max_length: int = 512, batch_size: int = 32, fp16: bool = True):
        path = Path(model_path)
        if not path.is_dir():
            raise RerankError(f"reranker model folder not found: {path} (attach the model dataset or set rerank.model)")
        import torch
        from sentence_transformers import CrossEncoder

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = CrossEncoder(str(path), device=device, max_length=max_length, local_files_only=True)
        if fp16 and device.startswith("cuda"):
            self.model.model.half()
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
        order = np.lexsort((np.asarray(doc_ids), -s))
        return [(int(doc_ids[i]), float(s[i])) for i in order if s[i] >= tau]
