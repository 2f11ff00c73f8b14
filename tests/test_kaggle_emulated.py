"""Emulated Kaggle runs: "Save & Run All" on the inference notebook in a fresh environment of
Kaggle's Python (3.12) and package versions, with inputs in either layout, no network, lexrag
installed offline from a wheels folder; and the failure paths that must still leave a valid,
non-empty submission (a stage raising mid-run, a model folder missing, the budget running out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kaggle_sim import EXTRA, NETBLOCK, cache_info, make_env

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "kaggle-sim"
SLUG = "llm-agentic-legal-information-retrieval"  # the kaggle preset's competition


def _layout(root: Path, layout: str, demo_artifacts: Path, demo_queries: Path, wheels: Path | None,
            names: tuple[str, ...] = ("corpus", "bm25", "graph", "dictionary")) -> None:
    comp = root / ("competitions/" + SLUG if layout == "nested" else SLUG)
    ds = (lambda s: root / "datasets" / "lexrag" / s) if layout == "nested" else (lambda s: root / s)
    comp.mkdir(parents=True)
    shutil.copyfile(demo_queries, comp / "test.csv")
    for name in names:
        shutil.copytree(demo_artifacts / name, ds(f"lexrag-{name}"))
    if wheels is not None:
        shutil.copytree(wheels, ds("lexrag-wheels"))


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """(kernel name, wheels folder, Python version) of an emulated Kaggle image."""
    info = cache_info(CACHE)
    if info is None:
        pytest.skip("no wheel cache for the emulated Kaggle runtime: run `make kaggle-sim` (make test does)")
    work = tmp_path_factory.mktemp("kaggle_sim")
    py = make_env(info, CACHE, work / "env")
    name = "kaggle-sim-" + info["version"].replace(".", "")
    subprocess.run([str(py), "-m", "ipykernel", "install", "--user", "--name", name], check=True, capture_output=True)
    wheels = work / "wheels"
    wheels.mkdir()
    from lexrag.io.wheels import build_lexrag_wheel

    build_lexrag_wheel(wheels)
    shutil.copyfile(ROOT / "kernel_src" / "lexrag" / "kaggle" / "install.py", wheels / "lexrag_install.py")
    wanted = {e.split("==")[0].lower().replace("-", "_") for e in EXTRA}
    for whl in (CACHE / "wheels").glob("*.whl"):
        if whl.name.split("-")[0].lower() in wanted:
            shutil.copyfile(whl, wheels / whl.name)
    (work / "netblock").mkdir()
    (work / "netblock" / "sitecustomize.py").write_text(NETBLOCK, encoding="utf-8")
    return {"kernel": name, "wheels": wheels, "version": info["version"], "netblock": work / "netblock", "python": py}


def _run_notebook(sim, tmp_path, root: Path, timeout: float | None = None, **params) -> subprocess.CompletedProcess:
    working = tmp_path / "working"
    working.mkdir(exist_ok=True)
    # every run starts from the bare image: lexrag and the dataset's wheels not installed
    subprocess.run([str(sim["python"]), "-m", "pip", "uninstall", "-q", "-y", "lexrag", *[e.split("==")[0] for e in EXTRA]],
                   capture_output=True)
    env = {**os.environ, "KAGGLE_KERNEL_RUN_TYPE": "Batch", "LEXRAG_KAGGLE_INPUT": str(root),
           "LEXRAG_KAGGLE_WORKING": str(working), "PYTHONPATH": str(sim["netblock"]), "HF_HUB_OFFLINE": "1",
           "PIP_NO_INDEX": "1", "CI": "true"}
    args = [sys.executable, "-m", "papermill", "-k", sim["kernel"], "--cwd", str(working),
            str(ROOT / "notebooks" / "inference.ipynb"), str(tmp_path / "out.ipynb")]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)


def _outputs(nb: Path) -> str:
    doc = json.loads(nb.read_text(encoding="utf-8"))
    return "".join("".join(o.get("text", "")) for c in doc["cells"] for o in c.get("outputs", []))


def _last_output(nb: Path) -> str:
    doc = json.loads(nb.read_text(encoding="utf-8"))
    cells = [c for c in doc["cells"] if c["cell_type"] == "code"]
    return "".join("".join(o.get("text", "")) for o in cells[-1].get("outputs", []))


def _listing(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["classic", "nested"])
def test_save_and_run_all_installs_offline_and_writes_a_scored_file(sim, tmp_path, layout, demo_artifacts, demo_queries):
    root = tmp_path / "input"
    _layout(root, layout, demo_artifacts, demo_queries, sim["wheels"])
    before = _listing(root)
    r = _run_notebook(sim, tmp_path, root)  # the notebook's defaults: kaggle preset, everything found by the resolver
    assert r.returncode == 0, r.stderr[-3000:]
    text = _outputs(tmp_path / "out.ipynb")
    assert "lexrag-install: lexrag from" in text and ": ok" in text
    # the last cell starts with the status and the table: the kaggle preset asks for more than is attached
    last = _last_output(tmp_path / "out.ipynb")
    assert last.startswith("DEGRADED: "), last[:300]
    assert "\nstage " in last and "\nrewrite         missing  llm: " in last and "\ndense           missing  semantic: " in last
    assert "DEGRADED " + str(tmp_path / "working" / "submission.csv") + ": 22 rows" in last
    summary = json.loads(text[text.index("{\n"): text.index("\n}") + 2])
    assert summary["status"] == "DEGRADED" and summary["stages"]["bm25"] == {"state": "ran", "queries": 22, "total": 22}
    # the kaggle preset asks for more than is attached: those parts are left out, named, and the rest answers
    assert {"semantic", "reranker", "llm", "prior"} <= set(summary["missing"])
    assert summary["queries"] == 22 and summary["empty_rows"] == 0 and summary["failed"] == {}
    sub = tmp_path / "working" / "submission.csv"
    from lexrag.eval.submission import validate_submission
    from lexrag.index.corpus import Corpus
    from lexrag.queries import load_queries

    ids = [q.query_id for q in load_queries(demo_queries)]
    assert validate_submission(sub, ids, Corpus(demo_artifacts / "corpus").citations) == []
    assert _listing(root) == before  # nothing written under the (read-only on Kaggle) input folder
    py = subprocess.run([str(sim["python"]), "-c",
                         "import sys, numpy, pandas; print(sys.version_info[:2], numpy.__version__, pandas.__version__)"],
                        capture_output=True, text=True).stdout
    assert sim["version"].replace(".", ", ") in py and "2.0.2" in py and "2.2.2" in py


@pytest.mark.slow
def test_without_the_wheels_the_fallback_file_stays(sim, tmp_path, demo_artifacts, demo_queries):
    root = tmp_path / "input"
    _layout(root, "nested", demo_artifacts, demo_queries, None)
    test_csv = root / "competitions" / SLUG / "test.csv"
    test_csv.write_bytes(b"\xef\xbb\xbf" + test_csv.read_bytes())  # a byte-order mark must not stop the first cell
    r = _run_notebook(sim, tmp_path, root)
    assert r.returncode == 0, r.stderr[-3000:]
    text = _outputs(tmp_path / "out.ipynb")
    assert "no lexrag_install.py is among the inputs" in text and "OK " not in text
    assert _last_output(tmp_path / "out.ipynb").startswith("FAILED: lexrag is not installed")
    assert "the fallback file (every query id, no citations) is what this notebook leaves to submit" in text
    rows = (tmp_path / "working" / "submission.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "query_id,predicted_citations" and len(rows) == 23 and all(r.endswith(",") for r in rows[1:])


@pytest.mark.slow
def test_without_a_corpus_the_run_is_failed_and_says_the_fallback_is_submitted(sim, tmp_path, demo_artifacts, demo_queries):
    root = tmp_path / "input"
    _layout(root, "nested", demo_artifacts, demo_queries, sim["wheels"])
    shutil.rmtree(root / "datasets" / "lexrag" / "lexrag-corpus")
    r = _run_notebook(sim, tmp_path, root)
    assert r.returncode == 0, r.stderr[-3000:]
    last = _last_output(tmp_path / "out.ipynb")
    assert last.startswith("FAILED: artifact 'corpus' not found"), last[:300]
    assert "leaves to submit" in last and "OK" not in last
    assert "FAILED " + str(tmp_path / "working" / "submission.csv") + ": 22 rows, 0 with citations" in last


def _install(sim, wheels: Path) -> subprocess.CompletedProcess:
    """The notebook's install cell on the bare image: lexrag_install.py from the wheels folder, offline."""
    carried = [e.split("==")[0] for e in EXTRA]
    subprocess.run([str(sim["python"]), "-m", "pip", "uninstall", "-q", "-y", "lexrag", *carried], capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(sim["netblock"]), "PIP_NO_INDEX": "1"}
    return subprocess.run([str(sim["python"]), str(wheels / "lexrag_install.py"), "--wheels", str(wheels), "--no-faiss",
                           "--no-llm"], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_the_install_cell_installs_the_ranker_s_lightgbm_and_what_it_requires_offline(sim, tmp_path):
    """lexrag[ranker] (the exam preset's learned count) from the wheels alone on the bare image:
    LightGBM 4.7 and the narwhals it requires, which the image lacks; LightGBM then trains and
    predicts.  Without narwhals in the wheels the ranker's install fails (the fault it once had)."""
    r = _install(sim, sim["wheels"])
    assert r.returncode == 0 and "the ranker's LightGBM: ok" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    probe = ("import lightgbm, narwhals, numpy as np\n"
             "x = np.arange(40, dtype=float).reshape(20, 2)\n"
             "d = lightgbm.Dataset(x, label=[i % 2 for i in range(20)], group=[10, 10])\n"
             "b = lightgbm.train({'objective': 'lambdarank', 'min_data_in_leaf': 1, 'verbose': -1}, d, 3)\n"
             "print(lightgbm.__version__, narwhals.__version__, len(b.predict(x)))")
    out = subprocess.run([str(sim["python"]), "-c", probe], capture_output=True, text=True)
    assert out.stdout.split() == ["4.7.0", "2.29.0", "20"], out.stderr[-2000:]
    bare = tmp_path / "wheels-without-narwhals"
    shutil.copytree(sim["wheels"], bare, ignore=shutil.ignore_patterns("narwhals-*"))
    r = _install(sim, bare)
    assert "lexrag-install: lexrag from" in r.stdout and ": ok" in r.stdout
    assert "the ranker's LightGBM: failed" in r.stdout and "narwhals" in r.stdout, r.stdout[-3000:]


@pytest.fixture(scope="module")
def exam_artifacts(tmp_path_factory, demo_laws, demo_courts, demo_queries) -> Path:
    """The demo slice built for the exam preset (build_datasets.py --config exam --train): its
    corpus, BM25, graph and dictionary, the prior and a ranker trained on the demo's 22 questions
    with gold (a few seconds; fitted on the very questions it then ranks, which is enough here)."""
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts

    out = tmp_path_factory.mktemp("exam_artifacts")
    build_artifacts(load_config("exam", {"runtime.progress": False}), demo_laws, out, courts=demo_courts,
                    dictionary=ROOT / "demo" / "dictionary_demo.txt", train=demo_queries)
    return out


EXAM_SETS = ("corpus", "bm25", "graph", "dictionary", "prior", "ranker")


@pytest.mark.slow
@pytest.mark.parametrize("with_ranker", [True, False], ids=["ranker-attached", "ranker-left-out"])
def test_save_and_run_all_with_the_exam_preset_runs_the_learned_count(sim, tmp_path, exam_artifacts, demo_queries,
                                                                      with_ranker):
    """The exam preset through the notebook on the bare image: the install cell installs the
    ranker's LightGBM (and the narwhals it requires) from the wheels, the ranker reads the attached
    lexrag-ranker and the learned count cuts every question (OK); without that dataset the run is
    DEGRADED, the ranker's row names the dataset and how to build it, the count falls back to count.k."""
    root = tmp_path / "input"
    names = EXAM_SETS if with_ranker else tuple(n for n in EXAM_SETS if n != "ranker")
    _layout(root, "nested", exam_artifacts, demo_queries, sim["wheels"], names)
    r = _run_notebook(sim, tmp_path, root, timeout=900, config_path="exam")
    assert r.returncode == 0, r.stderr[-3000:]
    text = _outputs(tmp_path / "out.ipynb")
    assert "the ranker's LightGBM: ok" in text, text[:3000]
    summary = json.loads(text[text.index("{\n"): text.index("\n}") + 2])
    last = _last_output(tmp_path / "out.ipynb")
    rows = summary["stages"]
    ran = {"state": "ran", "queries": 22, "total": 22}
    assert all(rows[s] == ran for s in ("bm25", "prior", "statutes", "articles", "fusion")), rows
    if with_ranker:
        assert summary["status"] == "OK" and summary["missing"] == {}, last[:2000]
        assert rows["ranker"] == ran and rows["count"] == ran  # the learned count, no fall-back to count.k
        assert last.startswith("OK: every stage the config asks for ran for every query"), last[:2000]
        assert "\nranker          ran      22/22 queries" in last and "\ncount           ran      22/22" in last
        assert "fell back to count.k" not in text
    else:
        assert summary["status"] == "DEGRADED" and list(summary["missing"]) == ["ranker"], last[:2000]
        head = "DEGRADED: 2 of 11 stages the config asks for did not run for every query: ranker, count"
        assert last.startswith(head), last[:2000]
        assert rows["ranker"]["state"] == "missing" and "artifact 'ranker' not found" in rows["ranker"]["why"]
        assert "attach the lexrag-ranker dataset" in rows["ranker"]["fix"] and "--train" in rows["ranker"]["fix"]
        assert "\nranker          missing  ranker: artifact 'ranker' not found" in last
        assert rows["count"]["state"] == "partial" and "fell back to count.k=5 for 22 queries" in rows["count"]["why"]
        assert "\ncount           partial  0/22 queries; fell back to count.k=5 for 22 queries" in last
    status = summary["status"]
    assert f"{status} {tmp_path / 'working' / 'submission.csv'}: 22 rows" in last
    from lexrag.eval.submission import read_submission, validate_submission
    from lexrag.index.corpus import Corpus
    from lexrag.queries import load_queries

    sub = tmp_path / "working" / "submission.csv"
    ids = [q.query_id for q in load_queries(demo_queries)]
    assert validate_submission(sub, ids, Corpus(exam_artifacts / "corpus").citations) == []
    preds = read_submission(sub)
    assert list(preds) == ids and all(preds.values()) and summary["empty_rows"] == 0


# ---------------------------------------------------------------- failure paths, in process


@pytest.fixture
def kaggle_tree(tmp_path, monkeypatch, demo_artifacts, demo_queries):
    root = tmp_path / "input"
    _layout(root, "nested", demo_artifacts, demo_queries, None)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(root))
    monkeypatch.setenv("LEXRAG_KAGGLE_WORKING", str(tmp_path / "working"))
    return tmp_path / "working" / "submission.csv"


def _valid(sub: Path, demo_queries: Path, demo_artifacts: Path) -> list[list[str]]:
    from lexrag.eval.submission import read_submission, validate_submission
    from lexrag.index.corpus import Corpus
    from lexrag.queries import load_queries

    ids = [q.query_id for q in load_queries(demo_queries)]
    assert validate_submission(sub, ids, Corpus(demo_artifacts / "corpus").citations) == []
    return list(read_submission(sub).values())


def test_a_stage_raising_mid_run_costs_its_queries_that_stage_only(kaggle_tree, demo_queries, demo_artifacts):
    from lexrag.kaggle.notebook import run_submission
    from lexrag.stages.base import Phase, register_stage, unregister_stage

    class Flaky:
        name, family, phase, essential, signals = "flaky", "graph", Phase.GRAPH, False, ("flaky",)

        def enabled(self, cfg, art):
            return True

        def run(self, batch, ctx):
            if "demo_05" in batch.query_ids:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            return []

    register_stage(Flaky())
    try:
        summary = run_submission("kaggle")
    finally:
        unregister_stage("flaky")
    assert summary["failed"] == {"flaky": {"demo_05": "RuntimeError: CUDA error: an illegal memory access was encountered"}}
    preds = _valid(kaggle_tree, demo_queries, demo_artifacts)
    assert all(preds) and summary["empty_rows"] == 0


def test_a_missing_model_folder_leaves_its_stage_out(kaggle_tree, demo_queries, demo_artifacts):
    from lexrag.kaggle.notebook import run_submission

    summary = run_submission("kaggle", {"semantic.model": "bge-m3-not-attached"})
    assert "semantic.model: no model folder matches bge-m3-not-attached" in summary["missing"]["semantic"]
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_when_the_budget_runs_out_the_essential_stages_still_answer(kaggle_tree, demo_queries, demo_artifacts):
    from lexrag.kaggle.notebook import run_submission

    with pytest.warns(UserWarning, match="time budget"):  # started an hour ago with a budget of 10 minutes
        summary = run_submission("kaggle", {"runtime.time_budget_s": 600.0, "runtime.reserve_s": 60.0},
                                 started_at=time.time() - 3600)
    # every optional stage the preset enables is skipped (here: dictionary, statutes, feedback, articles and graph); BM25 and seeds answer
    assert summary["skipped"] == {"dictionary": 22, "graph": 22, "statutes": 22, "feedback": 22, "articles": 22}
    assert summary["empty_rows"] == 0
    assert summary["status"] == "DEGRADED" and summary["stages"]["statutes"]["state"] == "dropped"
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_an_llm_replay_without_a_cache_switches_the_llm_off_not_the_run(kaggle_tree, demo_queries, demo_artifacts):
    from lexrag.kaggle.notebook import run_submission

    summary = run_submission("kaggle", {"llm.mode": "replay"})
    assert "needs an LLM cache" in summary["missing"]["llm"]
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts)) and summary["empty_rows"] == 0


def test_with_every_llm_stage_a_short_budget_or_a_failing_query_still_writes_a_valid_file(kaggle_tree, demo_queries,
                                                                                           demo_artifacts, monkeypatch):
    """The kaggle preset with the LLM stages answered by the scripted stand-in: a budget too short
    for the agentic loop drops it (verification stays), a query the loop fails on loses the loop
    only; the file is complete and valid each time."""
    import lexrag.stages.agent as agent_mod
    from lexrag.kaggle.notebook import run_submission

    scripted = {"llm.model": str(ROOT / "demo" / "scripted_llm"), "llm.backend": "scripted", "llm.model_name": "demo-scripted",
                "llm.tasks": ["translate", "concepts"], "llm.cache_dir": str(kaggle_tree.parent / "llm_cache")}
    est = {"agent": 1000.0, "verify": 1.0, "rewrite": 0.0}
    summary = run_submission("kaggle", {**scripted, "runtime.time_budget_s": 3000.0, "runtime.reserve_s": 60.0,
                                        "runtime.stage_estimates_s": est})
    assert list(summary["dropped"]) == ["agent"] and summary["skipped"] == {"agent": 22}
    assert summary["cost"]["verify"]["llm_calls"] > 0 and summary["empty_rows"] == 0
    # the run measures itself beside the plan: seconds per query against the estimate, LLM tokens per second
    verify = summary["measured"]["stages"]["verify"]
    assert verify["plan_s_per_query"] == 1.0 and verify["s_per_query"] >= 0 and "gen_tok_per_s" in verify
    assert "\nmeasured " in summary["status_table"] and summary["status"] == "DEGRADED"  # the agent was dropped
    # and its memory: the process's peak, what each artifact load took and added
    assert summary["measured"]["host_memory_gb"]["peak"] > 0 and "\nhost memory: peak " in summary["status_table"]
    assert {"corpus", "bm25"} <= set(summary["measured"]["loads"]) and "\nartifact loads: corpus " in summary["status_table"]
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))

    real = agent_mod.judge

    def judge(ctx, items, stage):
        if stage == "agent" and any(q.query_id == "demo_07" for q, _ in items):
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(ctx, items, stage)

    monkeypatch.setattr(agent_mod, "judge", judge)
    summary = run_submission("kaggle", scripted)
    assert list(summary["failed"]) == ["agent"] and list(summary["failed"]["agent"]) == ["demo_07"]
    assert summary["dropped"] == {} and summary["empty_rows"] == 0
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_the_cli_finds_the_attached_datasets_without_artifacts(kaggle_tree, tmp_path, demo_queries, demo_artifacts, capsys,
                                                                 monkeypatch):
    # a researcher on Kaggle: `python -m lexrag run|tune|calibrate` in a notebook cell, the
    # artifacts attached as datasets (nested layout), no folder to assemble; the same answers as
    # with --artifacts, and the calibration goes to the working folder, where the next run finds it
    from lexrag.cli import main

    cfg = str(ROOT / "demo" / "config.yaml")
    rows = demo_queries.read_text(encoding="utf-8").splitlines()
    dev = tmp_path / "dev.csv"
    dev.write_text("\n".join([rows[0] + ",course"] + [f"{r},c{i % 3}" for i, r in enumerate(rows[1:])]) + "\n", encoding="utf-8")
    assert main(["run", "--queries", str(demo_queries), "--out", str(tmp_path / "a.csv"), "--config", cfg]) == 0
    assert main(["run", "--queries", str(demo_queries), "--out", str(tmp_path / "b.csv"), "--config", cfg,
                 "--artifacts", str(demo_artifacts)]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    capsys.readouterr()
    best = []
    for extra in ([], ["--artifacts", str(demo_artifacts)]):
        assert main(["tune", "--queries", str(dev), "--config", cfg, "--grid", "count.k=1,5", *extra]) == 0
        best.append(capsys.readouterr().out.splitlines()[-1])
    assert best[0] == best[1] and "grouped by course, 3 folds" in best[0]
    working = tmp_path / "working"
    assert main(["calibrate", "--queries", str(dev), "--config", cfg]) == 0
    assert (working / "calibration" / "params.json").is_file()
    assert not any(p.name == "calibration" for p in (tmp_path / "input").rglob("*"))  # inputs are read-only on Kaggle
    from lexrag.config import load_config
    from lexrag.paths import resolve_paths
    from lexrag.pipeline import Artifacts

    adaptive = load_config(cfg, {"count.method": "adaptive"})
    art = Artifacts.load(resolve_paths(adaptive.paths), adaptive)
    assert art.calibration is not None and "calibration" not in art.missing
    # an attached calibration (another dataset) too: this session's own is the one read
    attached = tmp_path / "input" / "datasets" / "lexrag" / "lexrag-calibration"
    shutil.copytree(working / "calibration", attached)
    paths = resolve_paths(adaptive.paths)
    assert paths.artifact("calibration") == attached and paths.built("calibration") == working / "calibration"
    seen = []
    import lexrag.stages.count as count_mod

    real_load = count_mod.Calibration.load
    monkeypatch.setattr(count_mod.Calibration, "load",
                        classmethod(lambda cls, folder, cid=None: seen.append(Path(folder)) or real_load(folder, cid)))
    Artifacts.load(paths, adaptive)
    assert seen == [working / "calibration"]
    assert main(["run", "--queries", str(demo_queries), "--out", str(tmp_path / "c.csv"), "--config", cfg,
                 "--set", "count.method=adaptive"]) == 0


def test_the_kaggle_preset_without_an_llm_is_degraded_naming_every_stage_it_turns_off(kaggle_tree):
    """No LLM, no encoder, no reranker, no prior: DEGRADED, each stage the preset asks for has its
    row with the reason and the fix; the stages that ran say so."""
    from lexrag.kaggle.notebook import run_submission

    summary = run_submission("kaggle")
    assert summary["status"] == "DEGRADED"
    rows = summary["stages"]
    for stage in ("rewrite", "llm_seeds", "verify", "agent"):
        assert rows[stage]["state"] == "missing" and rows[stage]["why"].startswith("llm: "), rows[stage]
        assert "lexrag-llm-cache" in rows[stage]["fix"]
    assert rows["dense"]["state"] == rows["rerank"]["state"] == rows["prior"]["state"] == "missing"
    assert "lexrag-prior" in rows["prior"]["fix"] and "semantic.model: no model folder matches" in rows["dense"]["why"]
    assert all(rows[s] == {"state": "ran", "queries": 22, "total": 22}
               for s in ("dictionary", "bm25", "citation_seeds", "statutes", "graph", "fusion", "count"))
    table = summary["status_table"].splitlines()
    assert table[0].startswith("DEGRADED: 7 of 16 stages the config asks for did not run for every query: rewrite, ")
    assert "rewrite" in table[0] and "verify" in table[0] and "agent" in table[0]


def test_a_run_with_every_stage_it_asks_for_is_ok(kaggle_tree):
    from lexrag.kaggle.notebook import run_submission

    summary = run_submission("lexical")
    assert summary["status"] == "OK" and summary["status_table"].startswith("OK: every stage the config asks for ran")
    assert set(summary["stages"]) == {"dictionary", "bm25", "citation_seeds", "fusion", "count"}


def test_another_variation_of_the_model_is_named_in_the_status_row_with_the_setting(kaggle_tree, tiny_llm):
    """A 14B attached where the preset names the 7B: the LLM stages' rows (the table a Kaggle user
    reads) name the folder seen and the llm.model setting that would pick it."""
    from lexrag.kaggle.notebook import run_submission

    root = Path(os.environ["LEXRAG_KAGGLE_INPUT"])
    shutil.copytree(tiny_llm, root / "models" / "qwen-lm" / "qwen2.5" / "transformers" / "14b-instruct" / "1")
    summary = run_submission("kaggle")
    row = summary["stages"]["rewrite"]
    assert row["state"] == "missing" and "14b-instruct" in row["fix"] and "llm.model=" in row["fix"], row
    line = next(ln for ln in summary["status_table"].splitlines() if ln.startswith("rewrite"))
    assert "14b-instruct" in line and "to use one set llm.model=" in line


def test_a_damaged_or_older_attached_cache_beside_a_live_model_is_set_aside_with_a_note(kaggle_tree, demo_queries,
                                                                                       demo_artifacts):
    """A damaged lexrag-llm-cache and one of an older lexrag (no model identity) are attached beside
    the (scripted) model: the model answers, the LLM stages run, the status notes each cache."""
    import sqlite3

    from lexrag.artifacts import write_params
    from lexrag.kaggle.notebook import run_submission

    root = Path(os.environ["LEXRAG_KAGGLE_INPUT"])
    damaged, older = root / "datasets" / "lexrag" / "lexrag-llm-cache", root / "datasets" / "someone" / "old-llm-cache"
    for folder in (damaged, older):
        folder.mkdir(parents=True)
        write_params(folder, "llm_cache", "test", {"format": "sqlite", "table": "generations"}, files=False)
    (damaged / "cache.sqlite").write_bytes(b"\0garbage" * 512)
    con = sqlite3.connect(older / "cache.sqlite")
    con.execute("CREATE TABLE generations (key TEXT PRIMARY KEY, model TEXT, template TEXT, input_sha256 TEXT, settings TEXT, "
                "output TEXT, prompt_tokens INTEGER, gen_tokens INTEGER, seconds REAL, created REAL)")
    con.commit()
    con.close()
    scripted = {"llm.model": str(ROOT / "demo" / "scripted_llm"), "llm.backend": "scripted", "llm.model_name": "demo-scripted",
                "llm.tasks": ["translate"], "verify.enabled": False, "agent.enabled": False,
                "llm.cache_dir": str(kaggle_tree.parent / "llm_cache")}
    summary = run_submission("kaggle", scripted)
    assert summary["stages"]["rewrite"]["state"] == "ran" and summary["cost"]["rewrite"]["llm_calls"] > 0
    notes = "\n".join(ln for ln in summary["status_table"].splitlines() if ln.startswith("note: "))
    assert f"LLM cache {damaged} set aside" in notes and "not a readable LLM cache" in notes
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_stray_files_in_unrelated_inputs_never_stop_the_run(kaggle_tree, demo_queries, demo_artifacts):
    """Kaggle users attach many datasets: a params.json whose "artifact" is a list or a dict, one
    nested 100,000 levels deep, a FIFO named config.json beside a modules.json, and eight links to
    the input root are skipped (the walks visit each folder once); the run answers every query."""
    from lexrag.kaggle.notebook import run_submission

    root = Path(os.environ["LEXRAG_KAGGLE_INPUT"])
    other = root / "datasets" / "someone"
    for name, text in (("a", '{"artifact": ["corpus"]}'), ("b", '{"artifact": {"x": 1}}'), ("c", "[" * 100_000 + "]" * 100_000)):
        (other / name).mkdir(parents=True)
        (other / name / "params.json").write_text(text, encoding="utf-8")
    model = other / "not-a-model"
    model.mkdir()
    (model / "modules.json").write_text("[]", encoding="utf-8")
    os.mkfifo(model / "config.json")  # opening it for reading would wait for a writer for ever
    (other / "deep").mkdir()
    (other / "deep" / "config.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    for i in range(8):
        (root / f"loop{i}").symlink_to(root)
    summary = run_submission("lexical")
    assert summary["status"] == "OK" and summary["empty_rows"] == 0
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_links_out_of_the_inputs_are_never_followed(kaggle_tree, demo_queries, demo_artifacts, tmp_path):
    """A dataset folder, or a params.json, that links outside the input root is not read: the
    attached artifacts answer, and the outside corpus copy is never a candidate."""
    import json

    from lexrag.kaggle.notebook import run_submission

    root = Path(os.environ["LEXRAG_KAGGLE_INPUT"])
    outside = tmp_path / "outside"
    shutil.copytree(demo_artifacts / "corpus", outside / "lexrag-corpus")
    doc = json.loads((outside / "lexrag-corpus" / "params.json").read_text(encoding="utf-8"))
    (outside / "lexrag-corpus" / "params.json").write_text(json.dumps({**doc, "n_docs": 10**9}), encoding="utf-8")
    (root / "datasets" / "evil").mkdir(parents=True)
    (root / "datasets" / "evil" / "linked").symlink_to(outside)
    (root / "datasets" / "evil" / "p").mkdir()
    (root / "datasets" / "evil" / "p" / "params.json").symlink_to(outside / "lexrag-corpus" / "params.json")
    summary = run_submission("lexical")
    assert summary["status"] == "OK" and "corpus copies" not in summary["status_table"]
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


@pytest.mark.parametrize("name", ["corpus", "bm25", "dictionary"])
def test_a_stray_copy_of_an_artifacts_params_json_never_wins_over_the_whole_artifact(kaggle_tree, demo_queries, demo_artifacts,
                                                                                    name):
    from lexrag.kaggle.notebook import run_submission

    root = Path(os.environ["LEXRAG_KAGGLE_INPUT"])
    stray = root / "datasets" / "a-someone" / f"lexrag-{name}"  # first in path order, and a tie on everything else
    stray.mkdir(parents=True)
    shutil.copyfile(demo_artifacts / name / "params.json", stray / "params.json")
    summary = run_submission("lexical")
    assert summary["status"] == "OK", summary["status_table"]
    assert all(_valid(kaggle_tree, demo_queries, demo_artifacts))


def test_a_working_folder_that_is_a_file_is_refused_before_any_work(kaggle_tree, monkeypatch, tmp_path):
    from lexrag.errors import ArtifactError
    from lexrag.kaggle.notebook import run_submission

    blocker = tmp_path / "working-is-a-file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("LEXRAG_KAGGLE_WORKING", str(blocker))
    with pytest.raises(ArtifactError, match="LEXRAG_KAGGLE_WORKING.*it is a file"):
        run_submission("lexical")


def test_a_folder_in_the_way_of_the_candidate_file_does_not_cost_the_submission(kaggle_tree, demo_queries, demo_artifacts):
    from lexrag.kaggle.notebook import run_submission

    kaggle_tree.parent.mkdir(parents=True, exist_ok=True)
    (kaggle_tree.parent / "submission.csv.candidate").mkdir()  # the fixed name an earlier version wrote through
    summary = run_submission("lexical")
    assert summary["status"] == "OK" and all(_valid(kaggle_tree, demo_queries, demo_artifacts))


@pytest.mark.slow
def test_links_among_the_inputs_a_killed_run_s_leftovers_and_the_file_mode(sim, tmp_path, demo_artifacts, demo_queries):
    """Two links to the input root in an attached dataset (a recursive search would go round for
    ever); a killed run's candidate and temporary files in the working folder; the answer keeps the
    fallback's mode (the umask's), not a temporary file's 0600."""
    root = tmp_path / "input"
    _layout(root, "classic", demo_artifacts, demo_queries, sim["wheels"])
    (root / "junkds").mkdir()
    for name in ("a", "b"):
        (root / "junkds" / name).symlink_to("..")
    working = tmp_path / "working"
    working.mkdir()
    left = [working / ".submission.csv.999999999-zz.candidate", working / ".submission.csv.999999999-abc.tmp"]
    for f in left:
        f.write_text("half", encoding="utf-8")
    r = _run_notebook(sim, tmp_path, root, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    sub = working / "submission.csv"
    assert len(sub.read_text(encoding="utf-8").splitlines()) == 23
    assert oct(sub.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert not any(f.exists() for f in left)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
