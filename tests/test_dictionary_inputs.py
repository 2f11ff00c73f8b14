"""Dictionary inputs refused before the long work, parsed in linear time, and dictionary artifacts
checked when loaded (issue 54: the dictionary's part)."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import time

import pytest

from lexrag.errors import ArtifactError
from lexrag.index.dictionary import Dictionary, build_dictionary
from lexrag.index.dictionary_sources import check_source
from lexrag.index.dictionary_ding import parse_ding
from lexrag.testing import write_dictd

MAX_LINE = MAX_ENTRY = 1 << 16  # the bounds of a Ding or index line and of a dictd entry, in bytes (the messages say 65,536)
DING = "# Version :: t 1\nHaft {f} [jur.] :: detention\nVertrag {m} [jur.] :: contract\n"


def _rerecord(folder):
    """params.json written again over the files as they are now, as a build that wrote a bad file would."""
    from lexrag.artifacts import write_params

    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(folder, doc["artifact"], doc["builder"], doc["params"], **extra)


def _one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_a_line_of_100000_braces_is_left_out_by_its_number_and_long_lines_parse_in_linear_time(tmp_path, caplog):
    src = tmp_path / "de-en"
    lines = ["# Version :: t 1", "Haft {f} [jur.] :: detention", "Vertrag " + "{" * 100_000 + " :: contract"]
    # just under the bound: each opening bracket without its closing one, which the old regexes scanned
    # to the line's end from every one of them (about 1 s a line, 25 s in all); now a few milliseconds
    near = MAX_LINE - 100
    lines += [f"Vertrag {c * near} :: contract" for c in "{[(<" for _ in range(5)]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    start = time.monotonic()
    check_source(src)
    with caplog.at_level(logging.WARNING, logger="lexrag.index.dictionary"):
        d = build_dictionary(src, tmp_path / "dictionary")
    assert time.monotonic() - start < 10  # loose: linear time takes well under a second here
    assert d.entries == {"detention": [("Haft", 1)]}
    assert d.doc["skipped"] == {"lines longer than 65,536 bytes": 1,
                                "synonyms with a brace, bracket or parenthesis left open": 20}
    said = [r.getMessage() for r in caplog.records if "is longer than" in r.getMessage()]
    assert said == [f"dictionary {src}: line 3 is longer than 65,536 bytes (no dictionary line is): left out"], said
    # the pairs of one part grow as its synonyms squared: a part of thousands of synonyms is left out, counted
    many = "; ".join(f"w{i}" for i in range(3000))
    pairs = list(parse_ding([f"{many} :: {many}", "Haft :: detention"], skipped := {}))
    assert pairs and {k for k, _ in pairs} == {"detention"} and skipped == {"parts with more than 2,048 German x English synonyms": 1}


def test_a_dictd_entry_too_long_is_left_out_and_an_index_reading_one_entry_over_and_over_refused(tmp_path):
    src = write_dictd(tmp_path / "fd", [("contract", "contract /ipa/\nVertrag <masc>\n"),
                                        ("long", "long /ipa/\n" + "Lang <adj>, " * (MAX_ENTRY // 10) + "\n")])
    d = build_dictionary(src, tmp_path / "d")
    assert set(d.entries) == {"contract"} and d.doc["skipped"] == {"entries longer than 65,536 bytes": 1}
    index = src.read_text(encoding="utf-8")  # offsets of 60,000 digits first (summed as a big number: 0.5 s each)
    src.write_text(f"word\t{'B' * 60_000}\tB\n" * 40 + index, encoding="utf-8")
    start = time.monotonic()
    check_source(src)
    assert time.monotonic() - start < 10  # loose: milliseconds now
    big = write_dictd(tmp_path / "rep", [("word", "word /ipa/\n" + "Wort <neut>, " * 4000 + "\n")])
    line = big.read_text(encoding="utf-8").splitlines()[-1]
    with open(big, "a", encoding="utf-8") as f:  # the same 52 KB entry 200 times: 10 MB read from 52 KB of data
        f.write((line + "\n") * 200)
    with pytest.raises(ArtifactError, match="point at more than twice the .* bytes of its data") as e:
        build_dictionary(big, tmp_path / "x")
    assert str(big) in _one_line(e) and not (tmp_path / "x").exists()


def test_binary_packed_and_entryless_dictionaries_are_refused_before_anything_is_built(tmp_path, demo_laws, capsys):
    from lexrag.cli import main
    from lexrag.index.build import check_build_inputs

    out = tmp_path / "out"
    nul = tmp_path / "nul.txt"  # 2 GB of NUL bytes (sparse): refused at its first chunk, never read whole
    with open(nul, "wb") as f:
        f.truncate(2 << 30)
    start = time.monotonic()
    with pytest.raises(ArtifactError, match=r"nul.txt: binary, not UTF-8 text \(a NUL byte on line 1\)") as e:
        check_build_inputs(out, demo_laws, dictionary=nul)
    assert time.monotonic() - start < 10 and "nothing was built or changed" in _one_line(e)
    late = tmp_path / "late"  # past the 64 KB the old check read
    late.write_bytes(DING.encode("utf-8") + b"Haft {f} :: custody\n" * 10_000 + b"Schaden {m} :: da\x00mage\n")
    with pytest.raises(ArtifactError, match=r"late: binary, not UTF-8 text \(a NUL byte on line 10,004\)"):
        check_source(late)
    packed = tmp_path / "de-en.gz"
    packed.write_bytes(gzip.compress(DING.encode("utf-8")))
    with pytest.raises(ArtifactError) as e:
        check_source(packed)
    assert f"{packed}: gzip-compressed, not text; unpack it first (gunzip -c {packed} > {tmp_path / 'de-en'})" in _one_line(e)
    latin = tmp_path / "latin"  # not UTF-8 deep in the file: named by its line
    latin.write_bytes(DING.encode("utf-8") * 5000 + "Straße :: street\n".encode("latin-1"))
    with pytest.raises(ArtifactError, match=r"latin: line 15,001: not UTF-8 text \(byte 5 of the line\)"):
        check_source(latin)
    none = tmp_path / "none"  # parses, but yields no entry
    none.write_text("# Version :: t 1\n" + "no separator here\n" * 10_000, encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"none: no English-German entries found \(left out: 10,000 lines without one"):
        check_source(none)
    for bad, said in ((none, "no English-German entries found"), (nul, "a NUL byte on line 1")):
        rc = main(["-q", "build", "--laws", str(demo_laws), "--no-courts", "--out", str(out), "--dictionary", str(bad),
                   "--set", "runtime.progress=false"])
        err = capsys.readouterr().err
        assert rc == 2 and said in err and "Traceback" not in err and "MemoryError" not in err, err
        assert not out.exists()  # refused before the corpus, BM25 and graph were built


def test_a_file_of_bars_and_a_nul_byte_in_a_word_are_refused_naming_the_file_and_line(tmp_path):
    bars = tmp_path / "bars"
    bars.write_text("| :: |\n|\n; :: ;\n", encoding="utf-8")
    for check in (check_source, lambda p: build_dictionary(p, tmp_path / "d")):
        with pytest.raises(ArtifactError, match="no English-German entries found") as e:
            check(bars)
        assert str(bars) in _one_line(e)
    assert not (tmp_path / "d").exists()
    nul = tmp_path / "nulword"
    nul.write_bytes(b"# Version :: t 1\nHaft {f} :: detention\nVer\x00trag {m} :: contract\n")
    for check in (check_source, lambda p: build_dictionary(p, tmp_path / "d")):
        with pytest.raises(ArtifactError, match=r"nulword: binary, not UTF-8 text \(a NUL byte on line 3\)") as e:
            check(nul)
        _one_line(e)
    assert not (tmp_path / "d").exists()
    # lines given as text (not read from a file): a word with a control character is left out, counted
    pairs = list(parse_ding(["Ver\x00trag :: contract", "Haft :: de\x01tention", "Haft :: custody"], skipped := {}))
    assert [k for k, _ in pairs] == ["custody"] and skipped == {"synonyms with a control character": 2}
    # a dictd data file with a NUL byte
    src = write_dictd(tmp_path / "fd", [("contract", "contract /ipa/\nVer\x00trag <masc>\n")])
    with pytest.raises(ArtifactError, match=r"its data en-de.dict.dz is binary, not dictionary text \(a NUL byte at byte") as e:
        check_source(src)
    _one_line(e)


@pytest.fixture
def built(tmp_path):
    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    build_dictionary(src, tmp_path / "dictionary")
    return tmp_path / "dictionary"


@pytest.mark.parametrize("value", ["4", 4.0, None, True])
def test_a_max_phrase_of_another_type_is_a_damaged_params_json(built, value):
    from lexrag.artifacts import seal

    doc = json.loads((built / "params.json").read_text(encoding="utf-8"))
    doc["params"]["max_phrase"] = value
    (built / "params.json").write_text(json.dumps(seal(doc)), encoding="utf-8")  # as a build that wrote it would
    with pytest.raises(ArtifactError) as e:
        Dictionary.load(built)
    text = _one_line(e)
    assert text.startswith(f"{built / 'params.json'}: max_phrase {value!r} is not a whole number (damaged or edited); "
                           "rebuild it: python -m lexrag build"), text
    assert "built with phrases" not in text


def test_an_artifact_without_entries_or_with_another_count_is_refused(built, tmp_path):
    from lexrag.index.dictionary import load_dictionary_step

    entries = built / "entries.tsv.gz"
    rows = gzip.decompress(entries.read_bytes())
    with gzip.GzipFile(entries, "wb", mtime=0) as f:
        f.write(b"")
    _rerecord(built)  # the hashes agree: only the count is left to tell
    with pytest.raises(ArtifactError) as e:
        load_dictionary_step(built, None, None)
    assert _one_line(e).startswith(f"{entries}: holds no entries, so the dictionary could translate nothing (damaged or "
                                   "edited); rebuild it: python -m lexrag build ... --dictionary ")
    with gzip.GzipFile(entries, "wb", mtime=0) as f:
        f.write(rows.splitlines(keepends=True)[0])
    _rerecord(built)
    with pytest.raises(ArtifactError, match=r"entries.tsv.gz: holds 1 English keys, params.json records 2 \(damaged or edited\)"):
        Dictionary.load(built)


def test_a_run_refuses_the_demo_dictionary_emptied_and_re_recorded(demo_artifacts, tmp_path):
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts

    shutil.copytree(demo_artifacts, tmp_path / "art")
    folder = tmp_path / "art" / "dictionary"
    with gzip.GzipFile(folder / "entries.tsv.gz", "wb", mtime=0) as f:
        f.write(b"")
    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    doc["n_entries"] = 0  # the count re-recorded as well
    (folder / "params.json").write_text(json.dumps(doc), encoding="utf-8")
    _rerecord(folder)
    cfg = load_config("lexical", {"runtime.progress": False, "dictionary.enabled": True})
    with pytest.raises(ArtifactError, match="entries.tsv.gz: holds no entries"):
        Artifacts.from_folder(tmp_path / "art", cfg)  # not "OK ... dictionary ran 22/22" over a dictionary that translates nothing
