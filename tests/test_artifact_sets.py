"""Choosing among several attached copies of an artifact (an emulated Kaggle input folder): copies
that tie on every ranking criterion are told apart by their content, never by path order, and the
warnings of the walks over the inputs are said once each."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from conftest import TINY_LAWS

from lexrag.artifacts import write_params
from lexrag.config import load_config
from lexrag.errors import ArtifactError
from lexrag.paths import resolve_paths
from lexrag.pipeline import Artifacts


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    """Artifact sets (corpus and BM25) built once: ``clean`` from the tiny law slice, ``edited``
    from the same slice with a paragraph reworded (as many documents: an equal-size set over
    another corpus), ``k1`` the clean slice with another BM25 k1."""
    from lexrag.pipeline.build import build_artifacts

    base = tmp_path_factory.mktemp("artifact_sets")
    laws, edited = base / "laws.csv", base / "edited" / "laws.csv"
    edited.parent.mkdir()
    laws.write_text(TINY_LAWS, encoding="utf-8")
    edited.write_text(TINY_LAWS.replace("Der Vertrag kommt", "Der Kontrakt kommt"), encoding="utf-8")
    out = {}
    for name, src, over in (("clean", laws, {}), ("edited", edited, {}), ("k1", laws, {"lexical.k1": 1.2})):
        out[name] = base / name / "set"
        build_artifacts(load_config(None, {"runtime.progress": False, **over}), src, out[name])
    return out


def _attach(root: Path, owner: str, src: Path, names=("corpus", "bm25")) -> None:
    for name in names:
        shutil.copytree(src / name, root / "datasets" / owner / f"lexrag-{name}")


def _kaggle(monkeypatch, root: Path):
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(root))
    monkeypatch.setenv("LEXRAG_KAGGLE_WORKING", str(root.parent / "working"))
    cfg = load_config(None, {"runtime.progress": False})
    return cfg, resolve_paths(cfg.paths)


def _edit_in_place(folder: Path) -> None:
    """Reword a paragraph of the corpus's text file without changing its size, its params.json
    kept: every size still matches the record (the cheap completeness check passes), the sha256 not."""
    texts = folder / "texts.bin"
    data = texts.read_bytes()
    assert b"Vertrag" in data
    texts.write_bytes(data.replace(b"Vertrag", b"Kontrak"))


def test_two_equal_size_sets_over_different_corpora_are_refused_with_both_named(tmp_path, monkeypatch, sets):
    """alice's set over 7 reworded paragraphs and kagtester's clean set: as many documents, each
    corpus with its own BM25, the same lexrag; path order once loaded alice's (a note said so)."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["edited"])
    _attach(root, "kagtester", sets["clean"])
    cfg, paths = _kaggle(monkeypatch, root)
    alice, kagtester = (root / "datasets" / o / "lexrag-corpus" for o in ("alice", "kagtester"))
    with pytest.raises(ArtifactError) as e:
        Artifacts.load(paths, cfg, degrade=True)
    msg = str(e.value)
    assert f"{alice} and {kagtester} are both whole copies (7 documents" in msg and "\n" not in msg
    assert "different builds" in msg and "files (" in msg and "corpus.parquet" in msg
    assert "detach the one not meant for it, or set paths.artifacts_dir" in msg


def test_identical_copies_load_the_first_and_the_status_says_they_are_identical(tmp_path, monkeypatch, sets, caplog):
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    _attach(root, "kagtester", sets["clean"])
    cfg, paths = _kaggle(monkeypatch, root)
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        art = Artifacts.load(paths, cfg, degrade=True)
    first = root / "datasets" / "alice"
    assert art.corpus_dir == first / "lexrag-corpus" and art.missing == {} and art.bm25 is not None
    assert any(n.startswith("2 corpus copies attached; using " + str(first / "lexrag-corpus")) and
               str(root / "datasets" / "kagtester" / "lexrag-corpus") + " (identical)" in n for n in art.notes), art.notes
    assert any("2 copies of bm25 attached" in n and "(identical)" in n for n in art.notes), art.notes
    said = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert len(said) == 2 and all(f"the same build as {first}" in m for m in said), said


@pytest.mark.parametrize("edited", ["alice", "kagtester"])
def test_an_edited_copy_that_kept_its_params_json_is_passed_over_for_the_clean_one(tmp_path, monkeypatch, sets, caplog,
                                                                                  edited):
    """Both copies record the same files; one was edited in place (same sizes). First in path
    order (alice) it fails the load's sha256 check, which is made before the choice; second, its
    sampled chunks differ from the clean copy's."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    _attach(root, "kagtester", sets["clean"])
    _edit_in_place(root / "datasets" / edited / "lexrag-corpus")
    clean = ({"alice", "kagtester"} - {edited}).pop()
    cfg, paths = _kaggle(monkeypatch, root)
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        art = Artifacts.load(paths, cfg, degrade=True)
    assert art.corpus_dir == root / "datasets" / clean / "lexrag-corpus" and art.missing == {}
    bad = root / "datasets" / edited / "lexrag-corpus"
    assert any(f"{bad} (edited:" in n for n in art.notes), art.notes
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"artifact corpus: {bad} not used")]
    assert len(said) == 1
    assert ("texts.bin: its contents are not the ones" in said[0]) if edited == "alice" else ("sampled contents differ" in
                                                                                             said[0])


def test_two_bm25_copies_with_other_settings_over_one_corpus_are_refused(tmp_path, monkeypatch, sets):
    root = tmp_path / "input"
    _attach(root, "alice", sets["k1"])
    _attach(root, "kagtester", sets["clean"])
    cfg, paths = _kaggle(monkeypatch, root)
    assert (root / "datasets" / "alice" / "lexrag-corpus" / "params.json").read_bytes() == \
        (root / "datasets" / "kagtester" / "lexrag-corpus" / "params.json").read_bytes()  # one corpus, two BM25s
    with pytest.raises(ArtifactError, match=r"artifact 'bm25': .*alice/lexrag-bm25 and .*kagtester/lexrag-bm25 are both "
                                            r"whole copies \(7 documents, lexrag [^,]+, both built over the chosen corpus\) "
                                            r"but different builds \(their params.json differ in .*params"):
        paths.artifact_set(["corpus", "bm25"])


def test_two_calibrations_are_whole_copies_told_apart_by_content(tmp_path, monkeypatch, sets):
    """A calibration is its params.json alone (an empty file list): two of them were each taken for
    a partial copy, so path order chose; now two different ones are refused, two equal ones noted."""
    root = tmp_path / "input"
    _attach(root, "kagtester", sets["clean"], names=("corpus",))
    for owner, max_k in (("alice", 5), ("bob", 5), ("carol", 7)):
        folder = root / "datasets" / owner / "lexrag-calibration"
        folder.mkdir(parents=True)
        write_params(folder, "calibration", "lexrag calibrate", {"max_k": max_k})
    _, paths = _kaggle(monkeypatch, root)
    with pytest.raises(ArtifactError, match=r"artifact 'calibration': .*alice/lexrag-calibration and .*carol/"
                                            r"lexrag-calibration are both whole copies"):
        paths.artifact_set(["corpus", "calibration"])
    shutil.rmtree(root / "datasets" / "carol")
    notes: list[str] = []
    chosen = paths.artifact_set(["corpus", "calibration"], notes)
    assert chosen["calibration"] == root / "datasets" / "alice" / "lexrag-calibration"
    assert any("bob/lexrag-calibration (identical)" in n for n in notes), notes


def test_a_stray_params_json_and_a_choice_among_copies_are_each_said_once(tmp_path, monkeypatch, sets, caplog):
    """A run walks the inputs once per artifact it looks for, and a notebook may load twice: each
    warning names its path once per process."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["edited"], names=("corpus",))  # a corpus no BM25 was built over: left out
    _attach(root, "kagtester", sets["clean"])
    junk = root / "datasets" / "junk" / "x" / "params.json"
    junk.parent.mkdir(parents=True)
    junk.write_text("not json", encoding="utf-8")
    cfg, paths = _kaggle(monkeypatch, root)
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        for _ in range(2):
            Artifacts.load(resolve_paths(cfg.paths), cfg, degrade=True)
            paths.find_artifacts("llm_cache")
    said = [r.getMessage() for r in caplog.records]
    assert sum(f"skipped {junk}" in m for m in said) == 1, said
    assert sum("alice/lexrag-corpus not used" in m for m in said) == 1, said
