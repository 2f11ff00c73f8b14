"""The one loader for every model: sentence encoder, cross-encoder, causal LM.

Models come from local folders only (``local_files_only``; the hub is never asked), located by
the caller through the path resolver.  ``device="auto"`` takes the first CUDA GPU of compute
capability 7.0 or newer (Kaggle's cu128 torch has no kernels for a P100's sm_60) and the CPU
otherwise; half precision on GPU.  The causal LM loads in bitsandbytes 4-bit NF4 with double
quantization and fp16 compute (a T4 has no bf16), spread over all usable GPUs by
``device_map="auto"`` (Kaggle's 2xT4).

:class:`ModelPool` holds at most ``resident`` models at once: asking for another releases the
least recently used one first (references dropped, garbage collected, CUDA cache emptied), so the
encoder, the reranker and a 7B LLM take turns on one 16 GB T4.

The pool is here; :mod:`lexrag.models.base` holds devices, memory and model folders,
:mod:`lexrag.models.encoders` the encoder and cross-encoder loaders, :mod:`lexrag.models.causal_lm`
the LLM, and :mod:`lexrag.models.paths` finds model folders among the inputs.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Callable

from lexrag.models.base import model_id, release_memory, resolve_device, same_model, usable_gpus
from lexrag.models.causal_lm import CausalLM, load_causal_lm
from lexrag.models.encoders import load_cross_encoder, load_encoder

__all__ = ["resolve_device", "usable_gpus", "model_id", "same_model", "load_encoder", "load_cross_encoder",
           "load_causal_lm", "CausalLM", "ModelPool", "release_memory"]

log = logging.getLogger(__name__)


class ModelPool:
    """Loaded models by key, at most ``resident`` at once (least recently used released first).

    ``get(key, loader)`` returns the loaded model or loads it with ``loader()``; the pool holds
    the only long-lived reference, so a released model is freed.  ``loads`` counts loads per key
    (a model released and needed again loads again)."""

    def __init__(self, resident: int = 1):
        self.resident = max(1, resident)
        self._models: OrderedDict[str, Any] = OrderedDict()
        self.loads: dict[str, int] = {}
        self.load_seconds: dict[str, float] = {}
        self.failed: dict[str, Exception] = {}  # a model that failed to load is not tried again

    def get(self, key: str, loader: Callable[[], Any]) -> Any:
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key]
        if key in self.failed:
            raise self.failed[key]
        while len(self._models) >= self.resident:
            self.release(next(iter(self._models)))
        t0 = time.perf_counter()
        try:
            model = loader()
        except Exception as e:
            self.failed[key] = e
            release_memory()
            raise
        self.load_seconds[key] = self.load_seconds.get(key, 0.0) + time.perf_counter() - t0
        self.loads[key] = self.loads.get(key, 0) + 1
        self._models[key] = model
        return model

    def loaded(self) -> list[str]:
        return list(self._models)

    def release(self, key: str | None = None) -> None:
        """Release ``key`` (or every model) and free its memory."""
        keys = [key] if key is not None else list(self._models)
        for k in keys:
            if self._models.pop(k, None) is not None:
                log.info("released model %s", k)
        release_memory()
