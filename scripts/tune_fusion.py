#!/usr/bin/env python
"""Cross-validated grid over fusion weights and the fixed k (a script, not a test).

Runs the pipeline once per weight combination over the tuning file, then picks (weights, k) on
four folds and scores the fifth, five times; prints each combination's Macro F1@k on the tuning
file and on a held-out file, and the cross-validated held-out score next to the defaults'.

  python scripts/tune_fusion.py --artifacts ARTIFACTS --data ../shared/data \\
      --grid prior_cocited=0.5,1,2 prior_frequent=0.25,0.5,1 bm25_query=1,2 --set prior.enabled=true
"""

from __future__ import annotations

import argparse
import itertools
import random
import warnings

import numpy as np
from lexrag.config import load_config, parse_overrides
from lexrag.eval.metrics import prf
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

KS = list(range(1, 11))


def f1_matrix(queries, gold, art, cfg) -> np.ndarray:
    res = run_pipeline(queries, art, cfg)
    return np.array([[prf(gold[q.query_id], res.ranked[q.query_id][:k])[2] for k in KS] for q in queries])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--tune-on", default="lexam_dev.csv")
    ap.add_argument("--held-out", default="train_dev.csv", help="scored with every combination, never used to choose")
    ap.add_argument("--grid", nargs="+", required=True, help="SIGNAL=w1,w2,... fusion weights to try")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    base = {"runtime.progress": False, "count.method": "fixed", "count.k": 300}
    extra = parse_overrides(args.set)
    cfg0 = load_config(None, {**base, **extra})
    art = Artifacts.load(args.artifacts, cfg0)
    tq, tg = load_queries(f"{args.data}/{args.tune_on}"), load_gold(f"{args.data}/{args.tune_on}")
    hq, hg = load_queries(f"{args.data}/{args.held_out}"), load_gold(f"{args.data}/{args.held_out}")
    names = [g.split("=")[0] for g in args.grid]
    values = [[float(v) for v in g.split("=")[1].split(",")] for g in args.grid]
    combos = list(itertools.product(*values))
    F, H = {}, {}
    for combo in combos:
        weights = {**cfg0.fusion.weights, **dict(zip(names, combo))}
        cfg = load_config(None, {**base, **extra, "fusion.weights": weights})
        F[combo], H[combo] = f1_matrix(tq, tg, art, cfg), f1_matrix(hq, hg, art, cfg)
        print(f"{dict(zip(names, combo))}: {args.tune_on} F1@3 {F[combo][:, 2].mean():.4f} F1@5 {F[combo][:, 4].mean():.4f} | "
              f"{args.held_out} F1@3 {H[combo][:, 2].mean():.4f} F1@5 {H[combo][:, 4].mean():.4f}", flush=True)
    idx = list(range(len(tq)))
    random.Random(0).shuffle(idx)
    folds = [idx[i::5] for i in range(5)]
    total, chosen = 0.0, []
    for i in range(5):
        train = [j for f, p in enumerate(folds) if f != i for j in p]
        best = max(((c, k) for c in combos for k in range(len(KS))), key=lambda ck: F[ck[0]][train, ck[1]].mean())
        chosen.append((dict(zip(names, best[0])), best[1] + 1))
        total += F[best[0]][folds[i], best[1]].sum()
    print(f"cross-validated held-out Macro F1 on {args.tune_on}: {total / len(tq):.4f}; chosen per fold: {chosen}")
    default = tuple(cfg0.fusion.weights.get(n, cfg0.fusion.default_weight) for n in names)
    if default in F:
        print(f"defaults {dict(zip(names, default))}: {args.tune_on} F1@3 {F[default][:, 2].mean():.4f}, "
              f"{args.held_out} F1@3 {H[default][:, 2].mean():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
