"""Inputs refused before the long work (issue 54, round 5 of the fault sweep): config numbers with
upper bounds where memory follows them, a --set key given twice, a binary or NUL-separated file
for a CSV, a query id that is not UTF-8, a full disk under build_datasets.py named by the file
written, and the dictionary on with nothing to search its translation."""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
from pathlib import Path

import pytest
from lexrag.cli import main as cli_main
from lexrag.config import Config, ConfigError, load_config, parse_overrides, section_names
from lexrag.config.fields import check_ranges
from lexrag.io.csvio import CsvInputError
from lexrag.eval.submission import validate_submission
from lexrag.queries import load_gold, load_queries

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo"


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


# 1. upper bounds where memory follows a number

SIZED = ["corpus.chunk_rows", "lexical.top_k", "lexical.question_weight", "statutes.agreed_top_k", "statutes.top_k",
         "articles.top_articles", "ranker.depth",
         "dictionary.first_pass_docs", "fusion.depth", "semantic.batch_size", "semantic.max_seq", "semantic.shard_size",
         "semantic.nlist", "semantic.pq_m", "semantic.nprobe", "semantic.rescore_k",
         "rerank.batch_size", "rerank.max_length", "graph.seed_k", "graph.top_k", "prior.neighbours",
         "verify.depth", "verify.max_text_chars", "verify.expand_k", "agent.max_rounds", "agent.queries_per_round",
         "agent.observe_depth", "count.k", "count.min_k", "count.max_k", "count.whole_articles",
         "count.articles_first", "count.whole_articles_from", "statutes.max_codes", "llm.batch_size", "llm.max_new_tokens",
         "llm.max_question_chars", "llm.max_answer_chars", "query.max_chars", "runtime.batch_size"]


@pytest.mark.parametrize("path", SIZED)
def test_a_number_that_sizes_an_allocation_has_an_upper_bound_named_in_one_line(path):
    sec, name = path.split(".")
    section = getattr(Config(), sec)
    f = next(f for f in dataclasses.fields(section) if f.name == name)
    lo, hi = f.metadata.get("range", (0, None))
    assert hi is not None and hi >= 10 * getattr(section, name), path  # far above the default: no real use hits it
    setattr(section, name, hi)
    check_ranges([(sec, section)])  # the bound itself is allowed
    setattr(section, name, hi + 1)
    with pytest.raises(ConfigError, match=rf"^{path} must be between {lo} and {hi}, got {hi + 1}$"):
        check_ranges([(sec, section)])


def test_every_count_named_like_a_size_has_an_upper_bound():
    """A field added later that keeps, searches or batches n things gets a bound too."""
    cfg = Config()
    sized = ("top_k", "depth", "batch_size", "_docs", "max_", "_k", "shard_size", "chunk_rows", "top_n", "top_articles")
    for sec in section_names(cfg):
        for f in dataclasses.fields(getattr(cfg, sec)):
            if f.type in (int, "int") and any(s in f.name for s in sized) and f.name not in ("rrf_k",):
                assert f.metadata.get("range", (0, None))[1] is not None, f"{sec}.{f.name} has no upper bound"


@pytest.mark.parametrize("setting, message", [
    ("lexical.top_k=1000000000000000000", "lexical.top_k must be between 1 and 100000, got 1000000000000000000"),
    ("dictionary.first_pass_docs=100000000000000000000", "dictionary.first_pass_docs must be between 1 and 100000"),
])
def test_the_sweeps_huge_numbers_are_one_config_error(capsys, setting, message):
    rc, _, err = cli(capsys, "config", "--set", setting)
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_number_of_more_digits_than_python_reads_is_one_line(capsys):
    rc, _, err = cli(capsys, "config", "--set", "lexical.top_k=1" + "0" * 5000)
    assert rc == 2 and "override 'lexical.top_k': the value is a number of 5,001 characters" in err
    assert len(err) < 300, err


# 2. a --set key given twice

def test_a_key_given_twice_in_set_is_refused_naming_both_values(capsys):
    with pytest.raises(ConfigError, match=r"^--set count\.k is given twice \(count\.k=3 and count\.k=7\); give it once$"):
        parse_overrides(["count.k=3", "count.k=7"])
    with pytest.raises(ConfigError, match=r"--set count\.k is given twice \(count=\{k: 3\} and count\.k=7\)"):
        parse_overrides(["count={k: 3}", "count.k=7"])
    with pytest.raises(ConfigError, match=r"--set count is given twice \(count\.k=3 and count=\{k: 7\}\)"):
        parse_overrides(["count.k=3", "count={k: 7}"])
    both = parse_overrides(["fusion.weights.bm25_de=1", "fusion.weights.bm25_query=2", "count.k=3"])  # other keys
    assert both == {"fusion": {"weights": {"bm25_de": 1, "bm25_query": 2}}, "count": {"k": 3}}
    rc, out, err = cli(capsys, "config", "--set", "count.k=3", "--set", "count.k=7")
    assert rc == 2 and "--set count.k is given twice (count.k=3 and count.k=7)" in err and not out


def test_build_datasets_refuses_a_key_given_twice_before_any_build(tmp_path, monkeypatch, capsys, build_datasets, committed_manifest):
    committed, bd = committed_manifest, build_datasets
    out = tmp_path / "ds"
    rc = bd.main(["--manifest", str(committed), "--out", str(out), "--laws", str(DEMO / "laws_demo.csv"), "--only",
                  "corpus", "--set", "count.k=3", "--set", "count.k=7"])
    err = capsys.readouterr().err
    assert rc == 2 and "error: --set count.k is given twice (count.k=3 and count.k=7)" in err and not out.exists()


# 3. a binary or NUL-separated file for a CSV

SECRET = b"LEXRAG_TEST_SECRET=hunter2-do-not-print"


@pytest.mark.parametrize("source", ["file", "proc"])
def test_a_nul_separated_file_is_refused_without_quoting_it(tmp_path, source):
    q = tmp_path / "q.csv"
    if source == "proc":
        if not Path("/proc/self/environ").is_file():
            pytest.skip("no /proc here")
        q.symlink_to("/proc/self/environ")  # the sweep's case: the environment, NUL-separated
    else:
        q.write_bytes(SECRET + b"\x00HOME=/root\x00PATH=/usr/bin\x00" * 10)
    with pytest.raises(CsvInputError) as e:
        load_queries(q)
    msg = str(e.value)
    assert "a NUL byte in its first line" in msg and "not a UTF-8 CSV" in msg and len(msg.splitlines()) == 1
    assert "hunter2" not in msg and "HOME=" not in msg and "PATH=" not in msg and len(msg) < 250, msg
    problems = validate_submission(q, ["q1"])
    assert len(problems) == 1 and "a NUL byte in its first line" in problems[0]
    assert "hunter2" not in problems[0] and "HOME=" not in problems[0]


def test_a_long_header_is_shown_short(tmp_path):
    q = tmp_path / "q.csv"
    q.write_text(",".join(f"column_{i}_" + "x" * 100 for i in range(50)) + "\nq1,x\n", encoding="utf-8")
    with pytest.raises(CsvInputError, match=r"missing column\(s\) query_id, query; header is \['column_0_xxx") as e:
        load_queries(q)
    shown = str(e.value).split("header is ", 1)[1]
    assert len(shown) <= 240 and "(50 columns)" in shown and "column_20_" not in shown, shown
    s = tmp_path / "s.csv"
    s.write_text("x" * 5000 + ",y\nq1,\n", encoding="utf-8")
    problems = validate_submission(s, ["q1"])
    assert len(problems) == 1 and "header is ['xxxx" in problems[0] and len(problems[0]) - len(str(s)) < 300, problems


# 4. a query id that is not UTF-8

def test_a_query_id_that_is_not_utf8_is_refused_naming_file_and_line(tmp_path):
    q = tmp_path / "q.csv"
    q.write_bytes(b"query_id,query,gold_citations\nq1,Wer haftet?,Art. 41 OR\nq\xe92,Wer zahlt?,Art. 1 OR\n")
    expected = rf"{q}: line 3: query_id b'q\\xe92' holds bytes that are not UTF-8; .* save the file as UTF-8"
    with pytest.raises(CsvInputError, match=expected):
        load_queries(q)
    with pytest.raises(CsvInputError, match=expected):
        load_gold(q)
    text = tmp_path / "t.csv"  # in the question itself a stray byte is still read as cp1252, with a warning
    text.write_bytes(b"query_id,query\nq1,K\xfcndigung\n")
    with pytest.warns(UserWarning, match="not UTF-8"):
        assert load_queries(text)[0].text == "Kündigung"


# 5. a full disk under build_datasets.py

def test_a_full_disk_under_build_datasets_names_the_file_written_not_the_manifest(tmp_path, monkeypatch, capsys, build_datasets,
                                                                                   committed_manifest):
    if not getattr(shutil, "_USE_CP_SENDFILE", False):
        pytest.skip("shutil copies without sendfile here")
    committed, bd = committed_manifest, build_datasets
    before = committed.read_bytes()

    def full(*a):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "sendfile", full)  # every copy meets a full disk: shutil names its source, then the target
    out = tmp_path / "ds"
    rc = bd.main(["--manifest", str(committed), "--out", str(out), "--laws", str(DEMO / "laws_demo.csv"), "--only", "corpus"])
    err = capsys.readouterr().err
    assert rc == 2 and f"error: {out}/" in err and "the disk is full" in err, err
    assert str(committed) not in err and len(err.strip().splitlines()) == 1 and committed.read_bytes() == before


# 6. the dictionary on with BM25 off

def test_the_dictionary_without_bm25_is_refused_unless_the_dense_stage_reads_its_translation(capsys):
    msg = (r"dictionary.enabled with lexical.enabled=false: nothing searches the dictionary's dict_de translation .*; "
           r"set lexical.enabled=true, or dictionary.enabled=false$")
    with pytest.raises(ConfigError, match=msg):  # the sweep's case: uniform needs no index, yet nothing searches it
        load_config(None, {"dictionary.enabled": True, "lexical.enabled": False, "dictionary.weighting": "uniform",
                           "dictionary.compounds": False})
    rc, _, err = cli(capsys, "config", "--config", "lexical", "--set", "lexical.enabled=false")
    assert rc == 2 and "nothing searches the dictionary's dict_de translation" in err and len(err.strip().splitlines()) == 1
    dense = load_config(None, {"dictionary.enabled": True, "lexical.enabled": False, "dictionary.weighting": "uniform",
                               "dictionary.compounds": False, "semantic.enabled": True, "semantic.model": "encoder",
                               "semantic.variants": ["query", "dict_de"]})  # the dense stage searches it
    assert dense.dictionary.enabled and not dense.lexical.enabled
    assert load_config(None, {"dictionary.enabled": True}).dictionary.enabled  # with BM25: as before


@pytest.mark.parametrize("exc, said", [
    (MemoryError(), "ran out of memory or threads (MemoryError"),
    (OSError("Could not find/load shared object file 'libllvmlite.so' from resource location"), "compiled library could not"),
])
def test_a_command_out_of_memory_or_threads_is_one_line(monkeypatch, capsys, exc, said):
    # `lexrag build` under `ulimit -v`: pyarrow cannot start its threads, llvmlite cannot map its library
    import lexrag.cli as cli
    import lexrag.cli.commands as commands

    def boom(args):
        raise exc

    monkeypatch.setattr(commands, "cmd_config", boom)  # the parser binds the handler where it is defined
    assert cli.main(["-q", "config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "ulimit -v" in err[0], err


def test_pyarrow_unable_to_start_its_threads_is_one_line(monkeypatch, capsys):
    import pyarrow.lib

    import lexrag.cli as cli
    import lexrag.cli.commands as commands

    def boom(args):
        raise pyarrow.lib.ArrowException("Unknown error: Failed to launch worker thread: Resource temporarily unavailable")

    monkeypatch.setattr(commands, "cmd_config", boom)
    assert cli.main(["-q", "config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran out of memory or threads (ArrowException" in err[0], err
    monkeypatch.setattr(commands, "cmd_config", lambda a: (_ for _ in ()).throw(ValueError("a bug")))
    with pytest.raises(ValueError):  # anything else is not dressed up
        cli.main(["-q", "config"])


def test_numba_that_cannot_load_its_library_leaves_bm25_on_numpy(monkeypatch, caplog):
    import builtins
    import importlib
    import sys

    real_import = builtins.__import__

    def no_llvmlite(name, *args, **kwargs):
        if name == "numba":
            raise OSError("Could not find/load shared object file 'libllvmlite.so' from resource location")
        return real_import(name, *args, **kwargs)

    saved = sys.modules.pop("lexrag.index.bm25_kernel")
    monkeypatch.setattr(builtins, "__import__", no_llvmlite)
    try:
        with caplog.at_level("WARNING"):
            fresh = importlib.import_module("lexrag.index.bm25_kernel")
        assert fresh.BACKEND == "numpy" and "numba cannot load its compiler library" in caplog.text
    finally:  # the module every other import holds, in sys.modules and as the package's attribute
        import lexrag.index

        sys.modules["lexrag.index.bm25_kernel"] = saved
        lexrag.index.bm25_kernel = saved
