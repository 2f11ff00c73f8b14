"""Uncertainty for scores over few queries: bootstrap intervals and a paired permutation test."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["bootstrap_ci", "paired_p_value"]


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (queries resampled with
    replacement); ``(nan, nan)`` for no values."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    a = (1.0 - level) / 2.0
    return float(np.quantile(means, a)), float(np.quantile(means, 1.0 - a))


def paired_p_value(a: Sequence[float], b: Sequence[float], n_perm: int = 5000, seed: int = 0) -> float:
    """Two-sided p-value of a paired sign-flip permutation test on per-query differences
    ``b - a`` (is the mean difference larger than chance?); exact for up to 16 queries with a
    difference, Monte Carlo above.  1.0 when nothing differs."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    d = d[d != 0]
    if len(d) == 0:
        return 1.0
    observed = abs(d.mean())
    if len(d) <= 16:
        signs = ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1) * 2 - 1
    else:
        signs = np.random.default_rng(seed).choice([-1, 1], size=(n_perm, len(d)))
    means = np.abs((signs * d).mean(axis=1))
    hits = int(np.sum(means >= observed - 1e-12))
    if len(d) <= 16:  # every sign vector enumerated, the observed one among them
        return hits / len(means)
    return (hits + 1) / (len(means) + 1)  # Monte Carlo: the observed labelling counts too, so never 0
