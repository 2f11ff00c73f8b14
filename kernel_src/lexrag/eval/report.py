"""Signal analysis and the one-file HTML report of a validation run.

:func:`signal_analysis` says, per signal family, which gold citations it found in its top 100
(and which only it found), recall per citation kind (law / BGE / docket), and Macro F1 per course.
:func:`write_report` gathers what a validation run wrote into its folder (``metrics.json``,
``incremental.csv`` and ``incremental_per_query.csv``, ``ablation.csv``,
``signal_analysis.json``) into ``report.html``: tables and embedded PNG plots with labelled axes
(ablation bars with bootstrap intervals, a per-query F1 heatmap across configurations, the
contribution of each signal family), nothing fetched from anywhere.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import logging
from pathlib import Path
from typing import Mapping, Sequence

from lexrag import citations as cit
from lexrag.io.outputs import claim_folder, replace_text
from lexrag.eval.metrics import prf

__all__ = ["signal_analysis", "write_report", "plot_ablation", "earlier_run", "RETRIEVAL_FAMILIES"]

log = logging.getLogger(__name__)

RETRIEVAL_FAMILIES = ("seed", "lexical", "semantic", "graph", "prior")


def _kind(c: str) -> str:
    parsed = cit.try_parse(c)
    return parsed.kind if parsed is not None else "other"


def signal_analysis(result, gold: Mapping[str, Sequence[str]], corpus, groups: Mapping[str, str] | None = None,
                    depth: int = 100) -> dict:
    """Per family: gold found in its top ``depth`` and gold found only by it; recall per kind of
    the predictions and of the top ``depth``; Macro F1 per course (with ``groups``)."""
    norm = cit.scoring_form
    found: dict[str, dict[str, set[str]]] = {}
    for r in result.signals:
        if r.family not in RETRIEVAL_FAMILIES:  # the verifier's and the loop's signals reorder what retrieval found
            continue
        fam = found.setdefault(r.family, {})
        for qid, hits in r.hits.items():
            fam.setdefault(qid, set()).update(norm(corpus.citations[d]) for d, _ in hits[:depth])
    families = sorted(found)
    per_family = {f: {"found": 0, "only": 0} for f in families}
    total = 0
    for qid, g in gold.items():
        gs = {norm(c) for c in g}
        total += len(gs)
        for c in gs:
            by = [f for f in families if c in found[f].get(qid, set())]
            for f in by:
                per_family[f]["found"] += 1
            if len(by) == 1:
                per_family[by[0]]["only"] += 1
    kinds: dict[str, dict[str, float]] = {}
    for kind in ("law", "bge", "docket"):
        hit_pred = hit_top = n = 0
        for qid, g in gold.items():
            gs = {norm(c) for c in g if _kind(c) == kind}
            if not gs:
                continue
            n += len(gs)
            hit_pred += len(gs & {norm(c) for c in result.predictions.get(qid, [])})
            hit_top += len(gs & {norm(c) for c in result.ranked.get(qid, [])[:depth]})
        kinds[kind] = {"gold": n, "recall": hit_pred / n if n else None, f"recall@{depth}": hit_top / n if n else None}
    courses: dict[str, dict] = {}
    if groups:
        acc: dict[str, list[float]] = {}
        for qid, g in gold.items():
            acc.setdefault(groups.get(qid, ""), []).append(prf(g, result.predictions.get(qid, []))[2])
        courses = {c: {"queries": len(v), "macro_f1": sum(v) / len(v)} for c, v in sorted(acc.items())}
    return {"gold_citations": total, "families": per_family, "kinds": kinds, "courses": courses, "depth": depth}


NO_PLOTS = "plots left out: matplotlib is not installed (pip install matplotlib); the tables are complete"


def _pyplot():
    """matplotlib's pyplot on the Agg backend, or None where matplotlib is not installed (the
    report keeps its tables and says the plots are left out)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _table(rows: list[dict], cols: Sequence[str]) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4f}"
        return html.escape("" if v is None else str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _read_csv(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k, v in r.items():
            try:
                r[k] = float(v) if v not in ("", None) and k not in ("run", "status", "query_id") else v
            except ValueError:
                pass
    return rows


def earlier_run(table: Path, metrics: Path) -> bool:
    """``table`` (an ablation CSV) was written before ``metrics``, so by an earlier run into the same
    folder: a run writes its metrics.json first, then its ablation tables."""
    try:
        return table.stat().st_mtime_ns < metrics.stat().st_mtime_ns
    except OSError:
        return False


def write_report(out_dir: str | Path, title: str = "lexrag validation report") -> Path:
    """Write ``report.html`` into ``out_dir`` from the files a validation run left there (without
    matplotlib: the tables, and a line saying the plots are left out)."""
    import numpy as np

    plt = _pyplot()


    out = Path(out_dir)
    if out.is_dir():  # read and written by one run at a time
        claim_folder(out, "out_dir")
    parts = [f"<h1>{html.escape(title)}</h1>"] + ([f"<p>{html.escape(NO_PLOTS)}</p>"] if plt is None else [])
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8")) if (out / "metrics.json").is_file() else {}
    m = metrics.get("metrics", {})
    if m:
        parts.append(f"<h2>Full run</h2><p>{html.escape(str(metrics.get('queries', '')))}</p>")
        parts.append(_table([{"metric": k, "value": v} for k, v in m.items()], ["metric", "value"]))
    for name, label in (("incremental", "Incremental ablation (each row adds one stage)"), ("ablation", "Leave-one-stage-out")):
        rows = _read_csv(out / f"{name}.csv")
        if not rows or earlier_run(out / f"{name}.csv", out / "metrics.json"):  # an earlier run's, not this one's
            continue
        parts.append(f"<h2>{label}</h2>")
        cols = [c for c in ["run", "status", "macro_f1", "ci_low", "ci_high", "delta_macro_f1", "p_value", "precision",
                            "recall", "recall@100", "ndcg@10", "seconds_per_query", "seconds"] if c in rows[0]]
        parts.append(_table(rows, cols))
        ran = [r for r in rows if isinstance(r.get("macro_f1"), float)]
        if ran and plt is not None:
            tmp = io.BytesIO()
            plot_ablation(ran, tmp, title=label)
            parts.append(f'<img alt="{html.escape(label)}" src="data:image/png;base64,{base64.b64encode(tmp.getvalue()).decode()}">')
    per_q = _read_csv(out / "incremental_per_query.csv")
    if per_q and plt is not None:
        configs = [c for c in per_q[0] if c != "query_id"]
        mat = np.array([[r[c] if isinstance(r[c], float) else np.nan for r in per_q] for c in configs])
        fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(per_q) + 2.5), 0.45 * len(configs) + 1.8))
        im = ax.imshow(mat, aspect="auto", vmin=0, vmax=1, cmap="viridis")
        ax.set_yticks(range(len(configs)), configs)
        ax.set_xticks(range(len(per_q)), [r["query_id"] for r in per_q], rotation=90, fontsize=7)
        ax.set_xlabel("query")
        ax.set_ylabel("configuration")
        ax.set_title("F1 per query and configuration")
        fig.colorbar(im, ax=ax, label="F1")
        fig.tight_layout()
        parts.append("<h2>Per-query F1</h2>" + f'<img alt="per-query F1 heatmap" src="{_png(fig)}">')
    sa_path = out / "signal_analysis.json"
    if sa_path.is_file():
        sa = json.loads(sa_path.read_text(encoding="utf-8"))
        fams = sa.get("families", {})
        parts.append(f"<h2>Signal families (gold citations in each family's top {sa.get('depth')})</h2>")
        parts.append(_table([{"family": f, **v} for f, v in fams.items()], ["family", "found", "only"]))
        if fams and plt is not None:
            fig, ax = plt.subplots(figsize=(max(5.0, 1.0 * len(fams) + 2.0), 3.2))
            x = np.arange(len(fams))
            ax.bar(x - 0.2, [v["found"] for v in fams.values()], 0.4, label="gold found")
            ax.bar(x + 0.2, [v["only"] for v in fams.values()], 0.4, label="gold found only by this family")
            ax.set_xticks(x, list(fams))
            ax.set_xlabel("signal family")
            ax.set_ylabel(f"gold citations (of {sa.get('gold_citations')})")
            ax.set_title("what each signal family contributes")
            ax.legend()
            fig.tight_layout()
            parts.append(f'<img alt="signal contribution" src="{_png(fig)}">')
        parts.append("<h2>Recall by citation kind</h2>")
        parts.append(_table([{"kind": k, **v} for k, v in sa.get("kinds", {}).items()],
                            ["kind", "gold", "recall", f"recall@{sa.get('depth')}"]))
        if sa.get("courses"):
            parts.append("<h2>Per course</h2>")
            parts.append(_table([{"course": c, **v} for c, v in sa["courses"].items()], ["course", "queries", "macro_f1"]))
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}img{max-width:100%}")
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style>"
           f"</head><body>{''.join(parts)}</body></html>")
    path = out / "report.html"
    replace_text(path, doc)
    return path


def plot_ablation(rows: list[dict], path: str | Path, title: str = "ablation") -> Path | None:
    """Bar chart of Macro F1 (with its bootstrap interval when the rows have one) and Recall@100
    per run, saved as PNG; rows that did not run are left out.  Without matplotlib nothing is
    drawn: a warning says so and None is returned."""
    import numpy as np

    plt = _pyplot()
    if plt is None:
        log.warning("%s: %s", path if isinstance(path, (str, Path)) else "ablation plot", NO_PLOTS)
        return None

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
