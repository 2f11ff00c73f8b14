"""The Python API refuses a wrong argument in one line naming it: a catalogue entry whose name, switch,
model or dependencies name nothing; Artifacts.load and from_folder, Searcher.load and search given the
wrong kind of value; an import of a module the re-layout moved.  A run's fixes name what helps: the
install hint for a missing library, the model llm.model names; ``strict`` refuses a missing calibration."""

from __future__ import annotations

import importlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import lexrag
from lexrag.config import load_config
from lexrag.config.fields import field_spec
from lexrag.errors import ArtifactError, ArtifactMissing, install_hint, require
from lexrag.paths import Paths
from lexrag.pipeline import Artifacts
from lexrag.pipeline.build import register_artifact
from lexrag.registry import ARTIFACTS, ArtifactSpec, withdraw

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the catalogue's entries


@pytest.mark.parametrize("name", ["../evil", "", "a/b", "Evil", "1st", "x y", ".hidden"])
def test_a_spec_whose_name_is_no_plain_folder_name_is_refused(name):
    before = list(ARTIFACTS)
    with pytest.raises(ValueError, match=f"artifact name {name!r} is not a plain folder name"):
        register_artifact(ArtifactSpec(name, ("corpus",), dataset="lexrag-x", build=lambda *a: None))
    assert ARTIFACTS == before


@pytest.mark.parametrize("kw, said", [
    ({"switch": "lexical"}, "switch='lexical' must be 'section.field'"),
    ({"switch": "toy.enabled"}, "switch='toy.enabled' names no config section 'toy'"),
    ({"switch": "lexical.nosuch"}, "switch='lexical.nosuch' names no field of config section 'lexical'"),
    ({"model": "toymodel"}, "model='toymodel' must be 'section.field'"),
    ({"model": "lexical.nosuch"}, "model='lexical.nosuch' names no field of config section 'lexical'"),
    ({"depends_on": "corpus"}, "depends_on='corpus' must be a tuple of names"),
    ({"reads": "train"}, "reads='train' must be a tuple of names"),
])
def test_a_spec_whose_switch_model_or_dependencies_name_nothing_is_refused(kw, said):
    before = list(ARTIFACTS)
    with pytest.raises(ValueError, match=f"artifact 'guarded': {said}"):
        register_artifact(ArtifactSpec("guarded", **kw))
    assert ARTIFACTS == before


@dataclass
class _GuardConfig:
    enabled: bool = field_spec(False, "a section registered before its artifact")


def test_a_spec_may_name_the_prior_switch_or_a_registered_section():
    from lexrag.config import register_section, unregister_section

    register_section("guardsec", _GuardConfig)
    try:
        for s in (ArtifactSpec("guard_prior", switch="prior"), ArtifactSpec("guard_sec", switch="guardsec.enabled"),
                  ArtifactSpec("guard_model", model="semantic.model", depends_on=("corpus",))):
            register_artifact(s)
    finally:
        for n in ("guard_prior", "guard_sec", "guard_model"):
            withdraw(n)
        unregister_section("guardsec")


# ---------------------------------------------------------------- Artifacts.load, from_folder, Searcher.load


def test_artifacts_load_and_from_folder_name_the_argument_of_the_wrong_kind(demo_artifacts):
    cfg = load_config(None, {"runtime.progress": False})
    paths = Paths.local(demo_artifacts, cfg.paths)
    for bad in ("out/demo/artifacts", Path("out/demo/artifacts")):
        with pytest.raises(TypeError, match=r"Artifacts.load: paths must be a lexrag.paths.Paths .* not "
                                             r".*Path|str.*use Artifacts.from_folder\(folder, cfg\)"):
            Artifacts.load(bad, cfg)
    with pytest.raises(TypeError, match=r"paths must be .*not Config; the arguments are \(paths, cfg\)"):
        Artifacts.load(cfg, paths)
    with pytest.raises(TypeError, match="Artifacts.load: cfg must be a lexrag.config.Config, not str"):
        Artifacts.load(paths, "lexical")
    with pytest.raises(TypeError, match=r"from_folder: folder must be .*not Paths; use Artifacts.load\(paths, cfg\)"):
        Artifacts.from_folder(paths, cfg)
    with pytest.raises(TypeError, match=r"from_folder: folder must be .*not Config; the arguments are \(folder, cfg\)"):
        Artifacts.from_folder(cfg, demo_artifacts)
    with pytest.raises(TypeError, match=r"Searcher.load: artifacts must be the artifacts folder .*not Paths"):
        lexrag.Searcher.load(paths)


# ---------------------------------------------------------------- Searcher.search and its kin


@pytest.fixture(scope="module")
def searcher(demo_artifacts):
    with lexrag.Searcher.load(demo_artifacts, "lexical", {"runtime.progress": False}) as s:
        yield s


@pytest.mark.parametrize("bad", [b"Haftung des Arbeitgebers", None, 12345, ["Haftung"]])
def test_search_and_answer_refuse_a_question_that_is_not_text(searcher, bad):
    for method in ("search", "answer"):
        with pytest.raises(TypeError, match=f"{method}: text is {type(bad).__name__}, not str"):
            getattr(searcher, method)(bad)


def test_batch_calls_name_the_question_that_is_not_text(searcher):
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType, not str"):
        searcher.batch_answer(["Haftung des Arbeitgebers", None])
    with pytest.raises(TypeError, match=r"texts\[0\] is bytes, not str: .*decode bytes first"):
        searcher.batch_search([b"Haftung"])
    with pytest.raises(TypeError, match="texts must be a list of questions"):
        searcher.batch_search(None)
    assert searcher.batch_answer(iter(["Haftung des Arbeitgebers"]))[0]  # any iterable of questions still works


# ---------------------------------------------------------------- moved modules


@pytest.mark.parametrize("old, new", [("config_sections", "config.sections"), ("modelpaths", "models.paths"),
                                      ("csvio", "io.csvio"), ("gpu_check", "cli.gpu_check"),
                                      ("synthetic", "testing.synthetic")])
def test_an_old_module_name_says_where_the_module_moved(old, new):
    with pytest.raises(ModuleNotFoundError, match=f"No module named 'lexrag.{old}': it moved to lexrag.{new}"):
        importlib.import_module(f"lexrag.{old}")
    with pytest.raises(ModuleNotFoundError, match=f"it moved to lexrag.{new}"):
        exec(f"from lexrag import {old}", {})
    assert f"lexrag.{old}" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="No module named 'lexrag.nosuch'$"):
        importlib.import_module("lexrag.nosuch")


def test_python_m_of_a_moved_module_prints_its_new_name():
    r = subprocess.run([sys.executable, "-m", "lexrag.gpu_check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "it moved to lexrag.cli.gpu_check" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- fixes and --strict


def test_a_missing_library_carries_the_install_hint_as_its_fix(demo_artifacts, monkeypatch):
    import lexrag.errors as errors
    from lexrag.eval.status import _fix

    with pytest.raises(ArtifactError) as e:
        require("learned ranker (ranker.enabled)", "ranker", "no_such_module_here", error=ArtifactError)
    assert e.value.fix == install_hint("ranker")
    monkeypatch.setattr(errors, "installed", lambda m: m != "lightgbm")
    cfg = load_config(None, {"runtime.progress": False, "ranker.enabled": True})
    art = Artifacts.from_folder(demo_artifacts, cfg, degrade=True)
    assert "lightgbm" in art.missing["ranker"] and _fix(art, "ranker") == install_hint("ranker")


def test_the_missing_llm_fix_names_the_model_llm_model_names(demo_artifacts, tmp_path):
    from lexrag.eval.status import _fix

    one, two = tmp_path / "MyLLM-3B", tmp_path / "Other-7B"
    for model, said in ((str(one), f"attach {one} (llm.model)"),
                        (f"{one} | {two}", f"attach one of {one} | {two} (llm.model)")):
        cfg = load_config(None, {"runtime.progress": False, "llm.enabled": True, "llm.model": model})
        art = Artifacts.from_folder(demo_artifacts, cfg, degrade=True)
        fix = _fix(art, "llm")
        assert "llm" in art.missing and said in fix and "Qwen2.5-7B-Instruct (llm.model)" not in fix


def test_strict_refuses_an_adaptive_count_without_its_calibration(demo_artifacts):
    assert not (Path(demo_artifacts) / "calibration").exists()
    cfg = load_config(None, {"runtime.progress": False, "count.method": "adaptive"})
    assert "calibration" in Artifacts.from_folder(demo_artifacts, cfg).missing  # not strict: left out, said
    with pytest.raises(ArtifactMissing, match="count.method=adaptive weighs a calibration .* and there is none"):
        Artifacts.from_folder(demo_artifacts, cfg, strict=True)
    off = load_config(None, {"runtime.progress": False, "count.method": "adaptive", "count.w_cal": 0})
    assert Artifacts.from_folder(demo_artifacts, off, strict=True).calibration is None  # the term is off: not needed


def test_lexrag_run_strict_refuses_an_adaptive_count_without_its_calibration(demo_artifacts, tmp_path, capsys):
    from lexrag.cli import main

    q = tmp_path / "q.csv"
    q.write_text("query_id,query\nq1,Haftung des Arbeitgebers\n", encoding="utf-8")
    rc = main(["run", "--strict", "--artifacts", str(demo_artifacts), "--queries", str(q),
               "--out", str(tmp_path / "s.csv"), "--set", "count.method=adaptive", "--set", "runtime.progress=false"])
    err = capsys.readouterr().err
    assert rc == 2 and "count.method=adaptive weighs a calibration" in err and "Traceback" not in err
