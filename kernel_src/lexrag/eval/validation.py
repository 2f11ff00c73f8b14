"""A validation run: pipeline over a gold file, metrics JSON and a per-query CSV."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

from lexrag.config import Config
from lexrag.eval.metrics import evaluate, per_query_table
from lexrag.eval.status import run_status
from lexrag.eval.submission import write_submission
from lexrag.pipeline import Artifacts, RunResult, SignalCache, run_pipeline
from lexrag.queries import load_gold, load_queries

log = logging.getLogger(__name__)

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

# the incremental ablation: (row, what it switches on), each row adding one stage to the row before
INCREMENTAL = (
    ("BM25", "lexical"), ("+citation seeds", "seeds"), ("+semantic", "semantic"), ("+graph", "graph"), ("+prior", "prior"),
    ("+reranker", "rerank"), ("+LLM rewrite", "llm"), ("+verification", "verify"), ("+agentic loop", "agent"),
    ("+adaptive count", "count"),
)


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
    seconds; empty when the loop is off), ``signal_analysis.json`` (gold found per signal family and
    only by it, recall per citation kind, Macro F1 per course) and ``signals.parquet`` (every
    signal's ranking per query: the run file)."""
    out = Path(out_dir)
    from lexrag.artifacts import check_makeable

    check_makeable(out, "out_dir")
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
    status = run_status(cfg, artifacts, result)
    doc = {"status": status.to_dict(), "metrics": metrics, "queries": str(queries_path), "timings_s": result.timings,
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
    from lexrag.eval.cv import read_groups
    from lexrag.eval.report import signal_analysis

    analysis = signal_analysis(result, gold, artifacts.corpus, read_groups(queries_path))
    write_run_file(out / "signals.parquet", result, artifacts.corpus)
    (out / "signal_analysis.json").write_text(json.dumps(analysis, indent=2, ensure_ascii=False), encoding="utf-8")
    return metrics, result


def write_run_file(path: str | Path, result: RunResult, corpus) -> Path:
    """Every signal's ranking per query (and the fused, current and final orders) as one parquet
    table: query_id, signal, family, rank (1-based), doc_id, citation, score."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, list] = {k: [] for k in ("query_id", "signal", "family", "rank", "doc_id", "citation", "score")}
    for r in [*result.signals, result.fused, result.current]:
        for qid, hits in r.hits.items():
            for rank, (d, sc) in enumerate(hits, start=1):
                for k, v in zip(cols, (qid, r.signal, r.family, rank, int(d), corpus.citations[d], float(sc))):
                    cols[k].append(v)
    for qid, cits in result.predictions.items():
        for rank, c in enumerate(cits, start=1):
            for k, v in zip(cols, (qid, "final", "final", rank, -1, c, 0.0)):
                cols[k].append(v)
    pq.write_table(pa.table(cols), path, compression="zstd")
    return Path(path)


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

    cache = SignalCache()  # each signal computed once across the rows

    def measure(name: str, c: Config, art: Artifacts) -> dict:
        return _measure(name, c, art, queries, gold, cache=cache)

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


def _measure(name: str, c: Config, art: Artifacts, queries, gold, paths=None, cache=None) -> dict:
    res = run_pipeline(queries, art, c, paths=paths, cache=cache)
    m = evaluate(gold, res.predictions, res.ranked)
    n = max(len(res.query_ids), 1)
    return {"run": name, **{k: m[k] for k in ("macro_f1", "precision", "recall", "recall@10", "recall@100", "ndcg@10")},
            "seconds": round(res.timings["total"], 2), "seconds_per_query": round(res.timings["total"] / n, 4)}


def _available(cfg: Config, art: Artifacts, switch: str) -> str | None:
    """Why stage ``switch`` cannot be added in this run (None: it can)."""
    if switch == "count":
        return None
    if not getattr(cfg, switch).enabled:
        return "off in this config"
    field = ABLATABLE.get(switch, (None, None))[1]
    if field and getattr(art, field) is None:
        return "absent (no artifact or model)"
    if switch in ("llm", "verify", "agent") and not (cfg.llm.enabled and art.llm_ready):
        return "absent (no LLM)"
    return None


def incremental_ablation(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path,
                         paths=None, cache: SignalCache | None = None) -> list[dict]:
    """The stages added one after the other (:data:`INCREMENTAL`: BM25, +citation seeds,
    +semantic, +graph, +prior, +reranker, +LLM rewrite, +verification, +agentic loop, +adaptive
    count); a stage the config leaves off or whose artifact is absent is listed as such and not
    added.  Before the last row the count is the config's own (``fixed`` when the config says
    ``adaptive``).  Signals are computed once (a shared :class:`SignalCache`): a row reuses every
    signal an earlier row computed with the same inputs.  Each row has Macro F1 with a 95%
    bootstrap interval over queries, precision, recall, the change in Macro F1 against the row
    before with a paired permutation p-value, Recall@100, nDCG@10 and seconds per query.  Writes
    ``incremental.csv`` and ``incremental_per_query.csv`` (per-query F1 of every row)."""
    import copy

    from lexrag.eval.stats import bootstrap_ci, paired_p_value

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    cache = cache or SignalCache()
    c = copy.deepcopy(cfg)
    for section in ("seeds", "semantic", "graph", "prior", "rerank", "llm", "verify", "agent"):
        getattr(c, section).enabled = False
    c.lexical.enabled = True
    if c.count.method == "adaptive":
        c.count.method = "fixed"
    rows: list[dict] = []
    per_query: dict[str, dict[str, float]] = {}
    prev = None
    for name, switch in INCREMENTAL:
        why = _available(cfg, artifacts, switch)
        if why is not None:
            rows.append({"run": name, "status": why})
            continue
        c = copy.deepcopy(c)
        if switch == "count":
            c.count.method = "adaptive"
        else:
            getattr(c, switch).enabled = True
        res = run_pipeline(queries, artifacts, c, paths=paths, cache=cache)
        table = {r["query_id"]: r for r in per_query_table(gold, res.predictions, res.ranked)}
        f1 = [table[q]["f1"] for q in sorted(table)]
        per_query[name] = {q: table[q]["f1"] for q in table}
        m = evaluate(gold, res.predictions, res.ranked)
        lo, hi = bootstrap_ci(f1)
        row = {"run": name, "status": "ran", "macro_f1": m["macro_f1"], "ci_low": lo, "ci_high": hi,
               "precision": m["precision"], "recall": m["recall"], "recall@100": m["recall@100"], "ndcg@10": m["ndcg@10"],
               "seconds_per_query": round(res.timings["total"] / max(len(res.query_ids), 1), 4)}
        if prev is not None:
            row["delta_macro_f1"] = row["macro_f1"] - prev[0]["macro_f1"]
            row["p_value"] = paired_p_value(prev[1], f1)
        else:
            row["delta_macro_f1"], row["p_value"] = 0.0, float("nan")
        rows.append(row)
        prev = (row, f1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fields = ["run", "status", "macro_f1", "ci_low", "ci_high", "delta_macro_f1", "p_value", "precision", "recall",
              "recall@100", "ndcg@10", "seconds_per_query"]
    with open(out / "incremental.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    with open(out / "incremental_per_query.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        names = list(per_query)
        w.writerow(["query_id", *names])
        for q in sorted(gold):
            w.writerow([q, *[per_query[n].get(q, "") for n in names]])
    log.info("incremental ablation: %d stage computations, %d reuses", sum(cache.computed.values()), cache.reused)
    return rows


def plot_ablation(rows: list[dict], path: str | Path, title: str = "ablation") -> Path:
    """Bar chart of Macro F1 (with its bootstrap interval when the rows have one) and Recall@100
    per run, saved as PNG; rows that did not run are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in rows if "macro_f1" in r]
    names = [r["run"] for r in rows]
    x = np.arange(len(rows))
    f1 = np.array([r["macro_f1"] for r in rows])
    err = None
    if rows and all("ci_low" in r for r in rows):
        err = np.array([[m - r["ci_low"] for m, r in zip(f1, rows)], [r["ci_high"] - m for m, r in zip(f1, rows)]])
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2.0), 3.6))
    ax.bar(x - 0.2, f1, 0.4, yerr=err, capsize=3, label="Macro F1" + (" (95% bootstrap CI)" if err is not None else ""))
    ax.bar(x + 0.2, [r["recall@100"] for r in rows], 0.4, label="Recall@100")
    ax.set_xticks(x, names, rotation=25, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("score (macro average over queries)")
    ax.set_xlabel("configuration")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)
    return Path(path) if isinstance(path, (str, Path)) else path
