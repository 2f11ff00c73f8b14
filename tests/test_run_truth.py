"""A run tells the truth about itself: a stage that reads another stage's output is partial where
that stage did not run, a count that fell back from what the config asked is partial, the time
budget's warning says per stage what was skipped and why (a projection is not time spent), a note
is logged once with the run's total, an overrun budget is said, a reserve as large as the budget
is refused, and a missing part's reason is whole and said once.  The clock is a fake one, moved
only where a test says time passes."""

from __future__ import annotations

import logging
import warnings

import pytest

from lexrag.config import load_config
from lexrag.errors import ConfigError
from lexrag.eval.status import StageRow, _brief, fix_for, run_status
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.pipeline.budget import Budget
from lexrag.llm.scripted import write_script
from lexrag.queries import Query
from lexrag.stages.base import registered_stages

Q1 = "Wer haftet, wenn jemand einem anderen widerrechtlich und fahrlässig einen Schaden zufügt?"
Q2 = "Welche Kündigungsfrist gilt für ein Arbeitsverhältnis im zweiten bis neunten Dienstjahr?"
Q3 = "Wann verjährt eine Forderung aus einem Vertrag?"
QUERIES = [Query("q1", Q1), Query("q2", Q2), Query("q3", Q3)]



def llm_cfg(tmp_path, **more):
    return load_config(overrides={
        "runtime.progress": False, "llm.enabled": True, "llm.backend": "scripted",
        "llm.model": str(write_script(tmp_path / "m", default_output="Haftung Schaden Vertrag",
                                      seconds_per_call=100.0)),
        "llm.cache_dir": str(tmp_path / "cache"), "runtime.reserve_s": 0.0, **more})


def test_llm_seeds_is_partial_where_the_rewrite_was_dropped(tmp_path, demo_artifacts, clock):
    """The rewrite dropped by the budget inside q1: llm_seeds ran, but had no German variant and no
    LLM citation to read for any query.  Before, its row said ran 3/3."""
    cfg = llm_cfg(tmp_path, **{"llm.tasks": ["translate", "hyde"], "runtime.time_budget_s": 150.0,
                               "runtime.stage_estimates_s": {"rewrite": 1.0}})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline(QUERIES, art, cfg)
    assert "rewrite" in res.dropped
    row = run_status(cfg, art, res).to_dict()["stages"]["llm_seeds"]
    assert row["state"] == "partial" and row["queries"] == 0 and row["total"] == 3
    assert "rewrite did not run for 3 of the queries (rewrite was dropped)" in row["why"]


def test_llm_seeds_is_partial_when_the_rewrite_is_off(tmp_path, demo_artifacts):
    """llm.tasks=[] leaves the rewrite off: llm_seeds has nothing to read and says so; the run is not OK."""
    cfg = llm_cfg(tmp_path, **{"llm.tasks": []})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    status = run_status(cfg, art, run_pipeline(QUERIES, art, cfg))
    row = status.to_dict()["stages"]["llm_seeds"]
    assert row["state"] == "partial" and row["queries"] == 0
    assert "rewrite is off in the config" in row["why"] and status.status == "DEGRADED"


def test_a_stage_read_by_another_is_declared_and_runs_before_it():
    """Every reads_stages names a registered stage that runs earlier in the walk."""
    order = [s.name for s in registered_stages()]
    reads = {s.name: tuple(getattr(s, "reads_stages", ())) for s in registered_stages()}
    assert reads["llm_seeds"] == ("rewrite",)
    for name, read in reads.items():
        assert all(r in order and order.index(r) < order.index(name) for r in read), (name, read)


def test_a_count_that_fell_back_is_partial_and_said_once(demo_artifacts, caplog):
    """The exam preset's learned count without the ranker: every query is cut at count.k, so the
    count row is partial with the reason, and the log says it once (before: ran 3/3, and a
    warning per chunk)."""
    cfg = load_config("exam", {"runtime.progress": False, "runtime.batch_size": 1})
    art = Artifacts.from_folder(demo_artifacts, cfg, degrade=True)
    assert cfg.count.method == "expected_f1" and "ranker" in art.missing
    with caplog.at_level(logging.WARNING):
        res = run_pipeline(QUERIES, art, cfg)
    row = run_status(cfg, art, res).to_dict()["stages"]["count"]
    assert row["state"] == "partial" and row["queries"] == 0
    assert f"fell back to count.k={cfg.count.k} for 3 queries: no ranker probabilities" in row["why"]
    said = [r.getMessage() for r in caplog.records if "fell back to count.k" in r.getMessage()]
    assert len(said) == 1 and "for 3 queries" in said[0]


def test_a_note_is_logged_once_with_the_runs_total(demo_artifacts, caplog):
    """Three questions nothing matches, one a chunk: the log says 3 once, as the status note does
    (before: the first chunk's 1)."""
    cfg = load_config(overrides={"runtime.progress": False, "runtime.batch_size": 1})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    queries = [Query(f"x{i}", "qqqzx wwwvy") for i in range(3)]
    with caplog.at_level(logging.WARNING):
        run_pipeline(queries, art, cfg)
    said = [r.getMessage() for r in caplog.records if "got no citation" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("3 queries got no citation")
    assert any(n.startswith("3 queries got no citation") for n in art.notes)


def test_a_projected_drop_is_not_called_time_running_out(demo_artifacts, clock):
    """The graph's estimate does not fit a 2.5 s budget at the start: the warning says it was dropped
    by the projection, with the seconds to one decimal (before: "0s"), not that time ran out."""
    cfg = load_config(overrides={"runtime.progress": False, "runtime.time_budget_s": 2.5, "graph.enabled": True,
                                 "runtime.stage_estimates_s": {"graph": 1.0}})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_pipeline(QUERIES, art, cfg)
    assert res.dropped["graph"] == "projected 3.0s for the rest of the run, 2.5s left"
    said = [str(w.message) for w in caught if "time budget" in str(w.message)]
    assert len(said) == 1 and "ran out" not in said[0]
    assert "graph 3 queries skipped: dropped because the projection said the rest of the run would not fit" in said[0]


def test_the_skip_warning_counts_per_stage_and_says_each_reason_once():
    from lexrag.pipeline.run import skip_summary

    budget = Budget(100.0, 0.0)
    why = "projected 3520s for the rest of the run, 98s left"
    budget.dropped.update({"agent": why, "rewrite": why})
    skipped = {"agent": [f"q{i}" for i in range(22)], "rewrite": [f"q{i}" for i in range(1, 22)],
               "verify": ["q1", "q2"]}
    line = skip_summary(budget, skipped)
    assert line.startswith("time budget of 100s: agent 22 queries, rewrite 21 queries skipped: dropped because")
    assert line.count(why) == 1 and "verify 2 queries skipped: the time budget ran out" in line


def test_an_overrun_budget_is_said(demo_artifacts, clock, monkeypatch):
    """Every stage ran, but the count took the run past its 1.6 s budget: OK, with a note that says
    the overrun (before: nothing)."""
    count = next(s for s in registered_stages() if s.name == "count")
    real = count.run

    def slow(batch, ctx):
        clock.sleep(1.0)
        return real(batch, ctx)

    monkeypatch.setattr(count, "run", slow)
    cfg = load_config(overrides={"runtime.progress": False, "runtime.time_budget_s": 1.6, "runtime.batch_size": 2})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    status = run_status(cfg, art, run_pipeline(QUERIES, art, cfg))
    assert status.status == "OK"
    assert "the run took 2.0s of a time budget of 1.6s (runtime.time_budget_s): 0.4s over" in status.notes


def test_a_reserve_as_large_as_the_budget_is_refused():
    with pytest.raises(ConfigError, match=r"runtime.reserve_s=50 must be less than runtime.time_budget_s=5"):
        load_config(overrides={"runtime.time_budget_s": 5, "runtime.reserve_s": 50})
    load_config(overrides={"runtime.time_budget_s": 0, "runtime.reserve_s": 50})  # no budget: nothing to keep back from


def test_a_missing_parts_reason_is_whole_and_said_once():
    """The graph not found among the inputs: the row keeps what was found, is not cut at 160
    characters, and says how to attach it once, in the fix column (before: twice, cut mid-sentence)."""
    reason = ("ArtifactMissing: artifact 'graph' not found: searched /kaggle/input (4 levels) for a params.json of "
              "artifact 'graph'; found bm25, corpus; attach the lexrag-graph dataset")
    fix = fix_for("graph")
    line = StageRow("graph", "missing", 0, 3, f"graph: {_brief(reason, fix)}", fix).line()
    assert "artifact 'graph' not found; found bm25, corpus" in line and line.endswith(fix)
    assert line.count("attach the") == 1 and " ..." not in line.replace(fix, "")
    long = "ArtifactError: " + "a reason of many words " * 12
    assert _brief(long) == long.removeprefix("ArtifactError: ")
