"""What ``lexrag show-metrics`` prints of a validation run: the metrics, the run's status table,
the count it used, the ablation tables written beside it and the outputs in its folder."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from lexrag.errors import ConfigError
from lexrag.eval.status import RunStatus, recorded_state
from lexrag.eval.report import earlier_run
from lexrag.eval.validation import OUTPUTS, format_metrics

__all__ = ["run_summary", "csv_as_text"]

# written beside metrics.json by the validation notebook's ablations, shown as tables when present
TABLES = {"incremental.csv": "incremental ablation (each row adds one stage to the row above)",
          "ablation.csv": "ablation (each row drops one stage from the full run)"}
EXTRA = ("incremental.csv", "incremental_per_query.csv", "ablation.csv", "ablation.png", "incremental.png", "validation.ipynb")


def _number(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def _cell(v: str) -> str:
    x = _number(v)
    if x is None:
        return v
    return "-" if x != x else f"{x:.4f}" if abs(x) < 0.01 and x else f"{x:.3f}"


def csv_as_text(path: Path) -> str:
    """A CSV as an aligned table, numbers rounded; text columns left, number columns right."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    if not rows:
        return f"{path}: empty"
    n = len(rows[0])
    body = [(r + [""] * n)[:n] for r in rows[1:]]
    numeric = [bool(body) and all(r[i] == "" or _number(r[i]) is not None for r in body) for i in range(n)]
    rows = [rows[0]] + [[_cell(v) for v in r] for r in body]
    width = [max(len(r[i]) for r in rows) for i in range(n)]
    return "\n".join("  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(r, width))).rstrip()
                     for r in rows)


def _count_line(cfg: dict[str, Any]) -> str | None:
    c = cfg.get("count") if isinstance(cfg, dict) else None
    if not isinstance(c, dict) or not isinstance(c.get("method"), str):
        return None
    if c["method"] == "fixed":
        return f"count: fixed, k = {c.get('k')} citations per question (count.k)"
    return f"count: {c['method']}, between {c.get('min_k')} and {c.get('max_k')} citations per question (count.min_k, count.max_k)"


def run_summary(metrics_path: str | Path, doc: dict[str, Any]) -> str:
    """The text of ``show-metrics`` for a metrics.json already read into ``doc``."""
    path = Path(metrics_path)
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict):
        raise ConfigError(f"{path}: not a metrics.json: no \"metrics\" object (the validation notebook writes one)")
    if not metrics:
        raise ConfigError(f"{path}: its \"metrics\" object is empty: nothing to show (the validation notebook writes them)")
    bad = [k for k, v in metrics.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if bad:
        raise ConfigError(f"{path}: metric {str(bad[0])[:60]!r} is {str(metrics[bad[0]])[:40]!r}, not a number "
                          "(a damaged metrics.json?)")
    try:
        lines = [format_metrics(metrics, title=f"{path} ({doc.get('queries', '')})")]
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{path}: the \"metrics\" object lacks or mangles a metric ({type(e).__name__}: {e})") from None
    state = recorded_state(doc)
    if isinstance(doc.get("status"), dict) and isinstance(doc["status"].get("status"), str):  # the run's own table
        lines.append(RunStatus.from_dict(doc["status"]).table())
    elif state:
        lines.append(f"run status: {state}")
    count = _count_line(doc.get("config"))
    if count:
        lines.append(count)
    folder = path.parent
    for name, title in TABLES.items():
        if (folder / name).is_file() and earlier_run(folder / name, path):  # a table an earlier run wrote into this folder
            lines.append(f"{folder / name}: not shown: it is older than {path.name}, so an earlier run's (this run wrote "
                         "no such table); rerun the ablation to have one of this run")
        elif (folder / name).is_file():
            try:
                lines += [f"{title}, {folder / name}:", csv_as_text(folder / name)]
            except (OSError, UnicodeDecodeError, csv.Error) as e:
                lines.append(f"{folder / name}: not shown ({type(e).__name__}: {e})")
    present = [n if not (n in TABLES or n == "incremental_per_query.csv") or not earlier_run(folder / n, path)
               else f"{n} (an earlier run's)" for n in (*OUTPUTS, *EXTRA) if (folder / n).is_file()]
    if present:
        lines.append(f"outputs in {folder}/: " + ", ".join(f"{n} (open it in a browser)" if n == "report.html" else n
                                                         for n in present))
    return "\n".join(lines)
