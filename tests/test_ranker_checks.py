"""The learned ranker's artifact checked before use (issue 54): a damaged ``model.txt`` (its hashes
re-recorded, as a build that wrote a bad file would) is refused in one line before LightGBM reads
it, never a native abort; a model of another width and a ``params.json`` field of the wrong type
or not finite are refused at load, naming the file and the field; LightGBM's thread count follows
the run and is no part of the model; without LightGBM the ``ranker`` extra is named as
errors.require names every extra.

Every ranker here is fitted on small synthetic rows with the project's own fit (a second or so)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from lexrag.artifacts import DIGEST, seal  # noqa: E402
from lexrag.io.hashcache import sha256_file  # noqa: E402
from lexrag.errors import ArtifactError  # noqa: E402
from lexrag.stages.ranker import PARAMS, LearnedRanker, TrainingRows  # noqa: E402
from lexrag.stages.ranker_features import feature_column, feature_names  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SIGNALS = ["bm25_query"]
SMALL = {**PARAMS, "num_iterations": 8, "min_data_in_leaf": 5}  # a quick fit: a few trees of up to 15 leaves


def _rows(signals, n_queries: int = 16, seed: int = 0) -> TrainingRows:
    """Synthetic questions: 30 candidates each, gold where two features are high (and the first)."""
    names = feature_names(signals)
    rng = np.random.default_rng(seed)
    qids, X, y = [], [], []
    for i in range(n_queries):
        x = rng.normal(size=(30, len(names)))
        t = (feature_column(x, names, "fused_rank") + 0.5 * feature_column(x, names, f"{signals[0]}_log_rank")
             > 1.0).astype(np.int32)
        t[0] = 1
        qids.append(f"q{i:02d}")
        X.append(x)
        y.append(t)
    return TrainingRows(qids, X, y)


def _fit(signals=SIGNALS, **kw) -> LearnedRanker:
    return LearnedRanker.fit(_rows(signals), signals, SMALL, **kw)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A ranker artifact fitted on synthetic rows and saved as a build saves it."""
    folder = tmp_path_factory.mktemp("tiny") / "ranker"
    _fit().save(folder)
    return folder


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rerecord(folder: Path) -> None:
    """Re-record every file's size and sha256 in params.json (and its digest of itself), as a build
    that wrote a bad file would."""
    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    for rel in doc["files"]:
        doc["files"][rel] = {"size": (folder / rel).stat().st_size, "sha256": sha256_file(folder / rel)}
    (folder / "params.json").write_text(json.dumps(seal(doc), indent=2, sort_keys=True), encoding="utf-8")


def _edit_tree(text: str, i: int, edit) -> str:
    """``text`` with tree block ``i`` passed through ``edit`` and ``tree_sizes`` re-recorded (so
    LightGBM finds every tree where the header says: the damage is inside the tree)."""
    sizes = [int(x) for x in re.search(r"^tree_sizes=(.*)$", text, flags=re.M).group(1).split()]
    start = re.search(r"^Tree=", text, flags=re.M).start()
    a = start + sum(sizes[:i])
    block = text[a:a + sizes[i]]
    new = edit(block)
    assert new != block
    sizes[i] = len(new)
    text = text[:a] + new + text[a + len(block):]
    return re.sub(r"^tree_sizes=.*$", "tree_sizes=" + " ".join(map(str, sizes)), text, count=1, flags=re.M)


def _damaged_model(tiny: Path, root: Path, name: str, edit) -> Path:
    folder = _copy(tiny, root / name / "ranker")
    text = (folder / "model.txt").read_text(encoding="utf-8")
    (folder / "model.txt").write_text(edit(text), encoding="utf-8")
    _rerecord(folder)
    return folder


# each damage of model.txt (hashes re-recorded) and a word the refusal says; before the check the
# first ones abort the process inside LightGBM (exit 134 or a segmentation fault), the others load
# and give NaN scores, read past the feature row or loop forever at the first prediction
DAMAGES = {
    "cut_in_half": (lambda t: t[:len(t) // 2], "cut short"),
    "cut_before_end_of_trees": (lambda t: t[:t.index("end of trees")], "end of trees"),
    "nan_leaf_sizes_kept": (lambda t: re.sub(r"^leaf_value=\S+", "leaf_value=nan", t, count=1, flags=re.M), "tree 0"),
    "parameters_line_without_colon": (lambda t: re.sub(r"^\[seed: \d+\]$", "garbage", t, flags=re.M), "parameters line"),
    "nan_leaf": (lambda t: _edit_tree(t, 0, lambda b: re.sub(r"^leaf_value=\S+", "leaf_value=nan", b, flags=re.M)),
                 "leaf_value holds 'nan'"),
    "inf_threshold": (lambda t: _edit_tree(t, 1, lambda b: re.sub(r"^threshold=\S+", "threshold=inf", b, flags=re.M)),
                      "threshold holds 'inf'"),
    "num_leaves_missing": (lambda t: _edit_tree(t, 2, lambda b: re.sub(r"^num_leaves=\d+\n", "", b, flags=re.M)),
                           "no num_leaves"),
    "leaf_values_short": (lambda t: _edit_tree(t, 0, lambda b: re.sub(r"^(leaf_value=.*) \S+$", r"\1", b, flags=re.M)),
                          "leaf_value has"),
    "child_past_the_tree": (lambda t: _edit_tree(t, 0, lambda b: re.sub(r"^left_child=\S+", "left_child=99", b,
                                                                        flags=re.M)), "left_child/right_child"),
    "child_back_to_the_root": (lambda t: _edit_tree(t, 0, lambda b: re.sub(r"^right_child=\S+", "right_child=0", b,
                                                                           flags=re.M)), "left_child/right_child"),
    "split_feature_past_the_row": (lambda t: _edit_tree(t, 0, lambda b: re.sub(r"^split_feature=\S+", "split_feature=99",
                                                                               b, flags=re.M)), "split_feature"),
    "feature_names_short": (lambda t: re.sub(r"^(feature_names=.*) \S+$", r"\1", t, count=1, flags=re.M), "feature_names"),
}

CHILD = """
import json, sys
from lexrag.errors import ArtifactError
from lexrag.stages.ranker import LearnedRanker
for folder in sys.argv[1:]:
    try:
        LearnedRanker.load(folder)
        print(json.dumps(["loaded", folder]), flush=True)
    except ArtifactError as e:
        print(json.dumps(["refused", str(e)]), flush=True)
"""


def test_a_damaged_model_file_with_its_hashes_re_recorded_is_refused_before_lightgbm_reads_it(tiny, tmp_path):
    """Loaded in a child process: before the check LightGBM aborted it (the test's own process
    would go down with it)."""
    folders = [_damaged_model(tiny, tmp_path, name, edit) for name, (edit, _) in DAMAGES.items()]
    res = subprocess.run([sys.executable, "-c", CHILD, *map(str, folders)], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert res.returncode == 0, f"the loading process died (exit {res.returncode}): {res.stderr[-600:]}"
    assert "[Fatal]" not in res.stderr and "Traceback" not in res.stderr
    out = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(out) == len(DAMAGES)
    for (name, (_, word)), folder, (state, msg) in zip(DAMAGES.items(), folders, out):
        assert state == "refused", f"{name}: loaded"
        assert "\n" not in msg and msg.startswith(str(folder / "model.txt")), (name, msg)
        assert word in msg and "rebuild it: python -m lexrag build" in msg, (name, msg)


def test_the_undamaged_model_passes_the_check_and_scores_finite(tiny):
    model = LearnedRanker.load(tiny)
    X = np.random.default_rng(1).normal(size=(40, len(model.features)))
    assert np.isfinite(model.scores(X)).all() and np.isfinite(model.probabilities(model.scores(X))).all()


def test_a_model_of_another_width_is_refused_at_load_in_one_line(tiny, tmp_path):
    """model.txt from a ranker trained with more signals (hashes re-recorded), and params.json
    naming one more signal with the feature list that goes with it: both refused at load, not a
    LightGBMError about the number of features mid-run."""
    wide = _copy(tiny, tmp_path / "wide" / "ranker")
    other = _fit(["bm25_query", "citation_seeds"])
    (wide / "model.txt").write_text(other.model_text, encoding="utf-8")
    _rerecord(wide)
    signals = _copy(tiny, tmp_path / "signals" / "ranker")
    doc = json.loads((signals / "params.json").read_text(encoding="utf-8"))
    doc["params"]["signals"] = ["bm25_query", "dense"]
    doc["params"]["features"] = feature_names(["bm25_query", "dense"])
    (signals / "params.json").write_text(json.dumps(seal(doc)), encoding="utf-8")  # as a build that wrote it would
    n = len(feature_names(SIGNALS))
    for folder, (model_w, params_w) in ((wide, (n + 2, n)), (signals, (n, n + 2))):
        with pytest.raises(ArtifactError) as e:
            LearnedRanker.load(folder)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(str(folder / "model.txt")), msg
        assert f"takes {model_w} features" in msg and f"describes {params_w}" in msg and "params.json" in msg, msg
        assert "rebuild it:" in msg


# each bad params.json field and the field name the refusal must say
BAD_FIELDS = {
    "calibration_nan": (("calibration",), [float("nan"), 1, 0], "calibration[0]"),
    "calibration_infinite": (("calibration",), [0, float("inf"), 0], "calibration[1]"),
    "calibration_text": (("calibration",), [0, "1", 0], "calibration"),
    "calibration_bool": (("calibration",), [True, 1, 0], "calibration"),
    "lightgbm_text": (("lightgbm",), "fast", "lightgbm"),
    "lightgbm_list": (("lightgbm",), [1, 2], "lightgbm"),
    "lightgbm_nan": (("lightgbm", "learning_rate"), float("nan"), "lightgbm.learning_rate"),
    "lightgbm_nested": (("lightgbm", "seed"), {"a": 1}, "lightgbm.seed"),
    "lightgbm_objective": (("lightgbm", "objective"), 3, "lightgbm.objective"),
    "signals_twice": (("signals",), ["bm25_query", "bm25_query"], "signals"),
    "signals_empty_name": (("signals",), [""], "signals"),
    "feature_set_text": (("feature_set",), "1", "feature_set"),
    "questions_negative": (("questions",), -1, "questions"),
    "candidates_text": (("candidates",), "161347", "candidates"),
    "train_number": (("train",), 5, "train"),
    "candidate_config_list": (("candidate_config",), ["a"], "candidate_config"),
    "other_field_infinite": (("note",), float("-inf"), "note"),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_every_params_field_is_checked_by_type_and_finiteness_at_load(tiny, tmp_path, case):
    keys, value, field = BAD_FIELDS[case]
    folder = _copy(tiny, tmp_path / "ranker")
    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    doc["params"].update({"questions": 16, "candidates": 480, "train": "train.csv", "candidate_config": {}})
    target = doc["params"]
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value
    # as a build that wrote the bad field would (its digest with it); NaN and Infinity as Python's json writes them
    (folder / "params.json").write_text(json.dumps(seal(doc)), encoding="utf-8")
    with pytest.raises(ArtifactError) as e:
        LearnedRanker.load(folder)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(folder / "params.json")), msg
    assert f"'{field}'" in msg and "rebuild it:" in msg and "model.txt" not in msg, msg


def test_lightgbm_threads_follow_omp_num_threads_for_training_and_prediction(monkeypatch):
    import lightgbm

    seen: list[tuple[str, object]] = []
    train, predict = lightgbm.train, lightgbm.Booster.predict

    def spy_train(params, *a, **kw):
        seen.append(("train", params.get("num_threads")))
        return train(params, *a, **kw)

    def spy_predict(self, X, *a, **kw):
        seen.append(("predict", kw.get("num_threads")))
        return predict(self, X, *a, **kw)

    monkeypatch.setattr(lightgbm, "train", spy_train)
    monkeypatch.setattr(lightgbm.Booster, "predict", spy_predict)
    for env, want in (("1", 1), ("3", 3), ("2,1", 2), (None, 0), ("", 0), ("many", 0)):
        if env is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", env)
        seen.clear()
        model = _fit(calibrate=env == "1")  # the calibration's held-out fits predict too
        model.scores(np.zeros((3, len(model.features))))
        assert {k for k, _ in seen} == {"train", "predict"}
        assert all(n == want for _, n in seen), (env, seen)


def test_the_thread_count_changes_neither_the_model_nor_its_files(monkeypatch, tmp_path):
    """Fitted on 1 and on 2 threads: the same model text and the same artifact files, no thread
    count recorded in params.json; the scores of one model on 1 and on 2 threads agree."""
    models = {}
    for n in (1, 2):
        monkeypatch.setenv("OMP_NUM_THREADS", str(n))
        models[n] = _fit()
        models[n].save(tmp_path / str(n))
    assert models[1].model_text == models[2].model_text
    for name in ("model.txt", "params.json"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
    recorded = json.loads((tmp_path / "1" / "params.json").read_text(encoding="utf-8"))["params"]["lightgbm"]
    assert "num_threads" not in recorded and "num_threads" not in PARAMS
    assert "[num_threads: 0]" in models[1].model_text  # the model text says: the run's choice
    X = np.random.default_rng(2).normal(size=(200, len(models[1].features)))
    scores = {}
    for n in (1, 2):
        monkeypatch.setenv("OMP_NUM_THREADS", str(n))
        scores[n] = models[1].scores(X)
    np.testing.assert_allclose(scores[1], scores[2], rtol=1e-12, atol=0)


def test_an_older_artifact_recording_two_threads_is_still_read_and_not_bound_to_them(tiny, tmp_path, monkeypatch):
    folder = _copy(tiny, tmp_path / "ranker")
    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    doc["params"]["lightgbm"]["num_threads"] = 2
    del doc[DIGEST]  # older: from before params.json recorded its own digest
    (folder / "params.json").write_text(json.dumps(doc), encoding="utf-8")
    model = LearnedRanker.load(folder)
    assert "num_threads" not in model.params  # a refit follows the run, not the recorded 2


def test_without_lightgbm_loading_fitting_and_building_say_the_ranker_extra_as_every_extra_is_said(tiny, tmp_path,
                                                                                                    monkeypatch):
    from types import SimpleNamespace

    from lexrag.config import load_config
    from lexrag.errors import install_hint
    from lexrag.pipeline.ranker_fit import build_ranker_step

    rows = _rows(SIGNALS)
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # `import lightgbm` raises ImportError, find_spec finds none
    nowhere = SimpleNamespace(corpus_dir=tmp_path / "none" / "corpus", train=tmp_path / "none.csv")
    calls = {"learned ranker": (lambda: LearnedRanker.load(tiny), lambda: LearnedRanker.fit(rows, SIGNALS, SMALL)),
             "ranker build": (lambda: build_ranker_step(load_config(None), tmp_path / "out", nowhere),)}
    for what, fns in calls.items():
        for call in fns:
            with pytest.raises(ArtifactError) as e:
                call()
            msg = str(e.value)
            assert "\n" not in msg and msg.startswith(f"the {what} (ranker.enabled) needs lightgbm, which is not installed: ")
            assert msg.endswith(install_hint("ranker")), msg  # the build says it before it reads a file


def test_the_install_hint_is_true_for_the_ranker_and_every_extra_and_worded_once():
    """require's one hint says ``pip install -r requirements.txt`` and the lexrag-wheels dataset
    for every extra: requirements.txt pins each extra's libraries; for the ranker the recorded
    wheels dataset pins the LightGBM requirements.txt pins, and the ranker extra names it.  No
    other install hint for LightGBM is worded in the package."""
    import tomllib

    import yaml
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from lexrag.errors import install_hint

    hint = install_hint("ranker")
    assert "pip install 'lexrag[ranker]'" in hint and "requirements.txt" in hint and "lexrag-wheels" in hint
    pins = {canonicalize_name(Requirement(ln).name): ln.strip()
            for ln in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")}
    extras = tomllib.loads((ROOT / "kernel_src" / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    assert extras["ranker"] == ["lightgbm"]
    for extra, deps in extras.items():
        for dep in deps:
            assert canonicalize_name(Requirement(dep).name) in pins, f"lexrag[{extra}] needs {dep}, not in requirements.txt"
    doc = yaml.safe_load((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    wheels = next(a for a in doc["artifacts"] if a["name"] == "wheels")
    assert pins["lightgbm"] in wheels["params"]["extra_wheels"]
    for path in (ROOT / "kernel_src" / "lexrag").rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not ("pip install" in line and "lightgbm" in line.lower()), f"{path}: {line.strip()}"
            assert "import lightgbm" not in line or path.name in ("model.py", "ranker_fit.py"), f"{path}: {line.strip()}"
