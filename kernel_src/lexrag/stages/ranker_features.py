"""The learned ranker's features: per candidate citation, numbers that name no
law code or legal area (ranks and scores in the fused list and in each signal, how its article
and its code stand in the list, whether the question names its code, its kind and length), so
what a model learns from them can carry over to legal areas the training questions never touched.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from lexrag.citations import extract, parent, try_parse
from lexrag.stages.count import unique_citations

__all__ = ["FEATURE_SET", "ABSENT", "GENERIC", "feature_names", "candidate_features"]

FEATURE_SET = 1  # raise when a feature changes meaning: older models are then refused, not misread
ABSENT = 1000.0  # the rank of a candidate a signal does not list
GENERIC = ("signals_listing", "article_best_log_rank", "article_best", "article_top10", "article_top30",
           "code_best_log_rank", "code_top10", "code_top30", "code_top100", "code_named", "codes_named", "is_law",
           "has_paragraph", "paragraph", "text_log_len", "query_log_len")


def feature_names(signals: Sequence[str]) -> list[str]:
    """The feature columns for a model trained with ``signals`` (sorted signal names)."""
    return (["fused_rank", "fused_log_rank", "fused_rel"] + [f"{s}_{x}" for s in signals for x in ("log_rank", "rel")]
            + list(GENERIC))


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
    citations of ``fused``, best first) and their feature rows (:func:`feature_names`)."""
    docs, ranked, _ = unique_citations(fused, corpus)
    docs, ranked = docs[:depth], ranked[:depth]
    names = feature_names(signals)
    if not ranked:
        return [], [], np.zeros((0, len(names)), dtype=np.float64)
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
        p, a, code = parsed[i], art_of[i], code_of[i]
        row = [i, math.log1p(i), fused_best.get(c, (ABSENT, 0.0))[1]]
        listed = 0
        for s in signals:
            rank, rel = per_signal[s].get(c, (ABSENT, 0.0))
            listed += rank < ABSENT
            row += [math.log1p(rank), rel]
        para = p.paragraph if law[i] else None
        row += [listed, math.log1p(art_best[a]), float(art_best[a] == i), count_in(art_of, a, 10), count_in(art_of, a, 30),
                math.log1p(code_best[code]) if code else ABSENT, count_in(code_of, code, 10) if code else 0,
                count_in(code_of, code, 30) if code else 0, count_in(code_of, code, 100) if code else 0,
                float(code in named), len(named), float(law[i]), float(para is not None),
                float(para) if para is not None and str(para).isdigit() else 0.0, math.log1p(lengths[i]), qlen]
        rows[i] = row
    return docs, ranked, rows
