"""A validation run: pipeline over a gold file, metrics JSON and a per-query CSV."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from lexrag.config import Config
from lexrag.eval.metrics import evaluate, per_query_table
from lexrag.eval.submission import write_submission
from lexrag.pipeline import Artifacts, RunResult, run_pipeline
from lexrag.queries import load_gold, load_queries

__all__ = ["validate_run", "format_metrics", "ablation_table", "incremental_ablation", "plot_ablation", "ABLATABLE",
           "INCREMENTAL"]

# stage -> (config switch, Artifacts field that carries it or None)
ABLATABLE = {
    "seeds": ("seeds", None),
    "lexical": ("lexical", "bm25"),  # also drops BM25's choice of a graph node's document
    "semantic": ("semantic", "dense"),
    "graph": ("graph", "graph"),
    "prior": ("prior", "prior"),
    "rerank": ("rerank", None),
    "llm": ("llm", None),
    "verify": ("verify", None),
    "agent": ("agent", None),
}

# the LLM rows of the incremental ablation: (row, config switch) added one after the other
INCREMENTAL = (("+LLM rewrite", "llm"), ("+verification", "verify"), ("+agentic loop", "agent"), ("+adaptive count", "count"))


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


def validate_run(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path,
                 paths=None) -> tuple[dict, RunResult]:
    """Run over ``queries_path`` (which has ``gold_citations``) and write into ``out_dir``:
    ``submission.csv``, ``metrics.json`` (metrics, config, timings, skipped stages, model loads,
    cost per stage: LLM calls, prompt and generated tokens, seconds), ``per_query.csv`` and
    ``variants.jsonl`` (each query's variants with their origin, LLM concepts and citations) and
    ``agent_trace.jsonl`` (one record per agentic-loop round: queries written, items kept, tokens,
    seconds; empty when the loop is off)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    result = run_pipeline(queries, artifacts, cfg, paths=paths)
    metrics = evaluate(gold, result.predictions, result.ranked)
    write_submission(out / "submission.csv", result.predictions, result.query_ids)
    rows = per_query_table(gold, result.predictions, result.ranked)
    with open(out / "per_query.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    n = max(len(result.query_ids), 1)
    totals = result.cost_totals()
    doc = {"metrics": metrics, "queries": str(queries_path), "timings_s": result.timings,
           "degraded": result.degraded, "skipped": result.skipped, "dropped": result.dropped,
           "failed": result.failed, "model_loads": result.model_loads,
           "cost": {"total": totals, "per_query_mean": {s: {k: v / n for k, v in a.items()} for s, a in totals.items()},
                    "per_query": result.costs},
           "config": cfg.to_dict()}
    with open(out / "agent_trace.jsonl", "w", encoding="utf-8") as f:
        for rec in result.traces:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with open(out / "variants.jsonl", "w", encoding="utf-8") as f:
        for q in result.states:
            f.write(json.dumps({"query_id": q.query_id, "variants": {k: {"text": v.text, "origin": v.origin} for k, v in q.variants.items()},
                                "concepts": q.concepts, "llm_citations": q.llm_citations}, ensure_ascii=False) + "\n")
    (out / "metrics.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    return metrics, result


def ablation_table(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path) -> list[dict]:
    """Metrics of the full run and of the run with each active stage switched off in turn.

    Artifacts are loaded once; switching a stage off clears its config flag and its loaded
    component.  Writes ``ablation.csv`` (one row per run, with the change in Macro F1 and
    Recall@100 against the full run) and returns the rows.
    """
    import copy
    import dataclasses

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)

    def measure(name: str, c: Config, art: Artifacts) -> dict:
        return _measure(name, c, art, queries, gold)

    rows = [measure("full", cfg, artifacts)]
    for stage, (section, field) in ABLATABLE.items():
        if not getattr(cfg, section).enabled or (field and getattr(artifacts, field) is None):
            continue
        c = copy.deepcopy(cfg)
        getattr(c, section).enabled = False
        art = dataclasses.replace(artifacts, **({field: None} if field else {}))
        rows.append(measure(f"without {stage}", c, art))
    for r in rows:
        r["delta_macro_f1"] = r["macro_f1"] - rows[0]["macro_f1"]
        r["delta_recall@100"] = r["recall@100"] - rows[0]["recall@100"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ablation.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def _measure(name: str, c: Config, art: Artifacts, queries, gold, paths=None) -> dict:
    res = run_pipeline(queries, art, c, paths=paths)
    m = evaluate(gold, res.predictions, res.ranked)
    n = max(len(res.query_ids), 1)
    return {"run": name, **{k: m[k] for k in ("macro_f1", "precision", "recall", "recall@10", "recall@100", "ndcg@10")},
            "seconds": round(res.timings["total"], 2), "seconds_per_query": round(res.timings["total"] / n, 4)}


def incremental_ablation(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path,
                         paths=None) -> list[dict]:
    """The LLM stages added one after the other: retrieval without the LLM, +LLM rewrite,
    +verification, +agentic loop, +adaptive count.  A stage the config leaves off (or whose model
    is absent) is shown as such and not run.  Before the last row the count is the config's own
    (``fixed`` when the config says ``adaptive``).  Writes ``incremental.csv``."""
    import copy

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    base = copy.deepcopy(cfg)
    for section in ("llm", "verify", "agent"):
        getattr(base, section).enabled = False
    if base.count.method == "adaptive":
        base.count.method = "fixed"
    rows = [_measure("retrieval (no LLM)", base, artifacts, queries, gold, paths)]
    c = base
    for name, switch in INCREMENTAL:
        c = copy.deepcopy(c)
        if switch == "count":
            on = cfg.count.method == "adaptive" or cfg.llm.enabled
            c.count.method = "adaptive"
        else:
            on = getattr(cfg, switch).enabled and (cfg.llm.enabled and artifacts.llm_ready)
            getattr(c, switch).enabled = True
        if not on:
            rows.append({"run": name, "status": "off in this config"})
            c = copy.deepcopy(c)
            if switch != "count":
                getattr(c, switch).enabled = False
            continue
        if switch == "count" and artifacts.calibration is None:
            rows.append({**_measure(name, c, artifacts, queries, gold, paths), "status": "no calibration: n_cal left out"})
        else:
            rows.append(_measure(name, c, artifacts, queries, gold, paths))
    prev = None
    for r in rows:
        r.setdefault("status", "ran")
        if "macro_f1" in r:
            r["delta_macro_f1"] = r["macro_f1"] - prev["macro_f1"] if prev else 0.0
            prev = r
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fields = ["run", "status", "macro_f1", "delta_macro_f1", "precision", "recall", "recall@10", "recall@100", "ndcg@10",
              "seconds", "seconds_per_query"]
    with open(out / "incremental.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return rows


def plot_ablation(rows: list[dict], path: str | Path) -> Path:
    """Bar chart of Macro F1 and Recall@100 per ablation run, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in rows if "macro_f1" in r]
    names = [r["run"] for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(rows) + 1.5), 3.2))
    ax.bar(x - 0.2, [r["macro_f1"] for r in rows], 0.4, label="Macro F1")
    ax.bar(x + 0.2, [r["recall@100"] for r in rows], 0.4, label="Recall@100")
    ax.set_xticks(x, names, rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("ablation")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
