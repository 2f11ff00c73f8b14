"""A validation run: pipeline over a gold file, metrics JSON and a per-query CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from lexrag.config import Config
from lexrag.metrics import evaluate, per_query_table
from lexrag.pipeline import Artifacts, RunResult, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.submission import write_submission

__all__ = ["validate_run", "format_metrics"]


def format_metrics(metrics: dict, title: str = "") -> str:
    """A small aligned table of the metrics (for the demo and notebooks)."""
    keys = ["macro_f1", "precision", "recall", "recall@10", "recall@100", "ndcg@10", "map@10"]
    lines = [title] if title else []
    lines.append(f"{'metric':<12} value")
    for k in keys:
        if k in metrics:
            lines.append(f"{k:<12} {metrics[k]:.4f}")
    lines.append(f"{'queries':<12} {metrics.get('n_queries')}")
    return "\n".join(lines)


def validate_run(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path) -> tuple[dict, RunResult]:
    """Run over ``queries_path`` (which has ``gold_citations``) and write into ``out_dir``:
    ``submission.csv``, ``metrics.json`` (metrics, config, timings) and ``per_query.csv``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    result = run_pipeline(queries, artifacts, cfg)
    metrics = evaluate(gold, result.predictions, result.ranked)
    write_submission(out / "submission.csv", result.predictions, result.query_ids)
    rows = per_query_table(gold, result.predictions, result.ranked)
    with open(out / "per_query.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    doc = {"metrics": metrics, "queries": str(queries_path), "timings_s": result.timings,
           "degraded": result.degraded, "config": cfg.to_dict()}
    (out / "metrics.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return metrics, result
