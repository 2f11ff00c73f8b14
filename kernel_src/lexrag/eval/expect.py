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

import math
from pathlib import Path

import yaml

from lexrag.errors import ConfigError
from lexrag.config.yamlio import yaml12_number

__all__ = ["check_expected", "format_checks", "read_metrics_file"]


def read_metrics_file(path: str | Path) -> dict:
    """A ``metrics.json`` as the validation harness writes it (``{"metrics": {...}, ...}``); a file
    that is missing, not a regular file, not JSON or not of that shape is a :class:`ConfigError`
    naming it."""
    from lexrag.io.inputfiles import read_json_file

    doc = read_json_file(path, ConfigError, what="metrics")
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics", doc), dict):
        raise ConfigError(f"{path}: not a metrics.json: expected a JSON object with a \"metrics\" object")
    return doc


DIRECTIONS = ("both", "higher", "lower")


def _number(x) -> bool:
    """A finite number (not a bool, NaN or infinity: a tolerance of infinity checks nothing)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_expected(metrics: dict | str | Path, expected: dict | str | Path) -> list[dict]:
    """One row per expected metric: name, expected, tolerance, got, status (OK, OKish, FAIL).  An
    expectations file with no metric, or one whose value, tol or direction is not what it must be,
    is a :class:`ConfigError` naming it (a check that checks nothing never passes)."""
    source = "metrics"
    if not isinstance(metrics, dict):
        source = str(metrics)
        doc = read_metrics_file(metrics)
        metrics = doc.get("metrics", doc)
    where = "expectations"
    if not isinstance(expected, dict):
        from lexrag.io.inputfiles import read_text_file
        from lexrag.config.yamlio import load_yaml, yaml_problem

        where = str(expected)
        text = read_text_file(expected, ConfigError, what="expectations")
        try:
            expected = load_yaml(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{where}: not valid YAML: {yaml_problem(e)}") from None
        except RecursionError:
            raise ConfigError(f"{where}: nested too deeply to read") from None
    specs = expected.get("metrics") if isinstance(expected, dict) else None
    if not isinstance(specs, dict) or not specs:
        raise ConfigError(f"{where}: no expected metrics (a mapping 'metrics: {{name: {{value: ..., tol: ...}}}}'); a check "
                          "with nothing to check would pass whatever the run did")
    rows = []
    for name, spec in specs.items():
        if isinstance(spec, dict):
            spec = {**spec, "value": yaml12_number(spec.get("value"))}
        if not isinstance(name, str) or not isinstance(spec, dict) or not _number(spec.get("value")):
            raise ConfigError(f"{where}: expected metric {str(name)[:60]!r}: needs {{value: NUMBER, tol: NUMBER}}")
        tol, direction = yaml12_number(spec.get("tol", 0.0)), spec.get("direction", "both")  # tol: 1e-3 is 0.001
        if not _number(tol) or tol < 0:
            raise ConfigError(f"{where}: expected metric {name!r}: tol must be a finite number >= 0, got {str(tol)[:40]!r}")
        if direction not in DIRECTIONS:
            raise ConfigError(f"{where}: expected metric {name!r}: direction must be one of {', '.join(DIRECTIONS)}, "
                              f"got {str(direction)[:40]!r}")
        value, tol = float(spec["value"]), float(tol)
        got = metrics.get(name)
        if got is not None and not _number(got):
            raise ConfigError(f"{source}: {name!r} is {str(got)[:40]!r}, not a finite number (a damaged metrics.json?)")
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
