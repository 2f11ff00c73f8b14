#!/usr/bin/env python
"""Quality of the pipeline on the real data in ../shared/data (a script, not a test).

Builds the artifacts from laws_de.csv (plus court considerations when given), runs the
pipeline over each query file and prints Macro F1 (with a 95% bootstrap interval over queries),
precision, recall and Recall@100 per configuration.  On the tuning set (lexam_dev.csv) two
numbers stand side by side: in-sample (k picked on all its queries; the prior leave-one-query-out)
and grouped cross-validation by course (each course's questions scored with the k picked on the
other courses, and with a prior fitted on the other courses only).  The k is then the median of
the folds' picks on train_dev.csv and val.csv, which are only ever scored.

  python scripts/quality.py --data ../shared/data [--courts FILE] [--artifacts DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml
from lexrag.config import load_config
from lexrag.eval.cv import grouped_folds, read_groups
from lexrag.eval.metrics import evaluate, per_query_table
from lexrag.eval.stats import bootstrap_ci
from lexrag.index.prior import TrainingPrior
from lexrag.index.build import build_artifacts
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

KS = list(range(1, 31))


def cut(ranked: dict[str, list[str]], k: int) -> dict[str, list[str]]:
    return {q: r[:k] for q, r in ranked.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--laws", help="default: DATA/laws_de.csv")
    ap.add_argument("--courts", help="court considerations CSV (optional)")
    ap.add_argument("--queries", nargs="*", default=["lexam_dev.csv", "train_dev.csv", "val.csv"])
    ap.add_argument("--tune-on", default="lexam_dev.csv", help="query file whose CV picks k")
    ap.add_argument("--artifacts", help="reuse (or write) artifacts here instead of a temp folder")
    ap.add_argument("--config")
    ap.add_argument("--train", help="query file (under --data) the training prior is built from; never val.csv")
    ap.add_argument("--variants", nargs="*", help="extra variants 'NAME:section.field=value;...' on top of bm25 + seeds")
    ap.add_argument("--only", nargs="*", help="run only these variant names")
    ap.add_argument("--no-keys", action="store_true", help="do not add laws_de_citations.txt keys without text")
    ap.add_argument("--json", help="write all numbers to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    data = Path(args.data)
    laws = Path(args.laws) if args.laws else data / "laws_de.csv"
    cfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, "graph.enabled": True})
    art_dir = Path(args.artifacts) if args.artifacts else Path(tempfile.mkdtemp(prefix="lexrag-quality-"))
    if args.train and Path(args.train).name == "val.csv":
        ap.error("the prior is never built from val.csv")
    if not (art_dir / "bm25" / "params.json").is_file():
        t0 = time.perf_counter()
        keys = data / "laws_de_citations.txt"
        build_artifacts(cfg, laws, art_dir, courts=args.courts, law_keys=keys if keys.is_file() and not args.no_keys else None,
                        train=data / args.train if args.train else None)
        print(f"built artifacts in {time.perf_counter() - t0:.1f}s -> {art_dir}", file=sys.stderr)

    base = {"graph.enabled": False, "prior.enabled": False}
    variants = {
        "bm25 only": {**base, "seeds.enabled": False},
        "bm25 + citation seeds": base,
        "+ graph": {**base, "graph.enabled": True},
    }
    if args.train:
        variants["+ prior"] = {**base, "prior.enabled": True}
        variants["+ graph + prior"] = {"graph.enabled": True, "prior.enabled": True}
    for v in args.variants or []:
        name, _, over = v.partition(":")
        variants[name] = {**base, **{k: yaml.safe_load(x) for k, x in (o.split("=", 1) for o in over.split(";") if o)}}
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only}
    results: dict = {}
    ranked_by: dict = {}
    for name, over in variants.items():
        vcfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, **over})
        art = Artifacts.load(art_dir, vcfg)
        for qfile in args.queries:
            qs = load_queries(data / qfile, vcfg.query.max_chars)
            gold = load_gold(data / qfile)
            t0 = time.perf_counter()
            res = run_pipeline(qs, art, vcfg)
            dt = (time.perf_counter() - t0) / max(len(qs), 1)
            ranked_by[(name, qfile)] = (gold, res.ranked)
            for k in (5, 10):
                m = evaluate(gold, cut(res.ranked, k), res.ranked, ks=(100,))
                results[(name, qfile, f"fixed k={k}")] = {**m, "s_per_query": dt}
            from lexrag.stages.count import elbow_count
            el = {}
            for q in qs:
                hits = res.current.hits.get(q.query_id, [])
                el[q.query_id] = res.ranked[q.query_id][: elbow_count([s for _, s in hits], vcfg.count.min_k, vcfg.count.max_k)]
            results[(name, qfile, "elbow [8,50]")] = {**evaluate(gold, el, res.ranked, ks=(100,)), "s_per_query": dt}

    # k by cross-validation grouped by course on the tuning set; the prior of a fold knows only its
    # training courses; the median chosen k is then applied elsewhere
    import dataclasses

    tune_file = data / args.tune_on
    groups = read_groups(tune_file)
    for name, over in variants.items():
        gold, ranked = ranked_by[(name, args.tune_on)]
        qids = [q for q in gold if gold[q]]
        folds = grouped_folds(qids, groups)
        best_all = max(KS, key=lambda k: evaluate({q: gold[q] for q in qids}, cut(ranked, k), ks=(100,))["macro_f1"])
        m_in = evaluate({q: gold[q] for q in qids}, cut(ranked, best_all), ranked, ks=(100,))
        results[(name, args.tune_on, f"in-sample k={best_all}")] = {**m_in, "ci": bootstrap_ci(
            [r["f1"] for r in per_query_table({q: gold[q] for q in qids}, cut(ranked, best_all))])}
        vcfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, **over})
        art = Artifacts.load(art_dir, vcfg)
        qs = {q.query_id: q for q in load_queries(tune_file, vcfg.query.max_chars)}
        held_pred, held_ranked, chosen = {}, {}, []
        for fold in folds:
            test = set(fold)
            train_gold = {q: gold[q] for q in qids if q not in test}
            k = max(KS, key=lambda kk: evaluate(train_gold, cut(ranked, kk), ks=(100,))["macro_f1"])
            chosen.append(k)
            fold_ranked = ranked
            uses_prior = vcfg.prior.enabled or (vcfg.statutes.enabled and vcfg.statutes.learned)
            if uses_prior and art.prior is not None:  # a prior (and statute model) that never saw the held-out course
                fart = dataclasses.replace(art, prior=TrainingPrior(train_gold, questions={
                    q: qs[q].text for q in train_gold if q in qs}))
                fold_ranked = run_pipeline([qs[q] for q in fold], fart, vcfg).ranked
            for q in fold:
                held_ranked[q] = fold_ranked[q]
                held_pred[q] = fold_ranked[q][:k]
        hg = {q: gold[q] for q in qids}
        m_cv = evaluate(hg, held_pred, held_ranked, ks=(100,))
        ci = bootstrap_ci([r["f1"] for r in per_query_table(hg, held_pred)])
        results[(name, args.tune_on, f"grouped CV by course ({len(folds)} folds), k median {sorted(chosen)[len(chosen) // 2]}")] = \
            {**m_cv, "ci": ci}
        k_star = sorted(chosen)[len(chosen) // 2]
        for qfile in args.queries:
            if qfile == args.tune_on:
                continue
            g, r = ranked_by[(name, qfile)]
            g = {q: v for q, v in g.items() if v}
            results[(name, qfile, f"fixed k={k_star} (grouped CV on {args.tune_on})")] = {
                **evaluate(g, cut(r, k_star), r, ks=(100,)), "ci": bootstrap_ci([x["f1"] for x in per_query_table(g, cut(r, k_star))])}

    print("| signals | queries | count | Macro F1 [95% CI] | precision | recall | Recall@100 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, qfile, count), m in results.items():
        if "ci" not in m:
            continue
        f1 = f"{m['macro_f1']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]"
        cells = [f"{m[k]:.3f}" if k in m else "" for k in ("precision", "recall", "recall@100")]
        print(f"| {name} | {qfile} | {count} | {f1} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({" / ".join(k): v for k, v in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
