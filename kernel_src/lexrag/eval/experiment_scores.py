"""How the experiment harness (:mod:`lexrag.eval.experiment`) scores held-out rankings and sums
them up: F1 at each count ``k`` of :data:`KS`, a part's Macro F1 with its bootstrap interval, the
ceilings of where F1 is lost, the paired comparison of two variants, and the flat metrics block
``lexrag check-scores`` reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from lexrag.eval.metrics import prf
from lexrag.eval.stats import bootstrap_ci

if TYPE_CHECKING:
    from lexrag.pipeline import RunResult

__all__ = ["KS", "f1_at_ks", "ranking_f1", "own_count_f1", "summary_row", "CEILINGS", "ceilings", "compare", "flat_metrics"]

KS = tuple(range(1, 31))  # the counts a nested choice picks from


def f1_at_ks(gold: Sequence[str], ranked: Sequence[str], ks: Sequence[int] = KS) -> np.ndarray:
    """F1 of ``ranked`` cut at each k of ``ks``."""
    return np.array([prf(gold, ranked[:k])[2] for k in ks], dtype=np.float64)


def ranking_f1(gold: Sequence[str], res: RunResult, qid: str) -> np.ndarray:
    """The default measure of a held-out run: F1 of the query's ranking cut at each k of :data:`KS`."""
    return f1_at_ks(gold, res.ranked.get(qid, []))


def own_count_f1(gold: Sequence[str], res: RunResult, qid: str) -> np.ndarray:
    """The measure of a configuration that counts for itself (``count.method`` not ``fixed``): F1
    of what it emitted, the same at every k of :data:`KS` (so no k is chosen for it)."""
    return np.full(len(KS), prf(gold, res.predictions.get(qid, []))[2])


def summary_row(f1: dict[str, float], recall100: dict[str, float] | None = None) -> dict:
    """Macro F1 of per-query scores with its 95% bootstrap interval and the count of queries, and
    the mean Recall@100 of the same queries when ``recall100`` is given."""
    vals = list(f1.values())
    lo, hi = bootstrap_ci(vals)
    row = {"macro_f1": round(float(np.mean(vals)), 4), "ci": [round(lo, 4), round(hi, 4)], "n": len(vals)}
    if recall100 is not None:
        row["recall@100"] = round(float(np.mean([recall100[q] for q in f1])), 4)
    return row


CEILINGS = ("as ranked", "oracle citation form", "k = gold count", "best k per question")


def ceilings(gold: Mapping[str, Sequence[str]], ranked: Mapping[str, Sequence[str]], k: int = 3) -> dict[str, float]:
    """Where Macro F1 at ``k`` is lost, on the same rankings: as they are; with each paragraph
    written as its whole article where that is the form the gold cites and the paragraph is not
    ("Art. 41 OR" for "Art. 41 Abs. 1 OR"); cut at each question's own gold count; cut at each
    question's best k (1..30).  Upper bounds for a citation-form rule, a count rule and the count
    together with nothing else changed."""
    from lexrag.citations import parent, scoring_form

    out = dict.fromkeys(CEILINGS, 0.0)
    for q, g in gold.items():
        r = list(ranked.get(q, []))
        gs = {scoring_form(x) for x in g}
        formed: list[str] = []
        for c in r:
            whole = parent(c) if c.startswith("Art") else c
            c = whole if scoring_form(c) not in gs and scoring_form(whole) in gs else c
            if c not in formed:
                formed.append(c)
        out["as ranked"] += prf(g, r[:k])[2]
        out["oracle citation form"] += prf(g, formed[:k])[2]
        out["k = gold count"] += prf(g, r[: len(gs)])[2]
        out["best k per question"] += max(prf(g, r[:kk])[2] for kk in KS)
    return {name: v / max(len(gold), 1) for name, v in out.items()}


def compare(base: Mapping[str, tuple[dict, dict]], other: Mapping[str, tuple[dict, dict]]) -> dict[str, dict]:
    """Per part (a grouping's nested F1, a scored file, the locked areas) the paired difference
    ``other - base`` over the queries both scored: mean Macro F1 difference with its 95% bootstrap
    interval (of the per-query differences) and the sign-flip permutation p-value, and the
    Recall@100 difference.  "No significant loss" is an interval that reaches above 0."""
    from lexrag.eval.stats import paired_p_value

    out = {}
    for part in base.keys() & other.keys():
        (bf, br), (of, orr) = base[part], other[part]
        qs = [q for q in bf if q in of]
        if not qs:
            continue
        d = [of[q] - bf[q] for q in qs]
        lo, hi = bootstrap_ci(d)
        out[part] = {"f1_delta": round(float(np.mean(d)), 4), "ci": [round(lo, 4), round(hi, 4)],
                     "p": round(paired_p_value([bf[q] for q in qs], [of[q] for q in qs]), 4),
                     "recall@100_delta": round(float(np.mean([orr[q] - br[q] for q in qs])), 4), "n": len(qs)}
    return out


def flat_metrics(rows: Mapping[str, dict], selection: Mapping[str, dict], by: Sequence[str],
                 others: Sequence[str]) -> dict[str, float]:
    """The flat ``metrics`` block of an experiment's document, which ``lexrag check-scores``
    compares with ``repro/lexam_dev.yaml``: per variant its k (where it has one), its nested F1 and
    Recall@100 under each grouping of ``by`` and on each scored file (``others``, the locked areas);
    the nested pick among the variants' F1 under each grouping."""
    metrics: dict[str, float] = {}
    for name, row in rows.items():
        if isinstance(row["k"], int):  # the count the preset should ship with (tests/test_presets_k.py)
            metrics[f"{name} | k"] = row["k"]
        for g in by:
            metrics[f"{name} | {g} | f1 nested"] = row[g]["nested"]["macro_f1"]
            metrics[f"{name} | {g} | recall@100"] = row[g]["nested"]["recall@100"]
        for f in [*others, *(["locked"] if "locked" in row else [])]:
            metrics[f"{name} | {f} | f1"] = row[f]["macro_f1"]
            metrics[f"{name} | {f} | recall@100"] = row[f]["recall@100"]
    for g, s in selection.items():
        metrics[f"nested pick among the variants | {g} | f1 nested"] = s["macro_f1"]
    return metrics
