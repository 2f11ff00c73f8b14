#!/usr/bin/env python
"""Experiment (not a test): does a learned ranker over features that name no law code or legal
area reorder the fused top of lexam_dev questions from legal areas it never saw?

  python scripts/experiment_ranker.py --data ../shared/data --artifacts ARTIFACTS [--json OUT]
  python scripts/experiment_ranker.py ... --set num_leaves=7 --set n_estimators=100 --drop text_log_len query_log_len

The candidates are each question's fused ranking (:data:`DEPTH` deep) from a configuration
that fits nothing on training gold (BM25, citation seeds, statutes by the codes a question
names and by the BM25 vote, articles, feedback; no prior, no learned statute model), so the
only thing fitted is the ranker.  Per candidate: each signal's rank and relative score, how many
signals list it, the fused rank and score, its article's and its code's standing in the list
(best rank, how many of the top 10/30/100 they hold), whether the question names its code,
kind, paragraph, text and question length.  No feature names a code or an area.

LightGBM's LambdaRank (fixed parameters, :data:`PARAMS`) is fitted per outer legal area on the
other development areas and ranks the held-out area; the count k for it is chosen on inner
folds (a ranker fitted without the outer and the inner area ranks the inner one).  The fused
order at its own nested k is the baseline, in the same run.  The locked areas are not read.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np

from lexrag.citations import extract, parent, scoring_form, try_parse
from lexrag.config import load_config
from lexrag.eval.cv import area_groups, grouped_folds, legal_areas, read_groups, read_locked_split, refits_prior
from lexrag.eval.experiment import KS, RANK, f1_at_ks
from lexrag.eval.metrics import recall_at_k
from lexrag.eval.stats import bootstrap_ci
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

DEPTH = 300  # candidates a question's ranker reorders
ABSENT = 1000.0  # the rank of a candidate a signal does not list
PARAMS = {"objective": "lambdarank", "n_estimators": 300, "learning_rate": 0.05, "num_leaves": 15, "min_child_samples": 50,
          "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8, "lambdarank_truncation_level": 30,
          "random_state": 0, "verbose": -1, "n_jobs": 2}
CONFIG = {**RANK, "graph.enabled": False, "prior.enabled": False, "statutes.enabled": True, "statutes.learned": False,
          "articles.enabled": True, "feedback.enabled": True}


def features(res, qid: str, text: str, citation_of: list[str], length, signals: list[str]):
    """The feature rows of a question's candidates (its fused citations, best first)."""
    ranked = res.ranked.get(qid, [])[:DEPTH]
    pos = {c: i for i, c in enumerate(ranked)}
    per_signal: dict[str, dict[str, tuple[int, float]]] = {}
    for r in [res.fused, *res.signals]:
        hits = r.hits.get(qid, [])
        top = max((s for _, s in hits), default=0.0) or 1.0
        best: dict[str, tuple[int, float]] = {}
        for rank, (d, s) in enumerate(hits):
            c = citation_of[d]
            if c in pos and c not in best:
                best[c] = (rank, s / top)
        per_signal["fused" if r is res.fused else r.signal] = best
    art_of = [parent(c) for c in ranked]
    parsed = [try_parse(c) for c in ranked]
    code_of = [p.code if p is not None and p.kind == "law" else "" for p in parsed]
    art_best: dict[str, int] = {}
    code_best: dict[str, int] = {}
    for i, (a, c) in enumerate(zip(art_of, code_of)):
        art_best.setdefault(a, i)
        code_best.setdefault(c, i)

    def count_in(keys, key, n):
        return sum(1 for x in keys[:n] if x == key)

    named = {x.citation.code for x in extract(text) if x.citation.kind == "law"}
    qlen = math.log1p(len(text.split()))
    rows = []
    for i, c in enumerate(ranked):
        p = parsed[i]
        row = [i, math.log1p(i), per_signal["fused"].get(c, (ABSENT, 0.0))[1]]
        listed = 0
        for s in signals:
            rank, rel = per_signal.get(s, {}).get(c, (ABSENT, 0.0))
            listed += rank < ABSENT
            row += [math.log1p(rank), rel]
        a, code = art_of[i], code_of[i]
        row += [listed, math.log1p(art_best[a]), float(art_best[a] == i), count_in(art_of, a, 10), count_in(art_of, a, 30),
                math.log1p(code_best[code]) if code else ABSENT, count_in(code_of, code, 10) if code else 0,
                count_in(code_of, code, 30) if code else 0, count_in(code_of, code, 100) if code else 0,
                float(code in named), len(named), float(p is not None and p.kind == "law"),
                float(p is not None and p.kind == "law" and p.paragraph is not None),
                float(p.paragraph) if p is not None and p.kind == "law" and (p.paragraph or "").isdigit() else 0.0,
                math.log1p(length(c)), qlen]
        rows.append(row)
    return ranked, np.array(rows, dtype=np.float64).reshape(len(ranked), len(feature_names(signals)))


def feature_names(signals: list[str]) -> list[str]:
    return (["fused_rank", "fused_log_rank", "fused_rel"] + [f"{s}_{x}" for s in signals for x in ("log_rank", "rel")]
            + ["signals_listing", "article_best_log_rank", "article_best", "article_top10", "article_top30",
               "code_best_log_rank", "code_top10", "code_top30", "code_top100", "code_named", "codes_named", "is_law",
               "has_paragraph", "paragraph", "text_log_len", "query_log_len"])


def fit(X: list[np.ndarray], y: list[np.ndarray]):
    import lightgbm as lgb  # checked in main

    model = lgb.LGBMRanker(**PARAMS)
    keep = [i for i, t in enumerate(y) if t.any()]  # a question with no gold among its candidates teaches no order
    model.fit(np.vstack([X[i] for i in keep]), np.concatenate([y[i] for i in keep]), group=[len(y[i]) for i in keep])
    return model


def reorder(model, X: np.ndarray, ranked: list[str], tail: list[str]) -> list[str]:
    if not len(ranked):
        return tail
    order = np.lexsort((np.arange(len(ranked)), -model.predict(X)))  # ties keep the fused order
    return [ranked[i] for i in order] + tail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE", help="a LightGBM parameter (repeatable)")
    ap.add_argument("--drop", nargs="*", default=[], metavar="FEATURE", help="features left out of the ranker")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        print("error: this experiment needs LightGBM (pip install -r requirements.txt)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    data = Path(args.data)
    tune = data / "lexam_dev.csv"
    gold_all = {q: g for q, g in load_gold(tune).items() if g}
    courses = read_groups(tune)
    q_area = area_groups(courses, legal_areas(gold_all, courses))
    locked = {c for a in read_locked_split().get("areas", []) for c in a.get("courses", [])}
    gold = {q: g for q, g in gold_all.items() if courses.get(q, "") not in locked}
    cfg = load_config(None, CONFIG)
    art = Artifacts.load(args.artifacts, cfg)
    assert not refits_prior(art, cfg), "the candidate configuration must fit nothing on training gold"
    queries = {q.query_id: q for q in load_queries(tune, cfg.query.max_chars) if q.query_id in gold}
    res = run_pipeline(list(queries.values()), art, cfg)
    t_run = time.perf_counter() - t0
    citation_of = art.corpus.column("citation")
    lengths: dict[str, int] = {}

    def length(c: str) -> int:
        if c not in lengths:
            docs = art.corpus.docs_of(c)
            lengths[c] = len(art.corpus.texts(docs[:1])[0]) if docs else 0
        return lengths[c]

    signals = sorted({r.signal for r in res.signals})
    names = feature_names(signals)
    unknown = [f for f in args.drop if f not in names]
    if unknown:
        print(f"error: --drop {' '.join(unknown)}: no such feature; the features: {', '.join(names)}", file=sys.stderr)
        return 2
    for kv in args.set:
        key, _, value = kv.partition("=")
        PARAMS[key] = json.loads(value) if value[:1].isdigit() or value[:1] in "-[{" else value
    cols = [i for i, n in enumerate(names) if n not in set(args.drop)]
    names = [names[i] for i in cols]
    cand: dict[str, tuple[list[str], np.ndarray, np.ndarray, list[str]]] = {}
    for q, g in gold.items():
        ranked, X = features(res, q, queries[q].text, citation_of, length, signals)
        gs = {scoring_form(x) for x in g}
        y = np.array([scoring_form(c) in gs for c in ranked], dtype=np.int32)
        cand[q] = (ranked, X[:, cols], y, res.ranked.get(q, [])[DEPTH:])
    folds = grouped_folds(list(gold), q_area)
    area_of_fold = [q_area[f[0]] for f in folds]

    def ranker_rankings(train_folds, test_fold):
        tr = [q for f in train_folds for q in f]
        model = fit([cand[q][1] for q in tr], [cand[q][2] for q in tr])
        return {q: reorder(model, cand[q][1], cand[q][0], cand[q][3]) for q in test_fold}, model

    fused = {q: res.ranked.get(q, []) for q in gold}
    curves_fused = {q: f1_at_ks(gold[q], fused[q]) for q in gold}
    out_ranker: dict[str, list[str]] = {}
    k_fused, k_ranker = [], []
    importance = np.zeros(len(names))
    for i, fold in enumerate(folds):
        others = [f for j, f in enumerate(folds) if j != i]
        ranked, model = ranker_rankings(others, fold)
        out_ranker.update(ranked)
        importance += model.booster_.feature_importance("gain")
        inner: dict[str, np.ndarray] = {}
        for j, f in enumerate(others):
            r, _ = ranker_rankings([g for m, g in enumerate(others) if m != j], f)
            inner.update({q: f1_at_ks(gold[q], r[q]) for q in f})
        k_ranker.append(KS[int(np.argmax(np.mean(list(inner.values()), axis=0)))])
        k_fused.append(KS[int(np.argmax(np.mean([curves_fused[q] for f in others for q in f], axis=0)))])
        print(f"area {area_of_fold[i]!r}: {len(fold)} questions, k fused {k_fused[-1]}, k ranker {k_ranker[-1]}", file=sys.stderr)

    def row(rankings, ks):
        f1 = {q: float(f1_at_ks(gold[q], rankings[q], (k,))[0]) for f, k in zip(folds, ks) for q in f}
        lo, hi = bootstrap_ci(list(f1.values()))
        f13 = float(np.mean([f1_at_ks(gold[q], rankings[q], (3,))[0] for q in gold]))
        r100 = float(np.mean([recall_at_k(gold[q], rankings[q], 100) for q in gold]))
        return {"f1_nested": round(float(np.mean(list(f1.values()))), 4), "ci": [round(lo, 4), round(hi, 4)],
                "f1@3": round(f13, 4), "recall@100": round(r100, 4), "k_picks": ks, "per_question": f1}

    base, learned = row(fused, k_fused), row(out_ranker, k_ranker)
    diff = [learned["per_question"][q] - base["per_question"][q] for q in gold]
    dlo, dhi = bootstrap_ci(diff)
    hits = {q: sum(scoring_form(c) in {scoring_form(x) for x in gold[q]} for c in fused[q][:100]) for q in gold}
    oracle = float(np.mean([2 * hits[q] / (hits[q] + len({scoring_form(x) for x in gold[q]})) for q in gold]))
    top = sorted(zip(names, importance), key=lambda t: -t[1])[:12]
    doc = {"questions": len(gold), "areas": len(folds), "signals": signals, "params": PARAMS, "candidate_config": CONFIG,
           "features": names,
           "fused": {k: v for k, v in base.items() if k != "per_question"},
           "ranker": {k: v for k, v in learned.items() if k != "per_question"},
           "delta_f1_nested": round(float(np.mean(diff)), 4), "delta_ci": [round(dlo, 4), round(dhi, 4)],
           "oracle_top100_reordered_cut_at_hits": round(oracle, 4),
           "gain_importance_top": [[n, round(float(v), 1)] for n, v in top],
           "seconds": {"pipeline": round(t_run, 1), "total": round(time.perf_counter() - t0, 1)}}
    print("| order | area F1 nested [95% CI] | F1@3 | R@100 | k per area |\n| --- | --- | --- | --- | --- |")
    for name, r in (("fused (the candidate configuration)", base), ("LambdaRank over generic features", learned)):
        print(f"| {name} | {r['f1_nested']:.4f} [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}] | {r['f1@3']:.4f} | {r['recall@100']:.4f} | {r['k_picks']} |")
    print(f"difference {doc['delta_f1_nested']:+.4f} [{dlo:+.4f}, {dhi:+.4f}]; oracle (top 100 reordered, cut at the hits) "
          f"{oracle:.4f}; {len(gold)} questions of {len(folds)} areas; {doc['seconds']['total']:.0f} s")
    print("features by gain:", ", ".join(f"{n} {v:.0f}" for n, v in top))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
