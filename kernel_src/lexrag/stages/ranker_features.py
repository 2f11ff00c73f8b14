"""The learned ranker's features: per candidate citation, numbers that name no
law code or legal area (ranks and scores in the fused list and in each signal, how its article
and its code stand in the list, whether the question names its code, its kind and length), so
what a model learns from them can carry over to legal areas the training questions never touched.

Every feature is set by its name (:func:`feature_names` gives the column order a model reads), and
"absent" has one rule: a feature whose subject is missing (a signal that does not list the
candidate, a candidate with no law code, a paragraph that is no number) takes its value from
:data:`ABSENT_VALUES`, by name, and from nowhere else.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from lexrag.citations import extract, parent, try_parse
from lexrag.stages.count import unique_citations

__all__ = ["FEATURE_SET", "ABSENT", "ABSENT_VALUES", "GENERIC", "feature_names", "absent_values", "feature_column",
           "candidate_features"]

FEATURE_SET = 1  # raise when a feature changes meaning: older models are then refused, not misread
ABSENT = 1000.0  # the rank a candidate takes in a list that does not hold it
GENERIC = ("signals_listing", "article_best_log_rank", "article_best", "article_top10", "article_top30",
           "code_best_log_rank", "code_top10", "code_top30", "code_top100", "code_named", "codes_named", "is_law",
           "has_paragraph", "paragraph", "text_log_len", "query_log_len")
# The value of each feature that can be absent, by name; a per-signal feature ``<signal>_<x>`` by
# its suffix ``{signal}_<x>``.  These are the values the feature set-1 models were trained on, so
# they stay as they are: a signal's log rank is log1p(ABSENT) (6.9), while a candidate with no law
# code reads ABSENT itself (1000) as its code's log rank.  Both lie past the log ranks a candidate
# present has (its code's best rank is below ranker.depth), but a tree may split between 6.9 and
# 1000, so bringing the two to one number would change a trained model's predictions: that needs a
# new FEATURE_SET and a refit.
ABSENT_VALUES: dict[str, float] = {
    "fused_rel": 0.0,  # a candidate comes from the fused list, so this is never used; said for completeness
    "{signal}_log_rank": math.log1p(ABSENT),
    "{signal}_rel": 0.0,
    "code_best_log_rank": ABSENT,
    "code_top10": 0.0,
    "code_top30": 0.0,
    "code_top100": 0.0,
    "paragraph": 0.0,  # no paragraph, or one that is not a number ("3a")
}
_PER_SIGNAL = ("log_rank", "rel")


def feature_names(signals: Sequence[str]) -> list[str]:
    """The feature columns for a model trained with ``signals`` (sorted signal names)."""
    return (["fused_rank", "fused_log_rank", "fused_rel"] + [f"{s}_{x}" for s in signals for x in _PER_SIGNAL]
            + list(GENERIC))


def absent_values(signals: Sequence[str]) -> dict[str, float]:
    """:data:`ABSENT_VALUES` for the features of ``signals``: each feature that can be absent with
    its value (the per-signal entries once per signal)."""
    out: dict[str, float] = {}
    for name, value in ABSENT_VALUES.items():
        if name.startswith("{signal}_"):
            out.update({name.format(signal=s): value for s in signals})
        else:
            out[name] = value
    return out


def feature_column(X: np.ndarray, features: Sequence[str], name: str) -> np.ndarray:
    """The column of feature ``name`` in rows ``X`` whose columns are ``features``."""
    try:
        return X[:, list(features).index(name)]
    except ValueError:
        raise KeyError(f"no feature {name!r} among the ranker's {len(features)} features") from None


def _best(hits: Sequence[tuple[int, float]], citation_of, keep: Mapping[str, int]) -> dict[str, tuple[int, float]]:
    """citation -> (rank of its first document in ``hits``, its score over the best score)."""
    top = max((s for _, s in hits), default=0.0) or 1.0
    out: dict[str, tuple[int, float]] = {}
    for rank, (d, s) in enumerate(hits):
        c = citation_of[d]
        if c in keep and c not in out:
            out[c] = (rank, s / top)
    return out


def candidate_features(fused: Sequence[tuple[int, float]], signal_hits: Mapping[str, Sequence[tuple[int, float]]],
                       signals: Sequence[str], text: str, corpus, depth: int) -> tuple[list[int], list[str], np.ndarray]:
    """The candidates of one query (the first document of each of the first ``depth`` distinct
    citations of ``fused``, best first) and their feature rows (:func:`feature_names`).  Each row
    starts from :func:`absent_values` and sets, by name, what the candidate has."""
    docs, ranked, _ = unique_citations(fused, corpus)
    docs, ranked = docs[:depth], ranked[:depth]
    names = feature_names(signals)
    if not ranked:
        return [], [], np.zeros((0, len(names)), dtype=np.float64)
    absent = absent_values(signals)
    citation_of = corpus.citations
    pos = {c: i for i, c in enumerate(ranked)}
    fused_best = _best(fused, citation_of, pos)
    per_signal = {s: _best(signal_hits.get(s, ()), citation_of, pos) for s in signals}
    parsed = [try_parse(c) for c in ranked]
    law = [p is not None and p.kind == "law" for p in parsed]
    art_of = [parent(c) for c in ranked]
    code_of = [p.code if is_law else "" for p, is_law in zip(parsed, law)]
    art_best: dict[str, int] = {}
    code_best: dict[str, int] = {}
    for i, (a, c) in enumerate(zip(art_of, code_of)):
        art_best.setdefault(a, i)
        code_best.setdefault(c, i)

    def count_in(keys: list[str], key: str, n: int) -> int:
        return sum(1 for x in keys[:n] if x == key)

    named = {x.citation.code for x in extract(text) if x.citation.kind == "law"}
    qlen = math.log1p(len(text.split()))
    lengths = [len(t or "") for t in corpus.texts(docs)]
    rows = np.zeros((len(ranked), len(names)), dtype=np.float64)
    for i, c in enumerate(ranked):
        a, code = art_of[i], code_of[i]
        f = dict(absent)
        f.update(fused_rank=i, fused_log_rank=math.log1p(i))
        if c in fused_best:
            f["fused_rel"] = fused_best[c][1]
        listing = 0
        for s in signals:
            if c in per_signal[s]:
                rank, f[f"{s}_rel"] = per_signal[s][c]
                f[f"{s}_log_rank"] = math.log1p(rank)
                listing += rank < ABSENT  # as set 1 was trained: a rank at or past ABSENT is not counted as listed
        f["signals_listing"] = listing
        f.update(article_best_log_rank=math.log1p(art_best[a]), article_best=float(art_best[a] == i),
                 article_top10=count_in(art_of, a, 10), article_top30=count_in(art_of, a, 30))
        if code:
            f.update(code_best_log_rank=math.log1p(code_best[code]), code_top10=count_in(code_of, code, 10),
                     code_top30=count_in(code_of, code, 30), code_top100=count_in(code_of, code, 100))
        para = parsed[i].paragraph if law[i] else None
        if para is not None and str(para).isdigit():
            f["paragraph"] = float(para)
        f.update(code_named=float(code in named), codes_named=len(named), is_law=float(law[i]),
                 has_paragraph=float(para is not None), text_log_len=math.log1p(lengths[i]), query_log_len=qlen)
        rows[i] = [f.pop(n) for n in names]
        if f:  # a name set above that is no feature: a typo would otherwise leave its feature at the absent value
            raise KeyError(f"ranker features set but not among feature_names: {', '.join(sorted(f))}")
    return docs, ranked, rows
