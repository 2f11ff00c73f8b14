"""The inference notebook's body: answer ``test.csv`` and always leave a valid, scored file.

The notebook's first cell (standard library only, before lexrag is installed) writes a fallback
``submission.csv`` with every query id; :func:`run_submission` then loads what it can
(``Artifacts.load(degrade=True)``: only the corpus is required), runs the pipeline with failing
stages contained per query (``runtime.on_stage_error: skip``) under a budget that counts from the
notebook's start, and replaces the file only with a validated one.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from lexrag.config import load_config
from lexrag.errors import ArtifactError
from lexrag.eval.status import measured, measured_table, run_status
from lexrag.eval.submission import validate_submission, write_submission
from lexrag.paths import paths_for, resolve_paths
from lexrag.pipeline import Artifacts, Budget, run_pipeline
from lexrag.queries import load_queries

__all__ = ["run_submission"]

log = logging.getLogger(__name__)


def run_submission(config: str | None = "kaggle", overrides: Mapping[str, Any] | None = None, queries: str | Path | None = None,
                   artifacts_dir: str | Path | None = None, out: str | Path | None = None,
                   started_at: float | None = None) -> dict:
    """Answer the queries (``test.csv`` from the competition input by default) into ``out``
    (``submission.csv`` in the working folder).  Returns a summary: the run status (OK, DEGRADED)
    with its stage table (``status``, ``status_table``, ``stages``), queries, citations written,
    seconds per stage, stages skipped, dropped or failed, parts missing, cost per stage."""
    cfg = load_config(config, overrides)
    cfg.runtime = replace(cfg.runtime, on_stage_error="skip")
    if os.environ.get("CI"):
        cfg.runtime.progress = False
    paths = resolve_paths(cfg.paths)
    queries_file = Path(queries) if queries else paths.input_file("test.csv")
    out_path = Path(out) if out else paths.working_dir / "submission.csv"
    from lexrag.outputs import check_makeable, check_outside_artifacts, check_plain_output

    check_makeable(out_path.parent, "the folder of submission.csv (the Kaggle working folder: LEXRAG_KAGGLE_WORKING "
                   "where emulated)")  # before any work: the answers must have somewhere to go
    check_plain_output(out_path, "submission.csv:")
    check_outside_artifacts(out_path.parent, f"{out_path}: its folder", "set paths.working_dir (LEXRAG_KAGGLE_WORKING "
                            "where emulated) to a folder outside the artifacts")
    qs = load_queries(queries_file, cfg.query.max_chars)
    budget = Budget.since(cfg.runtime.time_budget_s, started_at, cfg.runtime.reserve_s)
    t0 = time.perf_counter()
    art = Artifacts.load(None, cfg, paths=paths_for(artifacts_dir, cfg.paths), degrade=True)
    load_s = time.perf_counter() - t0
    res = run_pipeline(qs, art, cfg, paths=paths, budget=budget)
    import tempfile

    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".candidate", dir=out_path.parent)  # a name nothing holds
    os.close(fd)
    tmp = Path(name)
    try:
        write_submission(tmp, res.predictions, res.query_ids)
        problems = validate_submission(tmp, [q.query_id for q in qs], art.corpus.citations)
        if problems:  # never replace a valid fallback with a broken file
            raise RuntimeError(f"the submission failed validation, the fallback file stays: {problems[:5]}")
        if out_path.is_dir():
            raise ArtifactError(f"{out_path} is a folder, so the submission cannot be written there: remove it")
        tmp.replace(out_path)
    finally:
        tmp.unlink(missing_ok=True)
    status = run_status(cfg, art, res)
    summary = {
        "status": status.status, "status_table": status.table() + "\n" + measured_table(m := measured(cfg, res, art)),
        "stages": status.to_dict()["stages"], "measured": m,
        "submission": str(out_path), "queries": len(qs), "citations": sum(len(v) for v in res.predictions.values()),
        "empty_rows": sum(1 for v in res.predictions.values() if not v), "load_s": round(load_s, 1),
        "seconds": {k: round(v, 2) for k, v in res.timings.items()}, "budget_elapsed_s": round(budget.elapsed(), 1),
        "skipped": {k: len(v) for k, v in res.skipped.items()}, "dropped": res.dropped, "failed": res.failed,
        "missing": art.missing,
        "model_loads": res.model_loads, "cost": res.cost_totals(),
    }
    log.info("wrote %s: %d queries, %d citations; %s", out_path, len(qs), summary["citations"], status.headline)
    return summary


def build_artifact(name: str, config: str | None = None, overrides: Mapping[str, Any] | None = None,
                   artifacts_dir: str | Path | None = None) -> str:
    """A build notebook's one call: build artifact ``name`` (``bm25``, ``graph``, ...) through its
    registry step over the corpus in ``artifacts_dir`` (written beside it), or over the corpus
    this session built or an attached one (written to the working folder on Kaggle).  Returns
    the line the notebook prints: what was built, where, how big, and any warning about it."""
    from lexrag.artifacts import read_params
    from lexrag.index.corpus import Corpus
    from lexrag.registry import BuildInputs, spec

    a = spec(name)
    cfg = load_config(config, overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(artifacts_dir) / name if artifacts_dir else paths.output_dir / name
    t0 = time.perf_counter()
    if a.build_step()(cfg, out, BuildInputs(corpus_dir=corpus_dir, corpus=Corpus(corpus_dir))) is False:
        return f"{name}: incomplete after {time.perf_counter() - t0:.1f}s -> {out}: run again to resume"
    p = read_params(out, name, verify=False)
    sizes = ", ".join(f"{k} {p[k]}" for k in ("n_docs", "vocab_size", "n_nodes", "n_edges", "communities") if k in p)
    line = f"{name}: built in {time.perf_counter() - t0:.1f}s -> {out} ({sizes})"
    if name == "graph" and not p.get("n_edges"):
        from lexrag.index.build import NO_COURT_EDGES

        line += f"\nwarning: {NO_COURT_EDGES}"
    return line
