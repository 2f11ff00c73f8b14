"""Choosing among several attached copies of an artifact (an emulated Kaggle input folder): copies
that tie on every ranking criterion are told apart by their content, never by path order, and the
warnings of the walks over the inputs are said once each."""

from __future__ import annotations

import json
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


SAME = "same build: params.json, sizes and sampled chunks agree; not loaded, not fully hashed"


def test_copies_of_one_build_load_the_first_and_the_status_says_what_was_compared(tmp_path, monkeypatch, sets, caplog):
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    _attach(root, "kagtester", sets["clean"])
    cfg, paths = _kaggle(monkeypatch, root)
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        art = Artifacts.load(paths, cfg, degrade=True)
    first = root / "datasets" / "alice"
    assert art.corpus_dir == first / "lexrag-corpus" and art.missing == {} and art.bm25 is not None
    assert any(n.startswith("2 corpus copies attached; using " + str(first / "lexrag-corpus")) and
               str(root / "datasets" / "kagtester" / "lexrag-corpus") + f" ({SAME})" in n for n in art.notes), art.notes
    assert any("2 copies of bm25 attached" in n and f"({SAME})" in n for n in art.notes), art.notes
    said = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert len(said) == 2 and all(f"the same build as {first}" in m and "not fully hashed" in m for m in said), said


def test_a_copy_edited_outside_its_sampled_chunks_is_not_called_identical(tmp_path, monkeypatch, sets, caplog):
    """The copy after the loaded one is compared by sizes and three sampled chunks only: a byte
    edited between them passes, and the status and the log say what was compared, not "identical"."""
    monkeypatch.setattr("lexrag.models.paths.SAMPLE_BYTES", 4)  # the tiny files' middle bytes outside the chunks
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"], names=("corpus",))
    _attach(root, "kagtester", sets["clean"], names=("corpus",))
    texts = root / "datasets" / "kagtester" / "lexrag-corpus" / "texts.bin"
    data = bytearray(texts.read_bytes())
    data[len(data) // 4] ^= 1
    texts.write_bytes(bytes(data))
    _, paths = _kaggle(monkeypatch, root)
    notes: list[str] = []
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        chosen = paths.artifact_set(["corpus"], notes)
    assert chosen["corpus"] == root / "datasets" / "alice" / "lexrag-corpus"
    assert len(notes) == 1 and f"kagtester/lexrag-corpus ({SAME})" in notes[0] and "identical" not in notes[0], notes
    said = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert len(said) == 1 and "file sizes and sampled chunks (not fully hashed" in said[0], said


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
    assert any("bob/lexrag-calibration (identical: the same params.json)" in n for n in notes), notes


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


def _rewrite(params: Path, change, digest: str = "keep") -> None:
    """``params``'s document with ``change(doc)`` applied, its digest kept (then stale), left out
    (an older upload) or recomputed."""
    from lexrag.artifacts import DIGEST, seal

    doc = json.loads(params.read_text(encoding="utf-8"))
    change(doc)
    if digest == "drop":
        doc.pop(DIGEST)
    elif digest == "seal":
        seal(doc)
    params.write_text(json.dumps(doc, indent=2, sort_keys=True), encoding="utf-8")


def test_a_bm25_copy_whose_params_json_was_edited_is_left_out_for_the_clean_one(tmp_path, monkeypatch, sets, caplog):
    """alice's k1 edited (its digest now stale), bob's clean: they were refused as two builds that
    cannot be told apart; alice's is an edited copy, as an edited corpus copy is."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    _attach(root, "bob", sets["clean"])
    alice = root / "datasets" / "alice" / "lexrag-bm25"
    _rewrite(alice / "params.json", lambda d: d["params"].update(k1=0.9))
    cfg, paths = _kaggle(monkeypatch, root)
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        art = Artifacts.load(paths, cfg, degrade=True)
    assert art.missing == {} and art.bm25 is not None and art.bm25.params["params"]["k1"] != 0.9
    assert any(f"{alice} (edited: its params.json fails its digest)" in n for n in art.notes), art.notes
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"artifact bm25: {alice} not used")]
    assert len(said) == 1 and "edited after the build" in said[0], said


@pytest.mark.parametrize("older", ["alice", "bob"])
def test_one_build_twice_one_copy_without_its_digest_is_one_build(tmp_path, monkeypatch, sets, older):
    """An older upload of the same build records no params_sha256: its params.json differs from
    the other's in that field only, which is no difference of build."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    _attach(root, "bob", sets["clean"])
    _rewrite(root / "datasets" / older / "lexrag-bm25" / "params.json", lambda d: None, digest="drop")
    _, paths = _kaggle(monkeypatch, root)
    notes: list[str] = []
    chosen = paths.artifact_set(["corpus", "bm25"], notes)
    assert chosen["bm25"] == root / "datasets" / "alice" / "lexrag-bm25"
    assert any(f"bob/lexrag-bm25 ({SAME})" in n for n in notes), notes


@pytest.mark.parametrize("damage", ["missing", "other_size"])
def test_a_corpus_copy_whose_files_are_not_all_there_is_left_out_for_that(tmp_path, monkeypatch, sets, caplog, damage):
    """It was left out with another copy's reasons ("1 of the other artifacts were built over ...,
    1 over it; 7 documents there, 7 here")."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"], names=("corpus",))
    _attach(root, "kagtester", sets["clean"])
    bad = root / "datasets" / "alice" / "lexrag-corpus"
    if damage == "missing":
        (bad / "texts.bin").unlink()
    else:
        (bad / "texts.bin").write_bytes((bad / "texts.bin").read_bytes()[:-1])
    _, paths = _kaggle(monkeypatch, root)
    notes: list[str] = []
    with caplog.at_level(logging.WARNING, logger="lexrag"):
        chosen = paths.artifact_set(["corpus", "bm25"], notes)
    assert chosen["corpus"] == root / "datasets" / "kagtester" / "lexrag-corpus"
    assert any(f"left out: {bad} (files not all there)" in n for n in notes), notes
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"artifact corpus: {bad} not used")]
    assert len(said) == 1 and "its files are not all there" in said[0] and "documents there" not in said[0], said


def test_a_params_json_with_a_key_twice_or_a_byte_order_mark_is_found_as_it_loads(tmp_path, monkeypatch, sets):
    """The copy chooser read params.json more strictly than the load: a key given twice skipped the
    copy as "not a lexrag artifact" and the status said to attach the dataset that was attached."""
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    params = root / "datasets" / "alice" / "lexrag-bm25" / "params.json"
    text = params.read_text(encoding="utf-8")
    params.write_text(text.replace('"artifact": "bm25"', '"artifact": "bm25", "artifact": "bm25"'), encoding="utf-8")
    cfg, paths = _kaggle(monkeypatch, root)
    art = Artifacts.load(paths, cfg, degrade=True)
    assert art.missing == {} and art.bm25 is not None
    params.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    art = Artifacts.load(paths, cfg, degrade=True)
    assert art.missing == {} and art.bm25 is not None


def test_a_damaged_params_json_in_an_attached_dataset_is_named_damaged_not_missing(tmp_path, monkeypatch, sets):
    root = tmp_path / "input"
    _attach(root, "alice", sets["clean"])
    params = root / "datasets" / "alice" / "lexrag-bm25" / "params.json"
    params.write_text(params.read_text(encoding="utf-8")[:-40], encoding="utf-8")  # cut short
    cfg, paths = _kaggle(monkeypatch, root)
    art = Artifacts.load(paths, cfg, degrade=True)
    said = art.missing["bm25"]
    assert f"{params} cannot be read (not valid JSON" in said and "lexrag-bm25 is damaged; rebuild it: " in said, said
    assert "attach" not in said, said
