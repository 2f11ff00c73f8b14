"""Evaluation: the competition's Macro F1, and ranking metrics over the predicted order.

Citation strings are compared exactly after ``strip`` and whitespace collapse (the
competition's rule).  Per query: precision, recall and F1 of the predicted set; a query whose
gold and prediction are both empty scores 1 on all three, one empty and the other not scores 0.
Macro = mean over queries.  Ranking metrics use the prediction order with binary relevance:
Recall@k = |top-k ∩ gold| / |gold|; nDCG@k with gains 1/log2(rank+1) and the ideal DCG of
min(|gold|, k) hits; MAP@k = sum over hits at rank i of precision@i, divided by min(|gold|, k).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from lexrag.citations import law_codes, scoring_form

__all__ = ["norm", "prf", "recall_at_k", "ndcg_at_k", "ap_at_k", "evaluate", "per_query_table", "code_prediction"]


norm = scoring_form


def _dedup(pred: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(norm(p) for p in pred if norm(p)))


def prf(gold: Sequence[str], pred: Sequence[str]) -> tuple[float, float, float]:
    g = {norm(x) for x in gold if norm(x)}
    p = set(_dedup(pred))
    if not g and not p:
        return 1.0, 1.0, 1.0
    if not g or not p:
        return 0.0, 0.0, 0.0
    tp = len(g & p)
    prec, rec = tp / len(p), tp / len(g)
    f1 = 0.0 if tp == 0 else 2 * prec * rec / (prec + rec)
    return prec, rec, f1


def recall_at_k(gold: Sequence[str], ranked: Sequence[str], k: int) -> float:
    g = {norm(x) for x in gold if norm(x)}
    if not g:
        return 1.0
    return len(g & set(_dedup(ranked)[:k])) / len(g)


def ndcg_at_k(gold: Sequence[str], ranked: Sequence[str], k: int) -> float:
    g = {norm(x) for x in gold if norm(x)}
    if not g:
        return 1.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(_dedup(ranked)[:k]) if d in g)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), k)))
    return dcg / idcg


def ap_at_k(gold: Sequence[str], ranked: Sequence[str], k: int) -> float:
    g = {norm(x) for x in gold if norm(x)}
    if not g:
        return 1.0
    hits, total = 0, 0.0
    for i, d in enumerate(_dedup(ranked)[:k], start=1):
        if d in g:
            hits += 1
            total += hits / i
    return total / min(len(g), k)


def per_query_table(
    gold: Mapping[str, Sequence[str]],
    pred: Mapping[str, Sequence[str]],
    ranked: Mapping[str, Sequence[str]] | None = None,
    ks: Sequence[int] = (10, 100),
) -> list[dict]:
    """One row per gold query: sizes, precision, recall, F1 and the ranking metrics at ``ks``.

    ``pred`` is the emitted set (after the count stage); ``ranked`` the longer candidate list the
    ranking metrics use (defaults to ``pred``).  A query missing from ``pred`` counts as empty.
    """
    rows = []
    for qid, g in gold.items():
        p = list(pred.get(qid, []))
        r = list((ranked or pred).get(qid, p))
        prec, rec, f1 = prf(g, p)
        row = {"query_id": qid, "n_gold": len({norm(x) for x in g if norm(x)}), "n_pred": len(_dedup(p)),
               "precision": prec, "recall": rec, "f1": f1}
        for k in ks:
            row[f"recall@{k}"] = recall_at_k(g, r, k)
            row[f"ndcg@{k}"] = ndcg_at_k(g, r, k)
            row[f"map@{k}"] = ap_at_k(g, r, k)
        rows.append(row)
    return rows


def evaluate(
    gold: Mapping[str, Sequence[str]],
    pred: Mapping[str, Sequence[str]],
    ranked: Mapping[str, Sequence[str]] | None = None,
    ks: Sequence[int] = (10, 100),
) -> dict:
    """Macro averages over the gold queries: ``macro_f1``, ``precision``, ``recall``, ``recall@k``, ..."""
    rows = per_query_table(gold, pred, ranked, ks)
    if not rows:
        raise ValueError("no gold queries to evaluate")
    keys = [k for k in rows[0] if k not in ("query_id", "n_gold", "n_pred")]
    out = {("macro_f1" if k == "f1" else k): sum(r[k] for r in rows) / len(rows) for k in keys}
    out["n_queries"] = len(rows)
    return out


def code_prediction(gold: Mapping[str, Sequence[str]], predicted: Mapping[str, Sequence[str]]) -> dict:
    """How well predicted law codes match the codes of the gold citations, over the queries whose
    gold cites a law: ``precision`` = predicted codes that are gold codes / predicted codes (all
    queries pooled, so a query with no prediction costs nothing), ``recall`` = mean over queries of
    the share of their gold codes predicted, ``per_query`` = codes predicted per query, ``n`` =
    queries scored.  Gold is citation strings; predictions are codes ("OR")."""
    hits = n_pred = n = 0
    rec = 0.0
    for q, g in gold.items():
        codes = set(law_codes(g))
        if not codes:
            continue
        pred = list(dict.fromkeys(predicted.get(q, ())))
        tp = len(codes.intersection(pred))
        hits, n_pred, n, rec = hits + tp, n_pred + len(pred), n + 1, rec + tp / len(codes)
    return {"precision": hits / n_pred if n_pred else 0.0, "recall": rec / n if n else 0.0,
            "per_query": n_pred / n if n else 0.0, "n": n}
