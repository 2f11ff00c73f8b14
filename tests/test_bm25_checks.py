"""The BM25 index checked before use, once per load (issue 54): its postings arrays (bm25s's CSC
files, memory-mapped) are refused in one line naming the file and the rebuild when the numba kernel
could not read them safely or score with them: a document id past the corpus (a segmentation fault
before), an array of another byte order or type (a numba traceback before), term spans out of order,
and BM25 values that are not finite or negative (an all-NaN index ran "OK" with the questions
unanswered before).

Each damaged index is a copy of one built by the project's own build, its file sizes and sha256
re-recorded in ``params.json`` as a build that wrote a bad file would, so only these checks are left."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lexrag.artifacts import ArtifactError, write_params
from lexrag.config import LexicalConfig
from lexrag.index import lexical
from lexrag.index.bm25_build import build_bm25
from lexrag.index.lexical import BM25Index
from lexrag.testing import LAW_DOCS

DOCS = LAW_DOCS[:6]
QUERY = "Kündigung Treu und Glauben Mieter Schaden Beschwerde"
REBUILD = "rebuild it: python -m lexrag build"
DATA, INDICES, INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"  # bm25s's names


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bm25") / "bm25"
    build_bm25([DOCS], folder, corpus_id="tiny")
    return folder


def rerecord(folder: Path) -> None:
    """Rewrite ``params.json`` with the files' new sizes and sha256, everything else as it was
    (what a build that wrote a bad file records; test_faults.py's ``_load_unverified`` does the same)."""
    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(folder, doc["artifact"], doc["builder"], doc["params"], **extra)


def damaged(src: Path, dst: Path, name: str, change, **params) -> Path:
    """A copy of the index at ``src`` whose array file ``name`` is ``change(array)``, saved with
    ``np.save`` (``params``: fields of params.json set anew), its hashes re-recorded."""
    shutil.copytree(src, dst)
    np.save(dst / name, change(np.load(dst / name)), allow_pickle=False)
    if params:
        doc = json.loads((dst / "params.json").read_text(encoding="utf-8"))
        (dst / "params.json").write_text(json.dumps({**doc, **params}), encoding="utf-8")
    rerecord(dst)
    return dst


def refused(folder: Path) -> str:
    with pytest.raises(ArtifactError) as e:
        BM25Index.load(folder, corpus_id="tiny")
    message = str(e.value)
    assert "\n" not in message and REBUILD in message, message
    return message


def _set(a: np.ndarray, at, value) -> np.ndarray:
    a = a.copy()
    a[at] = value
    return a


# 1. ids and spans the kernel would follow unchecked


def test_a_document_id_past_the_corpus_is_one_line_not_a_segmentation_fault(built, tmp_path):
    """The issue's trial, end to end in a child process (before: killed by SIGSEGV, no message)."""
    bad = damaged(built, tmp_path / "bm25", INDICES, lambda a: np.full_like(a, 10**9))
    script = ("import sys\nfrom lexrag.errors import ArtifactError\nfrom lexrag.index.lexical import BM25Index\n"
              "try:\n    idx = BM25Index.load(sys.argv[1])\n    print(idx.search(sys.argv[2], 5))\n"
              "except ArtifactError as e:\n    sys.exit(f'error: {e}')\n")
    r = subprocess.run([sys.executable, "-c", script, str(bad), QUERY], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]  # one line, no traceback
    assert f"{bad / INDICES}: document id 1000000000 at posting 0 is outside the index's 6 documents" in r.stderr
    assert REBUILD in r.stderr


@pytest.mark.parametrize("name,change,fields,said", [
    (INDICES, lambda a: _set(a, -1, 6), None, "is outside the index's 6 documents (0..5;"),
    (INDICES, lambda a: _set(a, 3, -1), None, "document id -1 at posting 3 is outside"),
    (INDPTR, lambda a: a + 1, None, "its term spans are not the postings in order (it starts at 1, not 0;"),
    (INDPTR, lambda a: _set(a, -1, a[-1] + 5), None, "(it ends at "),
    (INDPTR, lambda a: _set(a, 2, a[3] + 1), None, "(it falls at term 3;"),
    (INDPTR, lambda a: np.r_[a, a[-1]].astype(a.dtype), lambda doc: {"vocab_size": doc["vocab_size"] + 1},
     "term spans, but vocab.index.json has"),
], ids=["id-past-corpus", "id-negative", "indptr-not-from-0", "indptr-past-end", "indptr-falls", "indptr-extra-term"])
def test_postings_the_kernel_cannot_follow_are_refused_at_load(built, tmp_path, name, change, fields, said):
    """(``fields``: params.json's recorded sizes set to agree, so only the load check is left.)"""
    doc = json.loads((built / "params.json").read_text(encoding="utf-8"))
    message = refused(damaged(built, tmp_path / "bm25", name, change, **(fields(doc) if fields else {})))
    assert message.startswith(f"{tmp_path / 'bm25' / name}: ") and said in message, message


def test_data_and_ids_of_different_lengths_are_refused(built, tmp_path):
    """With no postings count recorded (an older params.json), the two arrays are still compared."""
    message = refused(damaged(built, tmp_path / "bm25", DATA, lambda a: a[:-1], nnz=None))
    assert message.startswith(f"{tmp_path / 'bm25' / DATA}: ") and "values, but" in message, message


# 2. types and byte orders the kernel is not compiled for


@pytest.mark.parametrize("name,dtype,said", [
    (DATA, ">f4", "values of type big-endian float32 (>f4), the BM25 kernel reads native little-endian float32"),
    (DATA, "<f8", "values of type little-endian float64 (<f8)"),
    (INDICES, ">i4", "values of type big-endian int32 (>i4), the BM25 kernel reads native little-endian int32 or int64"),
    (INDICES, "<u4", "values of type little-endian uint32 (<u4)"),
    (INDICES, "i2", "int16"),
    (INDPTR, ">i8", "values of type big-endian int64 (>i8)"),
    (INDPTR, "<f4", "float32"),
])
def test_arrays_of_another_type_or_byte_order_are_refused_in_one_line(built, tmp_path, name, dtype, said):
    message = refused(damaged(built, tmp_path / "bm25", name, lambda a: a.astype(dtype)))
    assert message.startswith(f"{tmp_path / 'bm25' / name}: ") and said in message, message


def test_a_big_endian_data_array_is_refused_before_numba_sees_it(built, tmp_path):
    """The issue's trial: before, the load passed and the first query was a numba TypingError traceback."""
    bad = damaged(built, tmp_path / "bm25", DATA, lambda a: a.astype(">f4"))
    with pytest.raises(ArtifactError, match=r"data\.csc\.index\.npy: values of type big-endian float32"):
        BM25Index.load(bad).search(QUERY, 5)


# 3. values that score nothing, or wrongly


@pytest.mark.parametrize("change,said", [
    (lambda a: np.full_like(a, np.nan), "BM25 value nan at posting 0"),
    (lambda a: _set(a, 5, np.inf), "BM25 value inf at posting 5"),
    (lambda a: _set(a, -1, -np.inf), "BM25 value -inf at posting"),
    (lambda a: _set(a, 2, -0.5), "BM25 value -0.5 at posting 2"),
], ids=["all-nan", "inf", "minus-inf", "negative"])
def test_bm25_values_not_finite_or_negative_are_refused_at_load(built, tmp_path, change, said):
    message = refused(damaged(built, tmp_path / "bm25", DATA, change))
    assert message.startswith(f"{tmp_path / 'bm25' / DATA}: {said}") and "finite and not negative" in message


def test_an_all_nan_index_stops_the_run_in_one_line_instead_of_an_ok_with_the_questions_unanswered(
        tmp_path, demo_artifacts, demo_queries, capsys):
    """The issue's trial: before, ``lexrag run`` said OK with 20 of the 22 demo questions unanswered."""
    from lexrag.cli import main

    arts = tmp_path / "art"
    shutil.copytree(demo_artifacts, arts)
    np.save(arts / "bm25" / DATA, np.full_like(np.load(arts / "bm25" / DATA), np.nan))
    rerecord(arts / "bm25")
    out = tmp_path / "submission.csv"
    rc = main(["run", "--artifacts", str(arts), "--queries", str(demo_queries), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists(), err[-2000:]
    lines = [line for line in err.strip().splitlines() if DATA in line]
    assert len(lines) == 1 and "BM25 value nan at posting 0" in lines[0] and REBUILD in lines[0] and "Traceback" not in err


def test_the_english_index_is_checked_the_same_way(tmp_path, tiny_inputs):
    from lexrag.config import load_config
    from lexrag.index.corpus import Corpus
    from lexrag.index.english import DOC_IDS, INDEX, EnglishIndex
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    en = tmp_path / "laws_en.csv"
    en.write_text("citation,text,title\nArt. 8 ZGB,The burden of proving an alleged fact rests on the person who derives "
                  "rights from that fact.,Burden of proof\nArt. 2 Abs. 2 ZGB,The manifest abuse of a right is not protected "
                  "by law.,Abuse of rights\n", encoding="utf-8")
    build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art", courts=courts, laws_en=en)
    folder = tmp_path / "art" / "bm25_en"
    data = folder / INDEX / DATA
    np.save(data, np.full_like(np.load(data), np.nan))
    rerecord(folder / INDEX)
    rerecord(folder)  # the English artifact lists its index's files too
    assert (folder / DOC_IDS).is_file()
    with pytest.raises(ArtifactError, match=rf"^{data}: BM25 value nan at posting 0 .*rebuild it: ") as e:
        EnglishIndex.load(folder, Corpus(tmp_path / "art" / "corpus"))
    assert "\n" not in str(e.value)


# the check: what a good build writes passes it, and it runs once per load


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_every_good_build_passes_including_zero_values(tmp_path, method):
    """robertson and atire give a term of every document an idf of 0: zeros are BM25 values, not damage."""
    cfg = LexicalConfig(method=method)
    build_bm25([[d + " Gesetz" for d in DOCS]], tmp_path / method, cfg)
    idx = BM25Index.load(tmp_path / method, cfg)
    data = idx.retriever.scores["data"]
    assert (method == "lucene") == bool((data > 0).all()) and np.isfinite(data).all()
    assert idx.search("Kündigung Mieter", 3)[0][0] == 1


def test_the_check_runs_once_per_load_not_per_query(built, monkeypatch):
    calls = []
    real = lexical._check_values
    monkeypatch.setattr(lexical, "_check_values", lambda *a: calls.append(a[0]) or real(*a))
    idx = BM25Index.load(built, corpus_id="tiny")
    for q in (QUERY, "Arbeitgeber fristlos", "Käufer Mängel"):
        idx.search(q, 3, cache=False)
        idx.scores(q, cache=False)
    idx.search_many([QUERY, "Beschwerde"], 3, threads=1)
    assert calls == [built]
    assert lexical.CHECK_BLOCK >= 1 << 20  # blocks large enough that the per-block Python step costs nothing


def test_an_index_longer_than_one_check_block_is_checked_to_its_last_posting(built, tmp_path, monkeypatch):
    monkeypatch.setattr(lexical, "CHECK_BLOCK", 4)  # the tiny index is many blocks: the last block's last value counts
    BM25Index.load(built, corpus_id="tiny")
    bad = damaged(built, tmp_path / "bm25", DATA, lambda a: _set(a, -1, np.nan))
    n = len(np.load(bad / DATA))
    assert f"BM25 value nan at posting {n - 1} " in refused(bad)
