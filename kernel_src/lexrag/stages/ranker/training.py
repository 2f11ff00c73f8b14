"""What a training run of the ranker leaves out, said once: the config switches its candidate run
sets (:data:`CANDIDATE_OFF`, which :mod:`lexrag.pipeline.ranker_fit` applies and records in the
artifact) and, beside each, the signals that switch keeps out of the training rows, so a run can
tell a signal the ranker could never have been trained with (:func:`not_in_training`) from one its
build merely had switched off."""

from __future__ import annotations

from typing import Any

from lexrag.signals import PRIOR_SIGNALS, TASK_VARIANTS, VARIANTS

__all__ = ["CANDIDATE_OFF", "LANGUAGE_SIGNALS", "not_in_training"]

# What a training run leaves out: what learns from training gold (its signals would be fitted on
# the very questions they are features for), and the GPU and LLM stages (the build runs on a CPU;
# their signals reach a run's ranker through the fused order).  Each switch: the value a training
# run sets, and the signals it keeps out of the rows.
_SWITCHES: dict[str, tuple[Any, tuple[str, ...]]] = {
    "ranker.enabled": (False, ()),  # the ranker itself: its training run is the pipeline before it
    "prior.enabled": (False, PRIOR_SIGNALS),
    "statutes.learned": (False, ()),  # the statute stage's learned code model: its signals stay, routed by rule
    "semantic.enabled": (False, tuple(f"dense_{v}" for v in VARIANTS)),
    "rerank.enabled": (False, ("rerank",)),
    # the LLM's seeds and the BM25 searches of the query variants its rewrite tasks write
    "llm.enabled": (False, ("llm_seeds",) + tuple(f"bm25_{v}" for v in TASK_VARIANTS.values())),
    "verify.enabled": (False, ("verify",)),
    "agent.enabled": (False, ("agent",)),
    "count.method": ("fixed", ()),  # the expected-F1 count reads the ranker being trained
    "runtime.progress": (False, ()),
}
CANDIDATE_OFF: dict[str, Any] = {key: value for key, (value, _) in _SWITCHES.items()}
# signals no switch leaves out but the training questions never produce: they are German, so they
# get no dictionary variant (an English question's German words) and no English BM25 search
LANGUAGE_SIGNALS = ("bm25_dict_de", "bm25_en")
_NEVER_TRAINED = frozenset(s for _, signals in _SWITCHES.values() for s in signals) | frozenset(LANGUAGE_SIGNALS)


def not_in_training(signal: str) -> bool:
    """Whether a training run never produces ``signal`` (a ranker lacking it is as built, not a
    build under another config)."""
    return signal in _NEVER_TRAINED
