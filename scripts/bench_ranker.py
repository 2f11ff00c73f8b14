#!/usr/bin/env python
"""Benchmark (not a test): what the learned ranker costs.

  python scripts/bench_ranker.py --data ../shared/data --artifacts ARTIFACTS [--questions 200] [--json OUT]

ARTIFACTS holds at least the corpus and BM25 built over the laws (docs/experiments.md).  Measured,
one process, LightGBM on the threads OMP_NUM_THREADS allows (all cores when unset):

- training on lexam_dev's questions: the candidate run (BM25, statutes by vote, articles,
  feedback over every training question), the feature rows, the fit (LambdaRank and the two
  half-fits that calibrate the probabilities), each timed;
- the stage per question: features of the top ``ranker.depth`` candidates, the model's scores,
  the order; timed by the pipeline's own stage timer over ``--questions`` questions, with the
  fused run beside it (the same questions, the ranker off) for scale.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import benchkit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--questions", type=int, default=200, help="questions the stage is timed on")
    ap.add_argument("--json", help="write the numbers here")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("questions",), within=[("artifacts", "corpus"), ("data", "lexam_dev.csv")],
                     outputs=("json",))
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore", UserWarning)
    from lexrag.errors import ArtifactError, require

    try:
        require("ranker benchmark", "ranker", "lightgbm", error=ArtifactError)
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import lightgbm
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.pipeline.ranker_fit import candidate_config, training_rows
    from lexrag.queries import load_gold, load_queries
    from lexrag.stages.ranker import LearnedRanker

    train = Path(args.data) / "lexam_dev.csv"
    over = {"runtime.progress": False, "statutes.enabled": True, "articles.enabled": True, "feedback.enabled": True}
    cfg = candidate_config(load_config(None, over))
    art = Artifacts.from_folder(args.artifacts, cfg)
    gold = {q: g for q, g in load_gold(train).items() if g}
    queries = [q for q in load_queries(train, cfg.query.max_chars) if q.query_id in gold]
    t0 = time.perf_counter()
    rows, signals = training_rows(queries, gold, art, cfg)
    t_rows = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = LearnedRanker.fit(rows, signals)
    t_fit = time.perf_counter() - t0
    n_rows = sum(len(y) for y in rows.y)

    sample = queries[: args.questions]
    run_cfg = load_config(None, {**over, "ranker.enabled": True, "count.method": "expected_f1"})
    art.ranker = model
    runs = {}
    for name, c in (("fused", load_config(None, over)), ("ranker", run_cfg)):
        t0 = time.perf_counter()
        res = run_pipeline(sample, art, c)
        runs[name] = {"seconds": time.perf_counter() - t0, "stages": res.timings}
    per_q_ms = 1000 * runs["ranker"]["stages"].get("ranker", 0.0) / len(sample)
    doc = {"lightgbm": lightgbm.__version__, "training_questions": len(rows.qids), "training_rows": n_rows,
           "features": len(model.features), "rows_seconds": round(t_rows, 1), "fit_seconds": round(t_fit, 1),
           "stage_questions": len(sample), "stage_ms_per_question": round(per_q_ms, 1),
           "fused_run_seconds": round(runs["fused"]["seconds"], 1), "ranker_run_seconds": round(runs["ranker"]["seconds"], 1)}
    print(f"training on {len(rows.qids)} questions ({n_rows:,} candidate rows, {len(model.features)} features): candidate run "
          f"and rows {t_rows:.1f} s, fit {t_fit:.1f} s (LambdaRank, article model, two calibration half-fits)")
    print(f"ranker stage: {per_q_ms:.1f} ms per question over {len(sample)} questions (depth {run_cfg.ranker.depth}); "
          f"whole run {runs['ranker']['seconds']:.1f} s against {runs['fused']['seconds']:.1f} s without it")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
