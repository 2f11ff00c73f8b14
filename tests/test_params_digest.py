"""params.json covers itself: ``write_params`` records a sha256 of the document's own content
(``params_sha256``), so a field edited after the build (the ranker's signals list, a BM25 setting)
is refused in one line naming the file, even with every file hash re-recorded; a params.json
written by a lexrag before the digest existed is accepted and said once at info level; every
writer (the indexes, the ranker, the LLM cache and its export, the calibration) writes one, and a
rewrite (a resumed build, a re-recorded document) records the new document's digest."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from lexrag.artifacts import DIGEST, ParamsEdited, params_digest, read_params, write_params
from lexrag.io.hashcache import sha256_file
from lexrag.errors import ArtifactError


def _edit(folder: Path, change, rerecord: bool = True, keep_digest: bool = True) -> dict:
    """Rewrite ``folder``'s params.json with ``change(doc)`` applied and (``rerecord``) every file's
    size and sha256 recorded anew, as a hand or a tool that knows the file hashes would; the digest
    kept as it was (``keep_digest``) or dropped (an artifact from before the digest)."""
    path = folder / "params.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    if rerecord:
        doc["files"] = {rel: {"size": (folder / rel).stat().st_size, "sha256": sha256_file(folder / rel)}
                        for rel in doc.get("files", {})}
    if not keep_digest:
        doc.pop(DIGEST, None)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True), encoding="utf-8")
    return doc


def _refusal(e: pytest.ExceptionInfo, folder: Path) -> str:
    text = str(e.value)
    assert "\n" not in text, text
    assert text.startswith(f"{folder / 'params.json'}: edited after the build"), text
    assert "rebuild it: " in text, text
    return text


@pytest.fixture
def artifact(tmp_path) -> Path:
    folder = tmp_path / "bm25"
    folder.mkdir()
    (folder / "data.npy").write_bytes(b"\x93NUMPY data")
    write_params(folder, "bm25", "lexrag.index.bm25_build.build_bm25", {"k1": 1.5, "b": 0.75, "fields": ["title", "text"]},
                 n_docs=3, corpus_id="c1")
    return folder


def test_write_params_records_the_digest_of_its_own_content(artifact):
    doc = json.loads((artifact / "params.json").read_text(encoding="utf-8"))
    assert doc[DIGEST] == params_digest(doc) and len(doc[DIGEST]) == 64
    assert read_params(artifact, "bm25")["params"]["k1"] == 1.5
    # the digest is of the content, not the layout: the same document written another way loads
    (artifact / "params.json").write_text(json.dumps(doc, sort_keys=False), encoding="utf-8")
    assert read_params(artifact, "bm25")[DIGEST] == doc[DIGEST]


@pytest.mark.parametrize("change", [
    lambda d: d["params"].update(k1=0.9),  # a BM25 setting
    lambda d: d["params"]["fields"].append("heading"),
    lambda d: d.update(n_docs=4),  # a top-level field
    lambda d: d.update(corpus_id="another"),
    lambda d: d.update(extra_field=1),  # a field added
    lambda d: d.update({DIGEST: d[DIGEST].replace(d[DIGEST][0], "0" if d[DIGEST][0] != "0" else "1", 1)}),  # the digest itself
    lambda d: d.update({DIGEST: 42}),
], ids=["bm25_k1", "fields_list", "n_docs", "corpus_id", "field_added", "digest_edited", "digest_not_text"])
def test_an_edited_field_with_the_file_hashes_re_recorded_is_refused_in_one_line(artifact, change):
    _edit(artifact, change)
    with pytest.raises(ParamsEdited) as e:
        read_params(artifact, "bm25")
    _refusal(e, artifact)
    with pytest.raises(ArtifactError):  # without the file check too (corpus_id, a dataset check)
        read_params(artifact, "bm25", verify=False)


def test_an_edited_file_table_is_refused_even_when_the_file_matches_it(artifact):
    """A replaced file with its hash re-recorded passes the file check; the digest refuses it."""
    (artifact / "data.npy").write_bytes(b"\x93NUMPY other data")
    _edit(artifact, lambda d: None, rerecord=True)
    with pytest.raises(ParamsEdited) as e:
        read_params(artifact, "bm25")
    _refusal(e, artifact)


def test_a_damage_with_its_own_message_keeps_it(artifact):
    """The digest is checked last: a replaced file or a file list naming a file outside the folder
    is named as such, not as an edit."""
    (artifact / "data.npy").write_bytes(b"\x93NUMPY other data")
    with pytest.raises(ArtifactError, match="data.npy: 17 bytes, but 11 when"):
        read_params(artifact, "bm25")
    _edit(artifact, lambda d: d["files"].update({"../outside.txt": {"size": 1, "sha256": "0" * 64}}), rerecord=False)
    with pytest.raises(ArtifactError, match="not a file inside the artifact folder"):
        read_params(artifact, "bm25")


def test_a_params_json_without_its_digest_loads_with_a_warning_once_naming_the_rebuild(artifact, caplog):
    """An older build and one whose digest was deleted with an edit read the same (lexrag's version
    does not tell them apart): loaded, with a warning (it was an info line) that its fields cannot
    be checked for edits and how to rebuild it."""
    _edit(artifact, lambda d: d["params"].update(k1=0.9), keep_digest=False)
    with caplog.at_level(logging.INFO, logger="lexrag.artifacts"):
        doc = read_params(artifact, "bm25")
        read_params(artifact, "bm25", verify=False)
    assert DIGEST not in doc and doc["params"]["k1"] == 0.9
    said = [r for r in caplog.records if DIGEST in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in caplog.records]
    text = said[0].getMessage()
    assert text.startswith(str(artifact / "params.json")) and "cannot be told from its build" in text
    assert "rebuild it: " in text and "\n" not in text, text
    # rewritten through write_params (a re-recorded document): it records the digest of the new document
    old = json.loads((artifact / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in old.items() if k not in ("artifact", "builder", "params", "files", "version")}
    new = write_params(artifact, "bm25", old["builder"], {**old["params"], "k1": 1.2}, **extra, **{DIGEST: "stale"})
    assert new[DIGEST] == params_digest(new) and read_params(artifact, "bm25")["params"]["k1"] == 1.2


def test_a_params_json_saved_with_a_byte_order_mark_is_read_and_its_digest_verifies(artifact):
    path = artifact / "params.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_params(artifact, "bm25")["params"]["k1"] == 1.5


def test_a_key_given_twice_reads_as_json_reads_it_and_the_digest_judges_the_result(artifact):
    """The last of two values is kept (as json.loads and JSON.parse keep it), by the one reader the
    loader and the Kaggle copy chooser share: the build's own value last loads; another value last
    is an edit, refused as one."""
    path = artifact / "params.json"
    text = path.read_text(encoding="utf-8")
    assert text.count('"k1": 1.5') == 1
    path.write_text(text.replace('"k1": 1.5', '"k1": 0.9, "k1": 1.5'), encoding="utf-8")
    assert read_params(artifact, "bm25")["params"]["k1"] == 1.5
    path.write_text(text.replace('"k1": 1.5', '"k1": 1.5, "k1": 0.9'), encoding="utf-8")
    with pytest.raises(ParamsEdited) as e:
        read_params(artifact, "bm25")
    _refusal(e, artifact)


def test_a_bm25_k1_edited_with_its_digest_deleted_is_refused_by_its_scores_settings(demo_artifacts, tmp_path):
    """Without a digest an edit cannot be told from an older build, but a BM25 index records the
    settings its scores were computed with twice: params.json and bm25s's params.index.json (whose
    sha256 params.json lists).  A k1 edited to the config's in one of them is refused."""
    from lexrag.config import LexicalConfig
    from lexrag.index.lexical import BM25Index

    folder = shutil.copytree(demo_artifacts / "bm25", tmp_path / "bm25")
    built = json.loads((folder / "params.json").read_text(encoding="utf-8"))["params"]
    cfg = LexicalConfig(**{k: v for k, v in built.items() if k in ("k1", "b", "method")})
    BM25Index.load(folder, cfg)
    _edit(folder, lambda d: d["params"].update(k1=built["k1"] + 0.3), rerecord=False, keep_digest=False)
    with pytest.raises(ArtifactError, match=r"params.json: records k1 .* but the scores in .*params.index.json were "
                                            r"computed with .*; rebuild it: ") as e:
        BM25Index.load(folder, LexicalConfig(**{**cfg.__dict__, "k1": built["k1"] + 0.3}))
    assert "\n" not in str(e.value)


# the learned ranker: a model fitted in a second on synthetic rows, saved as a build saves it
lightgbm = pytest.importorskip("lightgbm")


def _ranker(folder: Path) -> Path:
    from lexrag.stages.ranker import PARAMS, LearnedRanker, TrainingRows
    from lexrag.stages.ranker_features import feature_names

    signals = ["bm25_query"]
    rng = np.random.default_rng(0)
    n = len(feature_names(signals))
    X = [rng.normal(size=(30, n)) for _ in range(12)]
    y = [(x[:, 0] > 0.5).astype(np.int32) for x in X]
    for t in y:
        t[0] = 1
    rows = TrainingRows([f"q{i:02d}" for i in range(12)], X, y)
    LearnedRanker.fit(rows, signals, {**PARAMS, "num_iterations": 4, "min_data_in_leaf": 5}).save(folder)
    return folder


def test_a_ranker_whose_signals_list_was_edited_is_refused_and_from_before_the_digest_is_read(tmp_path):
    """Another signals list (with the feature names that go with it) passes every type check of the
    ranker's params.json and would score the model's columns with other signals; the digest refuses it."""
    from lexrag.stages.ranker import LearnedRanker
    from lexrag.stages.ranker_features import feature_names

    folder = _ranker(tmp_path / "ranker")
    assert LearnedRanker.load(folder).signals == ["bm25_query"]

    def other_signals(d):
        d["params"]["signals"] = ["bm25_prf"]
        d["params"]["features"] = feature_names(["bm25_prf"])

    _edit(folder, other_signals)
    with pytest.raises(ParamsEdited) as e:
        LearnedRanker.load(folder)
    _refusal(e, folder)
    # the same edit in a params.json without a digest (a ranker built before it) is read as it says:
    # what the digest adds is the refusal above
    _edit(folder, lambda d: None, keep_digest=False)
    assert LearnedRanker.load(folder).signals == ["bm25_prf"]


def test_every_writer_records_the_digest(demo_artifacts, tmp_path):
    """The indexes of a build, the ranker, the LLM cache (its live folder, opened again, and its
    export) and the calibration all write params.json through write_params."""
    from lexrag.llm.cache import LLMCache, export_cache

    docs = {p.parent.relative_to(demo_artifacts).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in demo_artifacts.rglob("params.json")}
    assert {"corpus", "bm25", "graph", "dictionary"} <= set(docs), sorted(docs)
    for rel, doc in docs.items():
        assert doc.get(DIGEST) == params_digest(doc), rel
    ranker = json.loads((_ranker(tmp_path / "ranker") / "params.json").read_text(encoding="utf-8"))
    assert ranker[DIGEST] == params_digest(ranker)
    cache = LLMCache(tmp_path / "cache")
    cache.close()
    LLMCache(tmp_path / "cache").close()  # opened again: its params.json read, not rewritten
    export_cache(tmp_path / "cache", tmp_path / "export")
    for folder in (tmp_path / "cache", tmp_path / "export"):
        doc = read_params(folder, "llm_cache")
        assert doc[DIGEST] == params_digest(doc), folder


def test_calibrate_replaces_a_calibration_edited_by_hand_and_refuses_another_artifact(tmp_path):
    from lexrag.errors import ConfigError
    from lexrag.eval.calibrate import check_calibration_out

    out = tmp_path / "art" / "calibration"
    out.mkdir(parents=True)
    write_params(out, "calibration", "lexrag calibrate", {"max_k": 5}, files=True, thresholds={"bm25": 0.5})
    _edit(out, lambda d: d.update(thresholds={"bm25": 0.9}))
    with pytest.raises(ParamsEdited):
        read_params(out, "calibration")
    check_calibration_out(out, tmp_path / "art")  # still the calibration: calibrate replaces it
    other = tmp_path / "art" / "notes"
    shutil.copytree(out, other)
    _edit(other, lambda d: d.update(artifact="bm25"))
    with pytest.raises(ConfigError, match="holds another artifact"):
        check_calibration_out(other, tmp_path / "art")
