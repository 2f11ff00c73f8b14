#!/usr/bin/env python
"""Quality of the pipeline on the real data in ../shared/data (a script, not a test).

Builds the artifacts from laws_de.csv (plus court considerations when given), runs the
pipeline over each query file and prints Macro F1, precision, recall and Recall@100 per
configuration.  The citation count k of the fixed cut is chosen by 5-fold cross-validation on
lexam_dev.csv (the tuning set); val.csv and train_dev.csv are only ever scored.

  python scripts/quality.py --data ../shared/data [--courts FILE] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml
from lexrag.config import load_config
from lexrag.eval.metrics import evaluate
from lexrag.index.build import build_artifacts
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

KS = list(range(1, 31))


def cut(ranked: dict[str, list[str]], k: int) -> dict[str, list[str]]:
    return {q: r[:k] for q, r in ranked.items()}


def cv_choose_k(gold: dict, ranked: dict, folds: int = 5, seed: int = 0) -> tuple[float, list[int]]:
    """Mean held-out Macro F1 of the fixed cut whose k is chosen on the other folds."""
    qids = sorted(gold)
    random.Random(seed).shuffle(qids)
    parts = [qids[i::folds] for i in range(folds)]
    scores, chosen = [], []
    for i in range(folds):
        train = {q: gold[q] for j, p in enumerate(parts) if j != i for q in p}
        test = {q: gold[q] for q in parts[i]}
        best = max(KS, key=lambda k: evaluate(train, cut(ranked, k), ks=(100,))["macro_f1"])
        chosen.append(best)
        scores.append(evaluate(test, cut(ranked, best), ks=(100,))["macro_f1"] * len(test))
    return sum(scores) / len(qids), chosen


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

    # k by cross-validation on the tuning set; the median chosen k is then applied elsewhere
    for name in variants:
        gold, ranked = ranked_by[(name, args.tune_on)]
        cv_f1, chosen = cv_choose_k(gold, ranked)
        k_star = sorted(chosen)[len(chosen) // 2]
        results[(name, args.tune_on, f"CV-chosen k (folds: {chosen})")] = {"macro_f1": cv_f1}
        for qfile in args.queries:
            if qfile == args.tune_on:
                continue
            g, r = ranked_by[(name, qfile)]
            results[(name, qfile, f"fixed k={k_star} (CV on {args.tune_on})")] = evaluate(g, cut(r, k_star), r, ks=(100,))

    print("| signals | queries | count | Macro F1 | precision | recall | Recall@100 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, qfile, count), m in results.items():
        cells = [f"{m[k]:.3f}" if k in m else "" for k in ("macro_f1", "precision", "recall", "recall@100")]
        print(f"| {name} | {qfile} | {count} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({" / ".join(k): v for k, v in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
