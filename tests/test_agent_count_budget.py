"""The agentic loop, the adaptive count with its calibration, the budget that degrades, and LLM
output of every bad kind.  The scripted stand-in model (fixed answers) drives the logic tests; the
tiny random model through the real 4-bit loader drives the live-and-replay test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lexrag.config import load_config
from lexrag.eval.submission import write_submission
from lexrag.pipeline import Artifacts, projected_seconds, run_pipeline
from lexrag.queries import Query, load_queries
from lexrag.stages.agent import AgentMemory, agent_order
from lexrag.stages.count import adaptive_count, calibrated_count

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo"
Q1 = "Wer haftet, wenn jemand einem anderen widerrechtlich und fahrlässig einen Schaden zufügt?"
Q2 = "Welche Kündigungsfrist gilt für ein Arbeitsverhältnis im zweiten bis neunten Dienstjahr?"


def script(folder: Path, rules: list[dict], default_output: str = "", default_yes: float = 0.1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lexrag_scripted.json").write_text(json.dumps(
        {"format": "lexrag-scripted-llm/1", "default_output": default_output, "default_yes": default_yes, "rules": rules}),
        encoding="utf-8")
    return folder


def cfg_for(model: Path, cache: Path, **extra):
    over = {"runtime.progress": False, "graph.enabled": True, "llm.enabled": True, "llm.model": str(model),
            "llm.backend": "scripted" if (Path(model) / "lexrag_scripted.json").is_file() else "transformers",
            "llm.cache_dir": str(cache),
            "llm.tasks": ["translate", "concepts"], "verify.enabled": True, "verify.depth": 10,
            "agent.enabled": True, "agent.max_rounds": 3, "count.k": 5}
    over.update(extra)
    return load_config(overrides=over)


def plan(queries, done=False):
    return json.dumps({"queries": queries, "done": done})


# ---------------------------------------------------------------- the loop's order and stopping


def test_kept_items_rank_by_retention_then_earliest_round_then_best_rank():
    mem = AgentMemory()
    probs = {d: 0.9 for d in range(10)}
    probs[5] = 0.2  # judged and rejected: never kept
    mem.keep(0, [(1, 0), (2, 1), (5, 2)], probs, 0.5)
    mem.keep(1, [(3, 0), (2, 4), (4, 1)], probs, 0.5)
    mem.keep(2, [(4, 7), (6, 0)], probs, 0.5)
    # 2 and 4 were kept twice (2 first in round 0); 1 in round 0; 3 before 4's rank... 3 (round 1, rank 0); 6 (round 2)
    assert agent_order(mem) == [2, 4, 1, 3, 6]
    assert mem.best_rank[2] == 1 and mem.best_rank[4] == 1 and 5 not in mem.retention


def test_loop_stops_at_its_round_limit_and_when_nothing_new_is_kept(tmp_path, demo_artifacts):
    corpus_rule = {"when": ["Would a decision answering"], "yes": 0.9}  # the observer keeps everything it sees
    # query 1: every round searches another area (new items each time), so only the limit stops it;
    # query 2: the planner repeats one search, so round 2 writes nothing new and the loop stops
    rules = [
        {"when": ["plan searches", "Schaden", "- Kündigung Arbeitsverhältnis"], "output": plan(["Betrug Vermögensschaden"])},
        {"when": ["plan searches", "Schaden", "- Haftung Verschulden"], "output": plan(["Kündigung Arbeitsverhältnis"])},
        {"when": ["plan searches", "Schaden"], "output": plan(["Haftung Verschulden"])},
        {"when": ["plan searches", "Kündigungsfrist"], "output": plan(["Kündigung Monat"])},
        corpus_rule,
    ]
    model = script(tmp_path / "m", rules)
    cfg = cfg_for(model, tmp_path / "c", **{"agent.max_rounds": 3, "agent.observe_depth": 30, "llm.tasks": []})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline([Query("q1", Q1), Query("q2", Q2)], art, cfg)
    t1 = [r for r in res.traces if r["query_id"] == "q1"]
    t2 = [r for r in res.traces if r["query_id"] == "q2"]
    assert [r["round"] for r in t1] == [0, 1, 2, 3]  # round 0 observes the question's own ranking, then 3 planner rounds
    assert [r["queries"] for r in t1[1:]] == [["Haftung Verschulden"], ["Kündigung Arbeitsverhältnis"], ["Betrug Vermögensschaden"]]
    assert all(r["new"] > 0 for r in t1)
    assert [r["round"] for r in t2] == [0, 1, 2] and t2[2]["queries"] == [] and t2[2]["new"] == 0 and t2[2]["done"]
    for r in t1 + t2:
        assert set(r) >= {"queries", "kept", "new", "prompt_tokens", "gen_tokens", "seconds"} and r["seconds"] >= 0
    assert t1[1]["prompt_tokens"] > 0 and t1[1]["llm_calls"] >= 1
    assert res.current_by == {"q1": "agent", "q2": "agent"}
    # the final order starts with what the loop kept, most retained first
    agent = next(s for s in res.signals if s.signal == "agent")
    assert [d for d, _ in res.current.hits["q1"][: len(agent.hits["q1"])]] == [d for d, _ in agent.hits["q1"]]
    assert set(res.predictions["q1"]) <= set(art.corpus.citations)


def test_a_planner_that_is_done_or_writes_no_json_ends_the_loop_after_one_round(tmp_path, demo_artifacts):
    rules = [{"when": ["plan searches", "Schaden"], "output": plan([], done=True)},
             {"when": ["plan searches", "Kündigungsfrist"], "output": "I cannot help with that."},
             {"when": ["fix malformed JSON"], "output": "Sorry."}]
    cfg = cfg_for(script(tmp_path / "m", rules, default_yes=0.9), tmp_path / "c", **{"llm.tasks": []})
    res = run_pipeline([Query("q1", Q1), Query("q2", Q2)], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    assert [r["round"] for r in res.traces] == [0, 1, 0, 1]
    assert res.costs["q2"]["agent"]["json_failures"] == 1
    # the run status says so: the loop ran for both questions, one planner answer was not usable
    from lexrag.eval.status import run_status

    row = run_status(cfg, Artifacts.from_folder(demo_artifacts, cfg), res).to_dict()["stages"]["agent"]
    assert row["state"] == "ran" and row["queries"] == 2 and row["why"].startswith("1 LLM answers were not usable JSON")


# ---------------------------------------------------------------- bad LLM output


BAD = {
    "empty": "",
    "endless": "Haftung Schaden Art. 41 OR",  # repeated to the token cap
    "prose": "The question concerns liability in tort; the relevant provision is Art. 41 OR and also BGE 999 IV 1.",
    "refusal": "I'm sorry, but I can't help with that request.",
    "invented citation": '{"legal_area": "Haftpflicht", "key_concepts": ["Schaden"], "keywords_de": ["Art. 9999 OR", "Haftung"], '
                         '"provisions": ["Art. 9999 OR", "BGE 999 IV 1 E. 2"], "estimated_citations": 5, '
                         '"queries": ["Art. 9998 ZGB Haftung", "BGE 998 II 7"], "done": false}',
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_llm_output_of_every_bad_kind_leaves_only_corpus_strings(tmp_path, demo_artifacts, kind):
    rules = [{"when": [], "output": BAD[kind], "repeat": 400 if kind == "endless" else 1}]
    cfg = cfg_for(script(tmp_path / "m", rules, default_yes=0.7), tmp_path / "c",
                  **{"llm.tasks": ["translate", "concepts", "hyde", "sparse", "dense"], "count.method": "adaptive",
                     "llm.max_new_tokens": 64})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    queries = load_queries(DEMO / "queries_demo.csv")[:6]
    res = run_pipeline(queries, art, cfg)
    corpus = set(art.corpus.citations)
    for qid, cits in res.predictions.items():
        assert cits and set(cits) <= corpus, (kind, qid)
        assert not {"Art. 9999 OR", "BGE 999 IV 1 E. 2", "Art. 9998 ZGB"} & set(cits)
    if kind == "endless":  # stopped at the cap, never more
        gens = [r for q in res.states for r in [q.cost.get("rewrite", {})]]
        assert all(g.get("gen_tokens", 0) <= 64 * 5 * 2 for g in gens)
    out = tmp_path / "submission.csv"
    write_submission(out, res.predictions, res.query_ids)
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(queries) + 1


# ---------------------------------------------------------------- count


def test_adaptive_count_is_the_papers_weighted_mean_clipped_to_8_and_50():
    assert adaptive_count(20, 10, 30) == 20  # 0.4*20 + 0.3*10 + 0.3*30 = 20
    assert adaptive_count(1, 2, 3) == 8  # clipped below
    assert adaptive_count(200, 100, 90) == 50  # clipped above
    assert adaptive_count(None, 10, 30) == 20  # n_LLM unknown: (0.3*10 + 0.3*30) / 0.6
    assert adaptive_count(None, None, None) == 8
    assert adaptive_count(12, 12, 12, min_k=1, max_k=5) == 5
    assert calibrated_count([2.0, 1.9, 1.0, 0.5], 0.5) == 3 and calibrated_count([0.0, 0.0], 0.5) is None


def test_calibrate_writes_thresholds_that_run_reads(tmp_path, demo_artifacts, demo_queries):
    import shutil

    art_dir = tmp_path / "art"
    shutil.copytree(demo_artifacts, art_dir)
    env_cmd = [sys.executable, "-m", "lexrag", "-q"]
    # a course column: the fit is also cross-validated with folds grouped by course
    rows = (demo_queries.read_text(encoding="utf-8").splitlines())
    with_course = tmp_path / "dev.csv"
    with_course.write_text("\n".join([rows[0] + ",course"] + [f"{r},{'A' if i % 2 else 'B'}" for i, r in enumerate(rows[1:])]) + "\n",
                           encoding="utf-8")
    r = subprocess.run(env_cmd + ["calibrate", "--queries", str(with_course), "--artifacts", str(art_dir),
                                  "--set", "runtime.progress=false"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "grouped CV by course (2 folds)" in r.stdout
    doc = json.loads((art_dir / "calibration" / "params.json").read_text())
    assert doc["artifact"] == "calibration" and 0 < doc["thresholds"]["fused"] <= 1 and doc["grouped_cv"]["folds"] == 2
    cfg = load_config(overrides={"runtime.progress": False, "count.method": "adaptive", "count.min_k": 1,
                                 "count.w_llm": 0.0, "count.w_elbow": 0.0, "count.w_cal": 1.0})
    art = Artifacts.from_folder(art_dir, cfg)
    assert art.calibration.threshold("fused") == doc["thresholds"]["fused"]
    res = run_pipeline(load_queries(demo_queries), art, cfg)
    from lexrag.stages.count import unique_citations

    for qid in res.query_ids:  # with only n_cal weighted, each query emits exactly the calibrated count
        _, _, scores = unique_citations(res.current.hits[qid], art.corpus)
        assert len(res.predictions[qid]) == max(calibrated_count(scores, doc["thresholds"]["fused"]), 1)
    # a calibration named explicitly but absent is an error naming it
    from lexrag.errors import ArtifactError

    with pytest.raises(ArtifactError, match="calibration"):
        Artifacts.from_folder(art_dir, load_config(overrides={"count.method": "adaptive", "count.calibration": str(tmp_path / "nope")}))


# ---------------------------------------------------------------- the budget that degrades


class _S:
    def __init__(self, name, essential=False):
        self.name, self.essential = name, essential


def test_projection_uses_measured_rates_once_a_stage_has_run():
    stages = [_S("rerank"), _S("fusion", True), _S("verify")]
    est = {"rerank": 2.0, "verify": 10.0}
    assert projected_seconds(stages, "rerank", 5, 10, {}, {}, est, {}) == 2.0 * 5 + 10.0 * 10
    assert projected_seconds(stages, "rerank", 5, 10, {"rerank": 5}, {"rerank": 50.0}, est, {}) == 10.0 * 5 + 100.0
    assert projected_seconds(stages, "rerank", 5, 10, {}, {}, est, {"verify": "x"}) == 10.0


def test_a_short_budget_drops_stages_in_the_stated_order_and_the_submission_stays_valid(tmp_path, demo_artifacts):
    model = script(tmp_path / "m", [], default_yes=0.8)
    queries = load_queries(DEMO / "queries_demo.csv")
    n = len(queries)
    # 1000 s left; the agent alone (100 s/query) cannot fit: it goes, verification stays
    est = {"agent": 100.0, "verify": 1.0, "graph": 1.0, "rewrite": 0.0}
    cfg = cfg_for(model, tmp_path / "c", **{"runtime.time_budget_s": 1000.0, "runtime.stage_estimates_s": est})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline(queries, art, cfg)
    assert list(res.dropped) == ["agent"] and "verify" in res.timings and "agent" not in res.timings
    assert res.skipped["agent"] == [q.query_id for q in queries]
    # verification too expensive as well: agent, then verify go; the graph (next in line) stays
    est = {"agent": 100.0, "verify": 100.0, "graph": 30.0, "rewrite": 0.0}
    cfg = cfg_for(model, tmp_path / "c", **{"runtime.time_budget_s": 1000.0, "runtime.stage_estimates_s": est})
    res = run_pipeline(queries, art, cfg)
    assert list(res.dropped) == ["agent", "verify"] and "graph" in res.timings
    # nothing optional fits: every optional stage of this config is dropped, in order (the reranker,
    # dense and the prior are off here, so they are not listed); BM25, seeds, fusion, count still answer
    est = {name: 1000.0 for name in ("agent", "verify", "rerank", "dense", "graph", "prior", "rewrite")}
    cfg = cfg_for(model, tmp_path / "c", **{"runtime.time_budget_s": 1000.0, "runtime.stage_estimates_s": est})
    res = run_pipeline(queries, art, cfg)
    assert list(res.dropped) == ["agent", "verify", "graph", "rewrite"]
    assert set(res.timings) >= {"bm25", "fusion", "count"} and "rewrite" not in res.timings
    # a stage outside degrade_order is never dropped, and a stage this config leaves off is never listed
    zero = {name: 0.0 for name in ("agent", "verify", "rerank", "dense", "graph", "prior", "rewrite")}
    cfg = cfg_for(model, tmp_path / "c", **{"runtime.time_budget_s": 1000.0,
                                             "runtime.stage_estimates_s": {**zero, "llm_seeds": 100.0}})
    res = run_pipeline(queries, art, cfg)
    assert "llm_seeds" in res.timings and set(res.dropped) <= {"agent", "verify", "graph", "rewrite"}
    # the extra BM25 passes of the kaggle preset are dropped last, after the LLM query rewrite
    over = {"statutes.enabled": True, "feedback.enabled": True, "runtime.time_budget_s": 1000.0,
            "runtime.stage_estimates_s": {name: 1000.0 for name in ("graph", "rewrite", "statutes", "feedback")}}
    res = run_pipeline(queries, art, cfg_for(model, tmp_path / "c", **over))
    assert list(res.dropped)[-3:] == ["rewrite", "statutes", "feedback"] and "bm25" in res.timings
    # one estimate set on the command line keeps the others
    cfg = load_config("kaggle", {"runtime.stage_estimates_s.agent": 60.0})
    assert cfg.runtime.stage_estimates_s["agent"] == 60.0 and cfg.runtime.stage_estimates_s["verify"] == 20.0
    out = tmp_path / "submission.csv"
    write_submission(out, res.predictions, res.query_ids)
    r = subprocess.run([sys.executable, "-m", "lexrag", "validate-submission", str(out), "--queries", str(DEMO / "queries_demo.csv"),
                        "--artifacts", str(demo_artifacts)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(res.predictions[q.query_id] for q in queries) and n == len(res.predictions)


def test_a_degrade_order_naming_no_optional_stage_is_a_config_error(tmp_path, demo_artifacts):
    from lexrag.errors import ConfigError

    cfg = load_config(overrides={"runtime.degrade_order": [["agnet"]]})
    with pytest.raises(ConfigError, match=r"degrade_order\[0\].*did you mean 'agent'"):
        run_pipeline([Query("q", Q1)], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    with pytest.raises(ConfigError, match="bm25"):  # essential: never dropped; refused before any artifact loads
        Artifacts.from_folder(demo_artifacts, load_config(overrides={"runtime.degrade_order": [["bm25"]]}))
    with pytest.raises(ConfigError, match=r"stage_estimates_s: unknown stage 'verfiy' \(did you mean 'verify'\?\)"):
        Artifacts.from_folder(demo_artifacts, load_config(overrides={"runtime.stage_estimates_s": {"verfiy": 30.0}}))


def test_a_stage_raising_for_one_query_leaves_the_others_untouched(tmp_path, demo_artifacts, monkeypatch):
    import lexrag.stages.agent as agent_mod

    real = agent_mod.judge

    def judge(ctx, items, stage):
        if any(q.query_id == "demo_03" for q, _ in items):
            raise RuntimeError("CUDA error: device-side assert (simulated)")
        return real(ctx, items, stage)

    monkeypatch.setattr(agent_mod, "judge", judge)
    model = script(tmp_path / "m", [], default_yes=0.8)
    cfg = cfg_for(model, tmp_path / "c", **{"runtime.on_stage_error": "skip", "llm.tasks": []})
    queries = load_queries(DEMO / "queries_demo.csv")[:5]
    res = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, cfg), cfg)
    assert list(res.failed) == ["agent"] and list(res.failed["agent"]) == ["demo_03"]
    assert res.current_by["demo_03"] == "verify"
    assert all(res.current_by[q.query_id] == "agent" for q in queries if q.query_id != "demo_03")
    assert all(res.predictions[q.query_id] for q in queries)
    assert not [r for r in res.traces if r["query_id"] == "demo_03"]  # its half-written trace was undone


# ---------------------------------------------------------------- replay of a full run


def test_replay_reproduces_a_full_run_with_verification_and_loop_without_a_model(tmp_path, demo_artifacts, tiny_llm, monkeypatch):
    extra = {"llm.tasks": ["translate", "concepts"], "verify.depth": 4, "agent.max_rounds": 2, "agent.observe_depth": 4,
             "agent.threshold": 0.0, "count.method": "adaptive", "llm.device": "cpu", "llm.max_new_tokens": 24,
             "llm.max_question_chars": 400, "verify.max_text_chars": 200}
    live = cfg_for(tiny_llm, tmp_path / "cache", **extra)
    queries = [Query("a", Q1), Query("b", Q2)]
    res = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, live), live)
    art = Artifacts.from_folder(demo_artifacts, live)
    assert res.model_loads == {"llm": 1} and res.current_by == {"a": "agent", "b": "agent"}
    assert {r["round"] for r in res.traces} >= {0, 1}
    # random weights write garbage up to the token cap: only corpus strings come out
    assert all(cits and set(cits) <= set(art.corpus.citations) for cits in res.predictions.values())

    import lexrag.llm.protocol as protocol

    def no_loading(*a, **k):
        raise AssertionError("replay must not load a model")

    monkeypatch.setattr(protocol, "load_causal_lm", no_loading)  # where the transformers backend looks it up
    replay = cfg_for(tiny_llm, tmp_path / "cache", **extra, **{"llm.mode": "replay"})
    res2 = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, replay), replay)
    assert res2.predictions == res.predictions and res2.current.hits == res.current.hits and res2.model_loads == {}
    cost_keys = {"seconds", "prompt_tokens", "gen_tokens", "llm_calls", "cache_hits"}  # replay: every answer a cache hit
    strip = lambda ts: [{k: v for k, v in r.items() if k not in cost_keys} for r in ts]  # noqa: E731
    assert strip(res2.traces) == strip(res.traces)
    assert sum(r["llm_calls"] for r in res2.traces) == 0 and sum(r["cache_hits"] for r in res2.traces) > 0


def test_calibrate_ignores_blank_gold_and_is_not_blocked_by_a_stale_calibration(tmp_path, demo_artifacts, demo_queries):
    import shutil

    art_dir = tmp_path / "art"
    shutil.copytree(demo_artifacts, art_dir)
    rows = demo_queries.read_text(encoding="utf-8").splitlines()
    half = tmp_path / "half.csv"  # every other gold cell blank: those rows are not fitted on
    half.write_text("\n".join([rows[0]] + [r if i % 2 == 0 else r.rsplit(",", 1)[0] + ","
                                           for i, r in enumerate(rows[1:])]) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "lexrag", "-q", "calibrate", "--artifacts", str(art_dir), "--set", "count.method=adaptive"]
    r = subprocess.run(cmd + ["--queries", str(half)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    params = art_dir / "calibration" / "params.json"
    doc = json.loads(params.read_text())
    assert doc["n_queries"] == 11
    doc["corpus_id"] = "another-corpus"  # stale: fitted on another corpus
    params.write_text(json.dumps(doc))
    from lexrag.errors import ArtifactError

    with pytest.raises(ArtifactError):  # so `run` refuses it ...
        Artifacts.from_folder(art_dir, load_config(overrides={"count.method": "adaptive"}))
    r = subprocess.run(cmd + ["--queries", str(demo_queries)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # ... and calibrate replaces it
    assert json.loads(params.read_text())["n_queries"] == 22
    blank = tmp_path / "blank.csv"
    blank.write_text("\n".join([rows[0]] + [r.rsplit(",", 1)[0] + "," for r in rows[1:]]) + "\n", encoding="utf-8")
    r = subprocess.run(cmd + ["--queries", str(blank)], capture_output=True, text=True)
    assert r.returncode == 2 and "no query has gold citations" in r.stderr


@pytest.mark.parametrize("estimate", ["10" * 200, "-40", "0"])
def test_a_wild_count_estimate_from_the_llm_cannot_empty_or_crash_the_count(tmp_path, demo_artifacts, estimate):
    rules = [{"when": ["exactly these keys"], "output": '{"legal_area": "x", "key_concepts": ["a"], "keywords_de": ["b"], '
                                                   f'"estimated_citations": {estimate}}}'}]
    cfg = cfg_for(script(tmp_path / "m", rules), tmp_path / "c", **{"llm.tasks": ["concepts"], "count.method": "adaptive",
                                                                    "verify.enabled": False, "agent.enabled": False})
    res = run_pipeline([Query("q1", Q1), Query("q2", Q2)], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    assert all(8 <= len(c) <= 50 for c in res.predictions.values())


class _Clock:
    """A clock the test moves: a stage "takes" seconds by advancing it (no test waits on a real clock)."""

    def __init__(self):
        self.t = 1000.0

    def perf_counter(self) -> float:
        return self.t


@pytest.mark.parametrize("droppable", [False, True])
def test_a_stage_slower_than_its_estimate_is_cut_inside_a_chunk(demo_artifacts, monkeypatch, droppable):
    """A 300 s budget (60 s reserve), chunks of 10 questions, an optional stage estimated at 10 s
    per question that takes 44: the walk measures it on one question, re-projects before each
    further call, and the run ends within the budget and the reserve (one 10-question chunk alone
    would take 440 s).  Where the stage is in the degrade order it is dropped as soon as its
    measured rate shows it cannot fit; where it is not, it stops when the budget is spent."""
    import types

    import lexrag.pipeline.budget as budget_mod
    import lexrag.pipeline.run as run_mod
    from lexrag.stages.base import Phase, register_stage, unregister_stage

    clock = _Clock()
    fake = types.SimpleNamespace(perf_counter=clock.perf_counter, time=lambda: clock.t)
    monkeypatch.setattr(run_mod, "time", fake)
    monkeypatch.setattr(budget_mod, "time", fake)

    class Slow:
        name, family, phase, essential, signals = "slowpoke", "rewrite", Phase.REWRITE, False, ()

        def enabled(self, cfg, art):
            return True

        def run(self, batch, ctx):
            clock.t += 44.0 * len(batch.queries)
            return {}

    register_stage(Slow())
    try:
        queries = load_queries(DEMO / "queries_demo.csv")
        order = [["slowpoke"]] if droppable else [["agent"]]
        cfg = load_config(overrides={"runtime.progress": False, "runtime.batch_size": 10, "runtime.time_budget_s": 300.0,
                                     "runtime.reserve_s": 60.0, "runtime.stage_estimates_s": {"slowpoke": 10.0},
                                     "runtime.degrade_order": order})
        start = clock.t
        res = run_pipeline(queries, Artifacts.from_folder(demo_artifacts, cfg), cfg)
    finally:
        unregister_stage("slowpoke")
    ran = len(queries) - len(res.skipped["slowpoke"])
    assert clock.t - start <= 300.0 + 60.0 and all(res.predictions[q.query_id] for q in queries)
    if droppable:  # measured on one question: 44 s x 21 more cannot fit in what is left
        assert ran == 1 and "slowpoke" in res.dropped
    else:  # one question per call (a slice of the budget is 6 s), until the 240 s before the reserve are spent
        assert ran == 6 and "slowpoke" not in res.dropped
