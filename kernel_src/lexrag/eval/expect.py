"""Expected-score checks: a YAML of metrics with tolerances, checked against a metrics.json.

    # demo/expected.yaml
    source: make demo (demo/config.yaml, 22 demo questions)
    metrics:
      macro_f1: {value: 0.357, tol: 0.01}
      recall@100: {value: 0.955, tol: 0.02, direction: higher}

A row is OK within ``tol`` of ``value``, OKish within twice ``tol`` and FAIL beyond; with
``direction: higher`` (or ``lower``) a score better than expected by any amount is OK.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from lexrag.errors import ConfigError

__all__ = ["check_expected", "format_checks", "read_metrics_file"]


def read_metrics_file(path: str | Path) -> dict:
    """A ``metrics.json`` as the validation harness writes it (``{"metrics": {...}, ...}``); a file
    that is missing, not JSON or not of that shape is a :class:`ConfigError` naming it."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a readable metrics.json ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics", doc), dict):
        raise ConfigError(f"{path}: not a metrics.json: expected a JSON object with a \"metrics\" object")
    return doc


def check_expected(metrics: dict | str | Path, expected: dict | str | Path) -> list[dict]:
    """One row per expected metric: name, expected, tolerance, got, status (OK, OKish, FAIL)."""
    if not isinstance(metrics, dict):
        doc = read_metrics_file(metrics)
        metrics = doc.get("metrics", doc)
    if not isinstance(expected, dict):
        path = Path(expected)
        try:
            from lexrag.yamlio import (
                UniqueKeyLoader,  # aliases bounded, a key given twice refused
            )

            expected = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ConfigError(f"{path}: not a readable expectations file ({str(e).splitlines()[0]})") from None
    rows = []
    for name, spec in (expected.get("metrics") or {}).items():
        if not isinstance(spec, dict) or "value" not in spec:
            raise ConfigError(f"expected metric {name!r}: needs {{value: ..., tol: ...}}")
        value, tol = float(spec["value"]), float(spec.get("tol", 0.0))
        direction = spec.get("direction", "both")
        got = metrics.get(name)
        if got is None:
            status = "FAIL"
        else:
            diff = float(got) - value
            if (direction == "higher" and diff > 0) or (direction == "lower" and diff < 0):
                diff = 0.0
            status = "OK" if abs(diff) <= tol + 1e-12 else "OKish" if abs(diff) <= 2 * tol + 1e-12 else "FAIL"
        rows.append({"metric": name, "expected": value, "tol": tol, "got": got, "status": status})
    return rows


def format_checks(rows: list[dict]) -> str:
    lines = [f"{'metric':<14} {'expected':>9} {'tol':>7} {'got':>9}  status"]
    for r in rows:
        got = "missing" if r["got"] is None else f"{float(r['got']):.4f}"
        lines.append(f"{r['metric']:<14} {r['expected']:>9.4f} {r['tol']:>7.4f} {got:>9}  {r['status']}")
    return "\n".join(lines)
