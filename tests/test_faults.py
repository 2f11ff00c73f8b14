"""Faults a user meets, each with the kit's answer: a one-line error naming the file, line or field
(exit 2, no traceback), or a documented recovery; never silent loss, never a clobbered input or
artifact.  The README's fault table points here."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lexrag.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo"
QUERIES = "query_id,query,gold_citations\n" \
          "q1,Wer haftet für einen widerrechtlich zugefügten Schaden?,Art. 41 Abs. 1 OR\n" \
          "q2,Welche Kündigungsfrist gilt im Arbeitsverhältnis?,Art. 335c Abs. 1 OR\n" \
          "q3,Wer muss eine behauptete Tatsache beweisen?,Art. 8 ZGB\n" \
          "q4,Gilt Treu und Glauben?,Art. 2 Abs. 1 ZGB\n"


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run the CLI in process; a traceback (an exception escaping main) fails the test."""
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def tree_state(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def arts(tmp_path, demo_artifacts) -> Path:
    """A private copy of the demo artifacts (tests may damage it)."""
    out = tmp_path / "art"
    shutil.copytree(demo_artifacts, out)
    return out


# ---------------------------------------------------------------- 1. unmatched quotes


def test_a_stray_quote_in_a_queries_file_is_an_error_naming_the_lines_and_writes_nothing(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES.replace("q2,Welche", 'q2,"Welche'))
    out = tmp_path / "sub.csv"
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out)
    assert rc == 2 and "lines 3-" in err and "unmatched quote" in err and not out.exists()


def test_a_stray_quote_that_closes_further_down_is_caught_by_the_rows_it_swallowed(tmp_path, arts, capsys):
    text = QUERIES.replace("q2,Welche", 'q2,"Welche').replace("q3,Wer muss eine", 'q3,Wer muss",eine')  # 4 fields, not 3
    q = write(tmp_path / "q.csv", text)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and "look like further rows" in err and "line 4" in err and "4 fields (expected 3)" in err


def test_a_record_that_csv_reads_whole_is_kept_and_a_swallowed_looking_line_is_named(tmp_path, arts, capsys, caplog):
    """The same stray quote closing at the right width is a well-formed record to any CSV parser:
    it is read as such, and the line that reads like a row of its own is named on stderr."""
    text = QUERIES.replace("q2,Welche", 'q2,"Welche').replace("q3,Wer muss eine behauptete Tatsache beweisen?,", 'q3,Wer muss",')
    q = write(tmp_path / "q.csv", text)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 0, err
    warned = caplog.text
    assert "q.csv: lines 3-4" in warned and "(line 4)" in warned and "kept as CSV reads it" in warned
    ids = [r["query_id"] for r in csv.DictReader(open(tmp_path / "s.csv", newline="", encoding="utf-8"))]
    assert ids == ["q1", "q2", "q4"]


def test_real_multi_line_law_records_are_built_whole(tmp_path, capsys, caplog):
    """Fedlex writes list items as lines of one quoted field (KVV Art. 65dbis: 'a. 15 Prozent, ...'):
    every record Python's csv module reads is a paragraph; the one whose lines read like rows is named."""
    laws = Path(__file__).parent / "data" / "laws_multiline.csv"
    want = {r["citation"]: r["text"] for r in csv.DictReader(open(laws, newline="", encoding="utf-8"))}
    rc, _, err = cli(capsys, "build", "--laws", laws, "--out", tmp_path / "a")
    assert rc == 0, err
    report = json.loads((tmp_path / "a" / "corpus" / "build_report.json").read_text())["files"][0]
    assert (report["rows_read"], report["written"], report["malformed"], report["lines_lost"]) == (5, 5, 0, 0)
    assert (report["multiline"], report["suspect"], report["lines"]) == (2, 1, 13)
    assert "laws_multiline.csv: lines 4-9" in caplog.text and "(line 9)" in caplog.text
    corpus = pq.read_table(tmp_path / "a" / "corpus" / "corpus.parquet", columns=["citation", "text"]).to_pydict()
    got = dict(zip(corpus["citation"], corpus["text"]))
    assert {k: got[k] for k in want} == want and "\ne. 40 Prozent, sofern" in got["Art. 65dbis Abs. 1 KVV"]


def test_a_stray_quote_in_the_law_file_stops_the_build_and_keeps_the_old_artifacts(tmp_path, arts, capsys):
    laws = (DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()
    laws[2] = laws[2].replace(",", ',"', 1)
    bad = write(tmp_path / "laws.csv", "\n".join(laws[:301]) + "\n")
    before = tree_state(arts)
    rc, _, err = cli(capsys, "build", "--laws", bad, "--out", arts)
    assert rc == 2 and "lines 3-" in err and "laws.csv" in err
    assert tree_state(arts) == before


def test_with_strict_quotes_off_the_broken_record_is_dropped_and_its_lines_counted(tmp_path, capsys):
    laws = (DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()[:301]
    laws[100] = 'Art. 9999 OR,"Ein Text ohne schliessendes Anführungszeichen,OR'  # runs into line 102
    bad = write(tmp_path / "laws.csv", "\n".join(laws) + "\n")
    rc, _, err = cli(capsys, "build", "--laws", bad, "--out", tmp_path / "a", "--set", "corpus.strict_quotes=false")
    assert rc == 0, err
    report = json.loads((tmp_path / "a" / "corpus" / "build_report.json").read_text())["files"][0]
    assert report["lines"] == 301 and report["malformed"] == 1 and report["lines_lost"] == 2
    assert report["examples"][0]["reason"].startswith("lines 101-102")
    # every physical line accounted for: the header, the good rows, the lines of the broken record
    assert 1 + (report["rows_read"] - report["malformed"]) + report["lines_lost"] == report["lines"]


def test_multi_line_queries_and_trailing_blank_lines_are_fine(tmp_path, arts, capsys):
    text = QUERIES.replace("q4,Gilt Treu und Glauben?", 'q4,"Gilt Treu\nund Glauben, auch hier?"') + "\n\n"
    q = write(tmp_path / "q.csv", text)
    out = tmp_path / "s.csv"
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out)
    assert rc == 0, err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5
    rc, _, err = cli(capsys, "evaluate", "--gold", q, "--pred", out)
    assert rc == 0, err


def test_the_validator_names_a_submission_row_that_swallows_others(tmp_path, capsys):
    sub = write(tmp_path / "s.csv", 'query_id,predicted_citations\nq1,"Art. 1 OR\nq2,Art. 2 OR\nq3,Art. 3 OR\n')
    q = write(tmp_path / "q.csv", QUERIES)
    rc, out, _ = cli(capsys, "validate-submission", sub, "--queries", q)
    assert rc == 1 and "lines 2-" in out


# ---------------------------------------------------------------- 2. builds never destroy what is there


@pytest.mark.parametrize("missing", ["--laws", "--courts", "--train", "--law-keys"])
def test_a_missing_input_fails_before_the_build_touches_the_output(tmp_path, arts, capsys, missing):
    args = {"--laws": DEMO / "laws_demo.csv", missing: tmp_path / "nope.csv"}
    before = tree_state(arts)
    rc, _, err = cli(capsys, "build", *[x for kv in args.items() for x in kv], "--out", arts)
    assert rc == 2 and f"{missing} {tmp_path / 'nope.csv'}: file not found" in err
    assert tree_state(arts) == before


def test_a_law_file_without_its_columns_is_refused_before_building(tmp_path, arts, capsys):
    bad = write(tmp_path / "laws.csv", "paragraph,body\nArt. 1 OR,Text\n")
    before = tree_state(arts)
    rc, _, err = cli(capsys, "build", "--laws", bad, "--out", arts)
    assert rc == 2 and "missing column(s) citation, text" in err and tree_state(arts) == before


def test_a_build_failing_half_way_publishes_nothing(tmp_path, arts, monkeypatch):
    import lexrag.index.graph as graph
    from lexrag.config import load_config

    def broken(*a, **k):
        raise RuntimeError("disk full (simulated)")

    monkeypatch.setattr(graph, "build_graph", broken)
    before = tree_state(arts)
    from lexrag.pipeline.build import build_artifacts

    with pytest.raises(RuntimeError, match="disk full"):
        build_artifacts(load_config(overrides={"runtime.progress": False, "graph.enabled": True}), DEMO / "laws_demo.csv", arts)
    assert tree_state(arts) == before  # the corpus and BM25 built before the failure were not published alone
    assert not [p for p in arts.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_an_input_inside_a_folder_the_build_replaces_is_refused(tmp_path, capsys):
    laws = write(tmp_path / "a" / "corpus" / "laws.csv", (DEMO / "laws_demo.csv").read_text(encoding="utf-8"))
    rc, _, err = cli(capsys, "build", "--laws", laws, "--out", tmp_path / "a")
    assert rc == 2 and "lies inside" in err and laws.is_file()


# ---------------------------------------------------------------- 3. outputs never overwrite inputs


def test_run_refuses_an_output_that_is_the_queries_file_or_inside_the_artifacts(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", q)
    assert rc == 2 and "would overwrite the input" in err and q.read_text(encoding="utf-8") == QUERIES
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", arts / "corpus" / "submission.csv")
    assert rc == 2 and "inside the --artifacts folder" in err
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path)
    assert rc == 2 and "is a folder" in err
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv.gz")
    assert rc == 2 and "written as plain CSV (what Kaggle reads), not .gz compressed" in err
    locked = write(tmp_path / "locked.csv", "keep\n")
    if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode == 0:  # refused before the run
        try:
            rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", locked)
            assert rc == 2 and "exists and cannot be replaced" in err and "Ranked" not in err
        finally:
            subprocess.run(["chattr", "-i", str(locked)], capture_output=True)


def test_calibrate_refuses_to_write_over_another_artifact(tmp_path, arts, capsys):
    rc, _, err = cli(capsys, "calibrate", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--out", arts / "corpus")
    assert rc == 2 and "holds another artifact" in err and (arts / "corpus" / "params.json").is_file()


def test_concurrent_runs_writing_one_output_do_not_collide(tmp_path):
    from lexrag.eval.submission import validate_submission, write_submission

    out = tmp_path / "s.csv"
    ids = [f"q{i}" for i in range(200)]
    errors = []

    def one(k):
        try:
            for _ in range(20):
                write_submission(out, {q: [f"Art. {k} OR"] for q in ids}, ids)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and validate_submission(out, ids) == []
    assert not list(tmp_path.glob(".s.csv.*"))  # no temporary file left behind


# ---------------------------------------------------------------- 4. artifact identity covers contents


def test_a_corpus_table_swapped_for_a_shuffled_build_of_the_same_size_is_refused(tmp_path, arts, capsys):
    import pyarrow.parquet as pq

    t = pq.read_table(arts / "corpus" / "corpus.parquet")
    order = np.random.default_rng(0).permutation(t.num_rows)
    target = (arts / "corpus" / "corpus.parquet").stat().st_size
    pq.write_table(t.take(order), tmp_path / "shuffled.parquet", compression="zstd")
    data = (tmp_path / "shuffled.parquet").read_bytes()
    data = data[:target] if len(data) >= target else data + b"\0" * (target - len(data))  # the same size
    (arts / "corpus" / "corpus.parquet").write_bytes(data)
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and "corpus.parquet: its contents are not the ones" in err and "rebuild it" in err


def test_a_file_of_the_same_size_with_other_bytes_is_refused(arts):
    from lexrag.config import load_config
    from lexrag.errors import ArtifactError
    from lexrag.pipeline import Artifacts

    victim = next(p for p in sorted((arts / "bm25").iterdir()) if p.suffix == ".npy")
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match=f"{victim.name}: its contents are not the ones artifact 'bm25'"):
        Artifacts.from_folder(arts, load_config(overrides={"runtime.progress": False}))


def test_file_hashes_are_computed_once_per_file_version(arts, monkeypatch):
    import lexrag.io.hashcache as H
    from lexrag.index.corpus import Corpus

    Corpus(arts / "corpus")  # first load: hashes (or finds them cached from the build)
    calls = []
    real = H.sha256_file
    monkeypatch.setattr(H, "sha256_file", lambda p, *a: calls.append(p) or real(p, *a))
    Corpus(arts / "corpus")
    assert calls == []  # unchanged files: from the cache
    os.utime(arts / "corpus" / "texts.bin")  # touched, same contents: hashed again, accepted
    Corpus(arts / "corpus")
    assert [Path(p).name for p in calls] == ["texts.bin"]


# ---------------------------------------------------------------- 5. damaged artifacts: an error before any query


def _damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "truncated corpus parquet": ("corpus/corpus.parquet", _damage_truncate, "bytes, but"),
    "truncated texts blob": ("corpus/texts.bin", _damage_truncate, "bytes, but"),
    "halved BM25 arrays": ("bm25/data.csc.index.npy", _damage_truncate, "bytes, but"),
    "deleted BM25 vocabulary": ("bm25/vocab.index.json", lambda p: p.unlink(), "missing from artifact 'bm25'"),
    "truncated graph edges": ("graph/edges.parquet", _damage_truncate, "bytes, but"),
    "params.json a list": ("graph/params.json", lambda p: p.write_text("[1, 2]"), "not a params object"),
    "params.json not JSON": ("bm25/params.json", lambda p: p.write_text("{oops"), "not valid JSON"),
    "params.json missing": ("corpus/params.json", lambda p: p.unlink(), "the build did not finish"),
    "params.json of another artifact": ("graph/params.json", lambda p: p.write_text(json.dumps({"artifact": "bm25"})),
                                        "says artifact 'bm25', but this folder is read as 'graph'"),
    "params.json naming a list as its artifact": ("graph/params.json", lambda p: p.write_text(json.dumps({"artifact": [1]})),
                                                  "has artifact [1], not a name"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_artifact_is_an_error_naming_the_file_before_any_query_runs(tmp_path, arts, capsys, case):
    rel, damage, message = DAMAGE[case]
    target = arts / rel
    if not target.exists():
        pytest.skip(f"{rel} not in this build")
    damage(target)
    q = write(tmp_path / "q.csv", QUERIES)
    out = tmp_path / "s.csv"
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out, "--set", "graph.enabled=true")
    assert rc == 2 and message in err and not out.exists()
    assert "Traceback" not in err


def test_damage_is_caught_even_in_an_artifact_that_recorded_no_file_hashes(tmp_path, arts, capsys):
    """An artifact whose params.json lists no files (built before hashes were recorded, or the list
    deleted) is refused before any of its files is read: its damage could not be seen."""
    for name in ("bm25",):  # (the corpus's table hash is part of its identity: the indexes would refuse it)
        p = arts / name / "params.json"
        doc = json.loads(p.read_text())
        doc.pop("files", None)
        p.write_text(json.dumps(doc))
    _damage_truncate(arts / "bm25" / "data.csc.index.npy")
    rc, _, err = cli(capsys, "run", "--queries", write(tmp_path / "q.csv", QUERIES), "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and "records no list of its files" in err and "bm25" in err and "rebuild" in err, err


# ---------------------------------------------------------------- 6. config ranges


CONFIG_CASES = {
    "query.max_chars=0": "query.max_chars must be >= 1",
    'graph.signals={ppr: "no"}': "graph.signals.ppr must be true or false",
    "lexical.top_k=-5": "lexical.top_k must be >= 1",
    "fusion.depth=0": "fusion.depth must be >= 1",
    "graph.seed_k=-1": "graph.seed_k must be >= 1",
    "fusion.default_weight=.nan": "fusion.default_weight must be a finite number",
    "count.k=[5": "is not valid YAML",
    "lexical.b=2": "lexical.b must be between 0 and 1",
    "verify.threshold=1.5": "verify.threshold must be between 0 and 1",
    "llm.batch_size=0": "llm.batch_size must be >= 1",
    "fusion.weights.bm25_de=-1": "fusion.weights.bm25_de must be a finite number >= 0",
    "runtime.time_budget_s=-1": "runtime.time_budget_s must be >= 0",
    "agent.max_rounds=0": "agent.max_rounds must be >= 1",
    "count.min_k=60": "count.min_k must be <= count.max_k",
    "lexical.top_kk=5": "unknown config key 'lexical.top_kk'",
    "statutes.vote_depth=50": "config key statutes.vote_depth was removed (now fixed at 100: ",
    "lexical=5": "expected a section",
    "count.k": "is not of the form section.field=value",
    "count.method=best": "count.method must be fixed, elbow, adaptive or expected_f1",
    "fusion.weights={bm25_qurey: 1}": "did you mean 'bm25_query'",
    "runtime.degrade_order=[[agnet]]": "did you mean 'agent'",
}


@pytest.mark.parametrize("override", sorted(CONFIG_CASES))
def test_a_bad_config_value_is_one_line_naming_the_field(tmp_path, arts, capsys, override):
    rc, _, err = cli(capsys, "run", "--queries", write(tmp_path / "q.csv", QUERIES), "--artifacts", arts,
                     "--out", tmp_path / "s.csv", "--set", override)
    assert rc == 2 and CONFIG_CASES[override] in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------- 7. Unicode


@pytest.mark.parametrize("text,expected", [
    ("Ｗｅｒ haftet nach Ａｒｔ． ４１ ＯＲ?", "Art. 41 OR"),
    ("Wer haftet nach Art.\u200b41 OR?", "Art. 41 OR"),
    ("Wer haftet nach Art.\u00a041\u00a0Abs.\u00a01\u00a0OR?", "Art. 41 Abs. 1 OR"),
    ("Wer haftet nach Art. 4\u00ad1 OR?", "Art. 41 OR"),
])
def test_citations_hidden_by_unicode_variants_are_found(text, expected):
    from lexrag import citations as cit

    assert [e.citation.format() for e in cit.extract(text)] == [expected]


def test_decomposed_umlauts_and_full_width_letters_match_the_corpus(tmp_path, capsys):
    import unicodedata

    laws = write(tmp_path / "laws.csv", "citation,text,title\n"
                 f"Art. 1 OR,\"{unicodedata.normalize('NFD', 'Die Kündigung des Mietverhältnisses bedarf der Schriftform.')}\",OR\n"
                 "Art. 2 OR,Der Kaufvertrag verpflichtet den Verkäufer.,OR\n")
    rc, _, err = cli(capsys, "build", "--laws", laws, "--out", tmp_path / "a")
    assert rc == 0, err
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    cfg = load_config(overrides={"runtime.progress": False, "count.k": 1, "graph.enabled": False})
    art = Artifacts.from_folder(tmp_path / "a", cfg)
    for q in ("Kündigung Mietverhältnis", unicodedata.normalize("NFD", "Kündigung Mietverhältnis"), "Ｋündigung"):
        assert run_pipeline([Query("q", q)], art, cfg).predictions["q"] == ["Art. 1 OR"], q


def test_a_queries_file_in_decomposed_unicode_loads_normalised(tmp_path):
    import unicodedata

    from lexrag.queries import load_queries

    q = write(tmp_path / "q.csv", unicodedata.normalize("NFD", "query_id,query\nq1,Kündigung nach Art.\u200b337 OR\n"))
    assert load_queries(q)[0].text == "Kündigung nach Art.337 OR"


# ---------------------------------------------------------------- 8. evaluate and the validator


def _sub(tmp_path, body: str) -> Path:
    return write(tmp_path / "s.csv", "query_id,predicted_citations\n" + body)


def test_evaluate_refuses_duplicate_rows_naming_both_lines(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", QUERIES)
    rc, _, err = cli(capsys, "evaluate", "--gold", gold, "--pred", _sub(tmp_path, "q1,Art. 41 Abs. 1 OR\nq1,Art. 1 OR\n"))
    assert rc == 2 and "line 3: query 'q1' appears again (first on line 2)" in err


def test_evaluate_refuses_a_malformed_row_naming_it(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", QUERIES)
    rc, _, err = cli(capsys, "evaluate", "--gold", gold, "--pred", _sub(tmp_path, "q1,Art. 41 Abs. 1 OR,extra\nq2,\n"))
    assert rc == 2 and "line 2: expected 2 fields, got 3" in err


def test_evaluate_refuses_a_header_only_gold_file(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", "query_id,query,gold_citations\n")
    rc, _, err = cli(capsys, "evaluate", "--gold", gold, "--pred", _sub(tmp_path, "q1,\n"))
    assert rc == 2 and "no rows with gold citations" in err


def test_padded_query_ids_are_named(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", QUERIES)
    sub = _sub(tmp_path, " q1,Art. 41 Abs. 1 OR\nq2,\nq3,\nq4,\n")
    rc, _, err = cli(capsys, "evaluate", "--gold", gold, "--pred", sub)
    assert rc == 2 and "has spaces around it" in err
    rc, out, _ = cli(capsys, "validate-submission", sub, "--queries", gold)
    assert rc == 1 and "' q1' has spaces around it" in out


def test_trailing_blank_lines_in_a_submission_are_accepted(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", QUERIES)
    sub = _sub(tmp_path, "q1,Art. 41 Abs. 1 OR\nq2,\nq3,\nq4,\n\n\n")
    assert cli(capsys, "validate-submission", sub, "--queries", gold)[0] == 0
    assert cli(capsys, "evaluate", "--gold", gold, "--pred", sub)[0] == 0


def test_evaluate_piped_into_head_ends_quietly(tmp_path):
    gold = write(tmp_path / "g.csv", QUERIES)
    sub = _sub(tmp_path, "q1,Art. 41 Abs. 1 OR\nq2,\nq3,\nq4,\n")
    r = subprocess.run(f"{sys.executable} -m lexrag evaluate --gold {gold} --pred {sub} | head -1", shell=True,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


# ---------------------------------------------------------------- 9. killed builds


def _artifact_hashes(folder: Path) -> dict:
    out = {}
    for name in ("corpus", "bm25", "graph"):
        doc = json.loads((folder / name / "params.json").read_text())
        out[name] = {k: v["sha256"] for k, v in doc["files"].items() if k != "build_report.json"}
    return out


# A child that stops at a named point of its work and waits there to be killed: the test kills on
# that event (a marker file the child writes), never after a measured time, so a busy or a fast
# machine kills at the same point.
PAUSE_AT = """
import os, sys, time
from pathlib import Path

def pause(marker):
    Path(marker).write_text("paused", encoding="utf-8")
    while True:  # killed here by the test
        time.sleep(1)
"""


def _wait_for(marker: Path, proc: subprocess.Popen) -> None:
    """Until the child wrote ``marker`` (it then waits to be killed); a child that ends first fails the test."""
    import time

    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the child ended (exit {proc.returncode}) before reaching {marker.name}")
        time.sleep(0.01)


@pytest.mark.slow
def test_a_build_killed_at_any_point_leaves_the_old_artifacts_and_a_rebuild_is_identical(tmp_path, tiny_inputs):
    import signal

    # a tiny corpus (seven laws, three court considerations citing them: the graph has edges) is
    # enough: each kill happens on an event at a named point of the build, not after a time
    laws, courts = tiny_inputs
    args = ["-q", "build", "--laws", str(laws), "--courts", str(courts), "--set", "runtime.progress=false"]
    ref = tmp_path / "ref"
    assert subprocess.run([sys.executable, "-m", "lexrag", *args, "--out", str(ref)], capture_output=True).returncode == 0
    target = tmp_path / "out"
    shutil.copytree(ref, target)  # artifacts already there, then a rebuild that is killed
    (target / "marker.txt").write_text("kept")
    before = tree_state(target)
    script = tmp_path / "paused_build.py"
    script.write_text(PAUSE_AT + (
        "import lexrag.index.corpus as B  # the corpus build step calls build_corpus from here\n"
        "point, marker = sys.argv[1], sys.argv[2]\n"
        "real_corpus = B.build_corpus\n"
        "def corpus(folder, *a, **k):\n"
        "    if point == 'corpus':  # the staging folder made, the corpus half written\n"
        "        Path(folder).mkdir(parents=True, exist_ok=True); (Path(folder) / 'part.parquet').write_bytes(b'x')\n"
        "        pause(marker)\n"
        "    return real_corpus(folder, *a, **k)\n"
        "def paused(name, real):  # an index's registry build step, paused once the artifacts before it are built\n"
        "    def step(*a, **k):\n"
        "        if name == point:\n"
        "            pause(marker)\n"
        "        return real(*a, **k)\n"
        "    return step\n"
        "B.build_corpus = corpus\n"
        "import dataclasses\n"
        "import lexrag.pipeline\n"
        "from lexrag import registry\n"
        "for i, a in enumerate(registry.ARTIFACTS):\n"
        "    if a.name in ('bm25', 'graph'):\n"
        "        registry.ARTIFACTS[i] = dataclasses.replace(a, build=paused(a.name, a.build))\n"
        "from lexrag.cli import main\n"
        "sys.exit(main(sys.argv[3:]))\n"), encoding="utf-8")
    for point in ("corpus", "bm25", "graph"):
        marker = tmp_path / f"paused-{point}"
        p = subprocess.Popen([sys.executable, str(script), point, str(marker), *args, "--out", str(target)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(marker, p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert {k: v for k, v in tree_state(target).items() if not k.startswith(".")} == before, point
    assert subprocess.run([sys.executable, "-m", "lexrag", *args, "--out", str(target)], capture_output=True).returncode == 0
    assert _artifact_hashes(target) == _artifact_hashes(ref)
    assert not [p for p in target.iterdir() if p.name.startswith(".")]  # the killed builds' staging folders are gone


@pytest.mark.slow
def test_an_embeddings_build_killed_mid_way_resumes_to_the_same_shards(tmp_path, tiny_inputs):
    import signal

    from lexrag.config import load_config
    from lexrag.index.corpus import build_corpus
    from lexrag.testing import make_tiny_encoder

    enc = make_tiny_encoder(tmp_path / "enc")
    corpus = tmp_path / "corpus"  # ten documents in shards of two: the kill falls between shards 2 and 3 of 5
    build_corpus(corpus, *tiny_inputs, load_config().corpus, progress=False)
    script = tmp_path / "emb.py"
    # with a pause point (argv 2, 3): the build stops after that many shards are published, and
    # while the next one is half written (its temporary file on disk), and waits to be killed
    script.write_text(PAUSE_AT + (
        "import types\n"
        "import lexrag.index.embeddings as S\n"
        "from lexrag.index.corpus import Corpus\n"
        "from lexrag.index.embeddings import build_embeddings\n"
        "if len(sys.argv) > 3:\n"
        "    after, marker, done = int(sys.argv[2]), sys.argv[3], []\n"
        "    proxy = types.ModuleType('os')\n"
        "    proxy.__dict__.update(os.__dict__)\n"
        "    def replace(src, dst):\n"
        "        if len(done) == after:\n"
        "            pause(marker)\n"
        "        os.replace(src, dst)\n"
        "        done.append(dst)\n"
        "    proxy.replace = replace\n"
        "    S.os = proxy\n"
        f"c = Corpus({str(corpus)!r})\n"
        f"ok = build_embeddings(c, {str(enc)!r}, sys.argv[1], corpus_id='tiny', shard_size=2, fields=['text'], "
        "device='cpu', max_seq=32, batch_size=64)\n"
        "sys.exit(0 if ok else 3)\n"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    assert subprocess.run([sys.executable, str(script), str(tmp_path / "ref")], env=env, capture_output=True).returncode == 0
    out, marker = tmp_path / "out", tmp_path / "paused"
    p = subprocess.Popen([sys.executable, str(script), str(out), "2", str(marker)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(marker, p)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (out / "params.json").exists()  # a killed build is never mistaken for a finished one
    assert len(list(out.glob("shard_*[0-9].npy"))) == 2 and len(list(out.glob("shard_*.tmp.npy"))) == 1
    from lexrag.errors import ArtifactError
    from lexrag.index.corpus import Corpus
    from lexrag.index.embeddings import Embeddings

    with pytest.raises(ArtifactError, match="did not finish"):
        Embeddings(out, len(Corpus(corpus)))
    assert subprocess.run([sys.executable, str(script), str(out)], env=env, capture_output=True).returncode == 0
    ref = json.loads((tmp_path / "ref" / "params.json").read_text())["files"]
    got = json.loads((out / "params.json").read_text())["files"]
    shards = {k: v for k, v in ref.items() if k.startswith("shard_")}
    assert len(Corpus(corpus)) == 10 and len(shards) == 5 and {k: got[k] for k in shards} == shards


def test_publishing_a_build_set_is_all_or_nothing(tmp_path, arts, monkeypatch):
    import lexrag.artifacts as A
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts

    laws = write(tmp_path / "laws.csv", "\n".join((DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()[:2001]) + "\n")
    before = tree_state(arts)
    real = os.replace

    def failing(src, dst):
        if Path(dst).name == "corpus" and ".building-" in str(src):  # the last folder of the set moved in (sorted)
            raise PermissionError(f"[Errno 13] Permission denied: {dst!r} (simulated)")
        return real(src, dst)

    monkeypatch.setattr(A.os, "replace", failing)
    with pytest.raises(PermissionError):
        build_artifacts(load_config(overrides={"runtime.progress": False}), laws, arts)
    assert tree_state(arts) == before  # corpus and BM25 were moved back: the old set stays whole
    assert not [p for p in arts.iterdir() if p.name.startswith(".")]


def test_a_fresh_build_is_not_hashed_again_on_its_first_load(tmp_path, monkeypatch):
    import lexrag.artifacts as A
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts

    laws = write(tmp_path / "laws.csv", "\n".join((DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()[:501]) + "\n")
    cfg = load_config(overrides={"runtime.progress": False})
    build_artifacts(cfg, laws, tmp_path / "a")
    calls = []
    real = A.sha256_file
    monkeypatch.setattr(A, "sha256_file", lambda p, *a: calls.append(p) or real(p, *a))
    Artifacts.from_folder(tmp_path / "a", cfg)
    assert calls == []  # the hashes taken while building survive the rename that published it


# ---------------------------------------------------------------- 8. wrong files, encodings and outputs (bad-input sweep)


@pytest.mark.parametrize("text,expected", [
    ("count:\n  k: 3\ncount:\n  k: 5\n", "not valid YAML: line 3, column 1: key 'count' appears twice (lines 1 and 3)"),
    (b"# Schl\xfcssel\ncount:\n  k: 3\n", "not UTF-8 text (byte 6); save it as UTF-8"),
    ("count:\n  k: [3\n", "not valid YAML: line 3, column 1: expected ','"),
])
def test_a_bad_config_file_is_one_line_naming_it(tmp_path, capsys, text, expected):
    cfg = write(tmp_path / "c.yaml", text)
    rc, _, err = cli(capsys, "config", "--config", cfg)
    assert rc == 2 and f"{cfg}: {expected}" in err and len(err.strip().splitlines()) == 1, err


def test_a_folder_for_a_file_and_a_section_overridden_then_its_field_are_named(tmp_path, capsys):
    rc, _, err = cli(capsys, "config", "--config", tmp_path)
    assert rc == 2 and "is a folder; give a YAML file" in err
    rc, _, err = cli(capsys, "config", "--set", "count=5", "--set", "count.k=3")
    assert rc == 2 and "an earlier override set count to 5" in err


@pytest.mark.parametrize("case,expected", [
    ("utf16", "UTF-16/UTF-32 or binary, not UTF-8 text (a byte-order mark or NUL bytes between the letters); save it as UTF-8"),
    ("folder", "is a folder; give the CSV file itself"),
    ("header twice", "line 1: column(s) query appear more than once"),
    ("header only", "no rows below the header; nothing to answer"),
    ("control character", "line 3: query_id 'q2\\x00' holds a control character"),
])
def test_a_queries_file_that_cannot_be_read_as_meant_is_named_and_nothing_is_written(tmp_path, arts, capsys, case, expected):
    q = tmp_path / "q.csv"
    if case == "utf16":
        write(q, QUERIES.encode("utf-16"))
    elif case == "folder":
        q.mkdir()
    elif case == "header twice":  # the second "query" column would silently be read as the question
        write(q, QUERIES.replace("query_id,query,gold_citations", "query_id,query,query"))
    elif case == "header only":
        write(q, QUERIES.splitlines()[0] + "\n")
    else:
        write(q, QUERIES.replace("q2,", "q2\x00,"))
    out = tmp_path / "sub.csv"
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out)
    assert rc == 2 and expected in err and not out.exists(), err


def test_outputs_where_a_file_stands_in_the_way_are_refused_before_any_work(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", q / "sub.csv")
    assert rc == 2 and f"the folder {q}: it is a file; give a folder" in err
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", q)
    assert rc == 2 and "is a file; give a folder" in err and q.read_text(encoding="utf-8") == QUERIES
    rc, _, err = cli(capsys, "calibrate", "--queries", q, "--artifacts", arts, "--out", q)
    assert rc == 2 and "is a file; give a folder" in err


def _laws_head(tmp_path, n: int = 60) -> Path:
    lines = (DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()[: n + 1]
    return write(tmp_path / "laws.csv", "\n".join(lines) + "\n")


def test_a_law_file_that_gives_no_document_is_an_error_naming_it_and_publishes_nothing(tmp_path, capsys):
    laws = write(tmp_path / "laws.csv", "text,citation,title\n" + "\n".join(
        ",".join(r.split(",")[:1][::-1] + ["x", "y"]) for r in _laws_head(tmp_path).read_text(encoding="utf-8").splitlines()[1:20]) + "\n")
    out = tmp_path / "art"
    rc, _, err = cli(capsys, "build", "--laws", laws, "--out", out)
    assert rc == 2 and f"no document in {laws}: laws.csv: 19 rows read, 19 malformed" in err and "line 2: not a law citation" in err
    assert not out.exists()  # no empty folder that looks like output
    courts = write(tmp_path / "courts.csv", "citation,text\nBGE 145 II 32 E. 3.1,Die Beschwerde ist innert 30 Tagen einzureichen.\n")
    rc, _, err = cli(capsys, "build", "--laws", laws, "--courts", courts, "--out", out)
    assert rc == 2 and f"{laws}: no usable law row: all 19 rows rejected" in err  # a wrong laws file, even beside courts
    header_only = write(tmp_path / "header.csv", "citation,text,title\n")
    rc, _, err = cli(capsys, "build", "--laws", header_only, "--courts", courts, "--out", out)
    assert rc == 0, err  # a court-only corpus: a laws file with its header alone (scripts/bench_bm25.py builds one)
    laws_utf16 = write(tmp_path / "l16.csv", _laws_head(tmp_path).read_bytes().decode("utf-8").encode("utf-16"))
    rc, _, err = cli(capsys, "build", "--laws", laws_utf16, "--out", out)
    assert rc == 2 and "UTF-16/UTF-32 or binary" in err and "nothing was built or changed" in err


def test_a_csv_given_as_the_law_keys_is_refused_not_read_as_keys(tmp_path, capsys):
    laws = _laws_head(tmp_path)
    keys = write(tmp_path / "keys.csv", "\n".join(laws.read_text(encoding="utf-8").splitlines()[1:30]) + "\n")
    rc, _, err = cli(capsys, "build", "--laws", laws, "--law-keys", keys, "--out", tmp_path / "art")
    assert rc == 2 and f"{keys}: none of its 29 rows is a law citation key" in err and "a comma or quote: a CSV row?" in err


def test_law_keys_in_cp1252_are_read_and_counted(tmp_path, capsys):
    laws = _laws_head(tmp_path)
    keys = write(tmp_path / "keys.txt", "Art. 1 Abs. 1 OR\nArt. 9 Abs. 1 R\xe4tV\n".encode("cp1252"))
    rc, _, err = cli(capsys, "build", "--laws", laws, "--law-keys", keys, "--out", tmp_path / "art")
    assert rc == 0, err
    report = json.loads((tmp_path / "art" / "corpus" / "build_report.json").read_text(encoding="utf-8"))
    keys_report = report["files"][1]
    assert keys_report["encoding_repaired"] == 1 and keys_report["written"] == 1
    from lexrag.index.corpus import Corpus

    assert "Art. 9 Abs. 1 RätV" in Corpus(tmp_path / "art" / "corpus").citations


def test_dropped_law_rows_are_a_warning_naming_their_lines_even_when_quiet(tmp_path, capsys, caplog):
    lines = _laws_head(tmp_path).read_text(encoding="utf-8").splitlines()
    lines[10] += ",extra"
    laws = write(tmp_path / "laws.csv", "\n".join(lines) + "\n")
    with caplog.at_level("WARNING", logger="lexrag"):
        rc, out, _ = cli(capsys, "-q", "build", "--laws", laws, "--out", tmp_path / "art")
    assert rc == 0 and "artifacts written" in out
    text = caplog.text
    assert "1 malformed dropped" in text and "every one is listed in build_report.json" in text
    assert "line 11: malformed: expected 3 fields, got 4" in text


@pytest.mark.parametrize("text,expected", [
    ("{bad", "metrics .*m.json: not valid JSON"),
    ('{"x": 1}', 'no "metrics" object'),
    ("[1, 2]", 'expected a JSON object with a "metrics" object'),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_show_metrics_names_a_file_that_is_not_a_metrics_json(tmp_path, capsys, text, expected):
    m = write(tmp_path / "m.json", text)
    rc, _, err = cli(capsys, "show-metrics", m)
    assert rc == 2 and re.search(expected, err) and len(err.strip().splitlines()) == 1, err


def test_evaluate_warns_of_prediction_rows_it_does_not_score(tmp_path, capsys):
    gold = write(tmp_path / "g.csv", QUERIES)
    rc, out, err = cli(capsys, "evaluate", "--gold", gold, "--pred", _sub(tmp_path, "q1,Art. 41 Abs. 1 OR\nq2,\nq3,\nq4,\nq9,Art. 8 ZGB\n"))
    assert rc == 0 and "1 rows of" in err and "name no query with gold" in err and "'q9'" in err and "macro_f1" in out


def test_a_build_replaces_artifacts_and_unfinished_embeddings_but_not_other_folders(tmp_path):
    from lexrag.artifacts import ArtifactError
    from lexrag.io.publish import check_replaceable

    for name, files in (("empty", []), ("artifact", ["params.json", "x.npy"]),
                        ("embeddings under way", ["progress.json", "shard_00000.npy"]), ("only hidden", [".DS_Store"])):
        d = tmp_path / name
        d.mkdir()
        for f in files:
            (d / f).write_text("x", encoding="utf-8")
        check_replaceable(d)
    check_replaceable(tmp_path / "absent")
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ArtifactError, match="holds files but no params.json"):
        check_replaceable(other)
    with pytest.raises(ArtifactError, match="is a file"):
        check_replaceable(other / "notes.txt")
    (tmp_path / "repo" / ".git").mkdir(parents=True)  # hidden, but the user's: never deleted unasked
    with pytest.raises(ArtifactError, match="holds files but no params.json"):
        check_replaceable(tmp_path / "repo")


# ---------------------------------------------------------------- 10. the LLM cache, read-only and full disks


SCRIPTED = DEMO / "scripted_llm"


def llm_run(capsys, tmp_path, arts, cache, *extra, model=None):
    """``lexrag run`` of the demo's LLM config (``model``, default the scripted stand-in) over the LLM cache ``cache``."""
    q = tmp_path / "q.csv"
    if not q.exists():
        write(q, QUERIES)
    out = tmp_path / "s.csv"
    out.unlink(missing_ok=True)
    cache_arg = ["--set", f"llm.cache_dir={cache}"] if cache is not None else []
    return cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out, "--config", DEMO / "config_llm.yaml",
               "--set", f"llm.model={model or SCRIPTED}", *cache_arg, *extra) + (out,)


@pytest.fixture
def full_cache(tmp_path, arts, capsys) -> Path:
    """An LLM cache holding every answer of the LLM config on QUERIES (a live run filled it)."""
    cache = tmp_path / "cache"
    rc, _, err, _ = llm_run(capsys, tmp_path, arts, cache)
    assert rc == 0, err
    return cache


def _damaged_table_page(cache: Path) -> None:
    """Overwrite one leaf page of the answers table: the cache opens (its key index is whole) and
    the replay meets the damage at a lookup."""
    import sqlite3

    f = cache / "cache.sqlite"
    con = sqlite3.connect(f)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    pages = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name = 'generations' AND pagetype = 'leaf' ORDER BY pageno")]
    con.close()
    raw = bytearray(f.read_bytes())
    page = pages[len(pages) // 2]
    raw[(page - 1) * page_size: page * page_size] = b"\xff" * page_size
    f.write_bytes(bytes(raw))


def _other_schema(cache: Path) -> None:
    import sqlite3

    (cache / "cache.sqlite").unlink()
    con = sqlite3.connect(cache / "cache.sqlite")
    con.execute("CREATE TABLE generations (key TEXT PRIMARY KEY, output TEXT)")
    con.commit()
    con.close()


CACHE_DAMAGE = {
    "truncated": (lambda c: _damage_truncate(c / "cache.sqlite"), "not a readable LLM cache (database disk image is malformed"),
    "not a database": (lambda c: (c / "cache.sqlite").write_bytes(b"garbage" * 100), "not a readable LLM cache (file is not a database"),
    "damaged page met in a replay": (_damaged_table_page, "not a readable LLM cache (database disk image is malformed"),
    "other schema": (_other_schema, "not an LLM cache of this lexrag version (other schema: no such column: model"),
}


@pytest.mark.parametrize("mode", ["live", "replay"])
@pytest.mark.parametrize("case", sorted(CACHE_DAMAGE))
def test_a_damaged_llm_cache_is_one_line_naming_its_file(tmp_path, arts, capsys, full_cache, case, mode):
    damage, expected = CACHE_DAMAGE[case]
    damage(full_cache)
    rc, _, err, out = llm_run(capsys, tmp_path, arts, full_cache, "--set", f"llm.mode={mode}")
    assert rc == 2 and f"{full_cache / 'cache.sqlite'}: {expected}" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("case", ["file", "symlink to a file"])
def test_an_llm_cache_dir_that_is_a_file_is_named(tmp_path, arts, capsys, case):
    f = write(tmp_path / "notes.txt", "mine")
    cache = f if case == "file" else tmp_path / "link"
    if case != "file":
        cache.symlink_to(f)
    rc, _, err, _ = llm_run(capsys, tmp_path, arts, cache)
    assert rc == 2 and f"llm.cache_dir {cache}: it is a file; give a folder" in err and f.read_text() == "mine"


def test_an_llm_cache_locked_beyond_the_busy_timeout_is_one_line(tmp_path, arts, capsys, monkeypatch):
    import sqlite3

    import lexrag.llm.cache as C

    C.LLMCache(tmp_path / "cache").close()
    holder = sqlite3.connect(tmp_path / "cache" / "cache.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, and not letting go
    monkeypatch.setattr(C, "BUSY_TIMEOUT_S", 0.05)  # the wait is the same however long; only the test's duration shrinks
    try:
        rc, _, err, out = llm_run(capsys, tmp_path, arts, tmp_path / "cache")
    finally:
        holder.rollback()
        holder.close()
    assert rc == 2 and "cache.sqlite: locked by another process" in err and "its own llm.cache_dir" in err, err
    assert not out.exists()


def test_a_full_cache_on_a_read_only_folder_replays_and_the_run_writes_its_submission(tmp_path, arts, capsys, full_cache,
                                                                                       monkeypatch, caplog):
    import lexrag.llm.cache as C

    before = tree_state(full_cache)
    monkeypatch.setattr(C, "_writable", lambda folder: Path(folder).resolve() != full_cache.resolve())  # a read-only mount
    opened = []
    real_connect = C.sqlite3.connect
    monkeypatch.setattr(C.sqlite3, "connect", lambda target, *a, **k: opened.append(str(target)) or real_connect(target, *a, **k))
    with caplog.at_level("WARNING", logger="lexrag"):
        rc, _, err, out = llm_run(capsys, tmp_path, arts, full_cache)
    assert rc == 0, err
    assert out.is_file() and "is read-only: its answers are replayed" in caplog.text
    assert all("immutable=1" in t for t in opened if "cache.sqlite" in t)  # opened immutable: nothing is written
    assert tree_state(full_cache) == before


def test_a_run_keeps_its_answers_when_closing_the_cache_fails(tmp_path, arts, capsys, full_cache, monkeypatch, caplog):
    import sqlite3

    import lexrag.llm.cache as C

    def failing_close(self, tidy=True):
        raise sqlite3.OperationalError("attempt to write a readonly database (simulated wal_checkpoint)")

    monkeypatch.setattr(C.LLMCache, "close", failing_close)
    for policy in ("raise", "skip"):
        rc, _, err, out = llm_run(capsys, tmp_path, arts, full_cache, "--set", f"runtime.on_stage_error={policy}")
        assert rc == 0 and out.is_file(), err  # the finished answers are written; the failed cleanup is a warning
        out.unlink()
    assert "closing the LLM cache failed" in caplog.text


def test_a_read_only_cache_folder_without_a_cache_is_one_line(tmp_path, arts, capsys, monkeypatch):
    import lexrag.llm.cache as C

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(C, "_writable", lambda folder: False)
    rc, _, err, _ = llm_run(capsys, tmp_path, arts, tmp_path / "ro")
    assert rc == 2 and f"llm.cache_dir {tmp_path / 'ro'}: the folder is read-only and holds no cache" in err


def test_an_answer_with_a_lone_surrogate_is_stored_and_read_back(tmp_path):
    from lexrag.llm.cache import LLMCache

    c = LLMCache(tmp_path / "c")
    c.put("k", "m", "t", "h", {}, "Miete \ud800 und \udfff Kündigung", 1, 1, 0.1)
    assert c.get("k")["output"] == "Miete \ufffd und \ufffd Kündigung"
    c.close()


@pytest.mark.parametrize("depth", [1_500, 100_000])
def test_llm_json_nested_too_deeply_is_an_llm_output_error(depth):
    from lexrag.errors import LLMOutputError
    from lexrag.llm.rewrite import CONCEPT_SCHEMA, parse_json_object

    with pytest.raises(LLMOutputError, match="nested too deeply"):
        parse_json_object('{"legal_area": ' + "[" * depth + "]" * depth + "}", CONCEPT_SCHEMA)


def test_a_huge_llm_answer_without_spaces_is_cut_and_never_split_letter_by_letter(tmp_path, arts, capsys, monkeypatch, caplog):
    import lexrag.index.decompound as D

    script = tmp_path / "m" / "lexrag_scripted.json"
    write(script, json.dumps({"format": "lexrag-scripted-llm/1", "default_yes": 0.2,
                              "rules": [{"when": ["German"], "output": "Miet" + "a" * 1_000_000}]}))
    tried = []
    real = D.Decompounder._modifier
    monkeypatch.setattr(D.Decompounder, "_modifier", lambda self, w: tried.append(len(w)) or real(self, w))
    with caplog.at_level("WARNING", logger="lexrag"):
        rc, _, err, out = llm_run(capsys, tmp_path, arts, tmp_path / "cache", "--set", "llm.tasks=[translate,sparse]",
                                  "--set", "verify.enabled=false", "--set", "agent.enabled=false", model=script.parent)
    assert rc == 0 and out.is_file(), err
    assert "cut to llm.max_answer_chars=20000" in caplog.text
    assert max(tried, default=0) <= D.MAX_WORD  # no word longer than MAX_WORD is tried cut by cut
    assert D.Decompounder({"miete": 9, "vertrag": 9}, 4, 1).split("miet" + "a" * 100_000) == ()


# ---------------------------------------------------------------- 11. outputs that cannot be written


def _refuse_writes_in(monkeypatch, folder: Path, err: int):
    """The file system refuses new files in ``folder`` (a read-only mount, a full disk)."""
    import tempfile

    real = tempfile.mkstemp

    def mkstemp(*a, dir=None, **k):
        if dir is not None and Path(dir).resolve() == folder.resolve():
            raise OSError(err, os.strerror(err), str(dir))
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)  # the one module every writer's tempfile is


@pytest.mark.parametrize("command", ["run", "build", "calibrate"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path, arts, capsys, monkeypatch, command):
    import errno

    import lexrag.eval.calibrate
    import lexrag.pipeline
    import lexrag.pipeline.build

    ro = tmp_path / "ro"
    ro.mkdir()
    _refuse_writes_in(monkeypatch, ro, errno.EROFS)
    work = []
    for mod, name in ((lexrag.pipeline, "run_pipeline"), (lexrag.pipeline.build, "build_artifacts"), (lexrag.eval.calibrate, "calibrate")):
        monkeypatch.setattr(mod, name, lambda *a, **k: work.append(name))
    q = write(tmp_path / "q.csv", QUERIES)
    args = {"run": ["run", "--queries", q, "--artifacts", arts, "--out", ro / "s.csv"],
            "build": ["build", "--laws", DEMO / "laws_demo.csv", "--out", ro / "art"],
            "calibrate": ["calibrate", "--queries", q, "--artifacts", arts, "--out", ro / "cal"]}[command]
    rc, _, err = cli(capsys, *args)
    assert rc == 2 and f"nothing can be written in {ro} (Read-only file system)" in err and work == [], err


def test_a_full_disk_is_one_line_naming_the_output_and_the_old_files_stay(tmp_path, arts, capsys, monkeypatch):
    import errno

    import lexrag.eval.submission as S

    q = write(tmp_path / "q.csv", QUERIES)
    out = write(tmp_path / "s.csv", "old submission")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")  # a write that fails: the system names no file

    monkeypatch.setattr(S, "write_submission", full)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out)
    assert rc == 2 and f"--out {out}: the disk is full (No space left on device)" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "old submission"
    before = tree_state(arts)
    from lexrag.testing import swap_steps

    with swap_steps("bm25", build=lambda *a, **k: (_ for _ in ()).throw(
            OSError(errno.ENOSPC, "No space left on device", str(arts / "x.parquet")))):
        rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", arts, "--set", "runtime.progress=false")
    assert rc == 2 and f"{arts / 'x.parquet'}: the disk is full" in err and len(err.strip().splitlines()) == 1, err
    assert tree_state(arts) == before


# ---------------------------------------------------------------- 12. hostile config, model and artifact files


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh"))


def test_a_yaml_alias_bomb_is_refused_at_once_as_a_config_file_or_a_set_value(tmp_path, capsys):
    cfg = write(tmp_path / "bomb.yaml", BOMB + "llm:\n  tasks: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n")
    assert cfg.stat().st_size < 1024
    rc, _, err = cli(capsys, "config", "--config", cfg)
    assert rc == 2 and "its aliases expand it to more than 100,000 nodes" in err and len(err) < 400, err
    value = "[" + ", ".join(f"&{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefg", "bcdefgh")).replace(
        "&b [*a", "&a [x, x, x, x, x, x, x, x, x], &b [*a", 1) + "]"
    rc, _, err = cli(capsys, "config", "--set", f"llm.tasks={value}")
    assert rc == 2 and "its aliases expand it" in err and len(err) < 600, err


def test_a_shared_value_that_expands_too_far_is_refused_and_messages_cut_long_values():
    from lexrag.config import ConfigError, load_config

    x = ["translate"] * 10
    for _ in range(8):
        x = [x] * 10  # 10**9 items when expanded, a few hundred objects in memory
    with pytest.raises(ConfigError, match="expands to more than 10,000 items"):
        load_config(overrides={"llm": {"tasks": x}})
    with pytest.raises(ConfigError) as e:
        load_config(overrides={"llm": {"model": ["x" * 1_000_000]}})
    assert len(str(e.value)) < 300 and "llm.model: expected str, got list" in str(e.value)


@pytest.mark.parametrize("override,expected", [
    ("llm.replay_dirs=[[a, b]]", "llm.replay_dirs[0]: expected a str, got list ['a', 'b']"),
    ("llm.tasks=[translate, 3]", "llm.tasks[1]: expected a str, got int 3"),
    ("llm.tasks=[{a: 1}]", "llm.tasks[0]: expected a str, got dict {'a': 1}"),
    ("graph.resolutions=[1.0, x]", "graph.resolutions[1]: expected a number, got str 'x'"),
])
def test_list_elements_of_the_wrong_type_are_named(capsys, override, expected):
    rc, _, err = cli(capsys, "config", "--set", override)
    assert rc == 2 and expected in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("case", ["pickled weights", "chat template refused by the sandbox"])
def test_a_model_folder_refused_for_safety_is_a_one_line_model_load_error(tmp_path, tiny_llm, case):
    import torch

    from lexrag.errors import ModelLoadError
    from lexrag.models import load_causal_lm

    folder = tmp_path / "llm"
    shutil.copytree(tiny_llm, folder)
    if case == "pickled weights":
        class Payload:
            def __reduce__(self):
                return (os.system, (f"touch {tmp_path / 'ran'}",))

        (folder / "model.safetensors").unlink()
        torch.save({"x": Payload()}, folder / "pytorch_model.bin")
        with pytest.raises(ModelLoadError, match="weights are a pickle that torch's safe loader refuses") as e:
            load_causal_lm(folder, quantization="none", device="cpu")
    else:
        for f in folder.glob("chat_template*"):
            f.unlink()
        doc = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        doc["chat_template"] = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
        (folder / "tokenizer_config.json").write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(ModelLoadError, match="its chat template was refused \\(SecurityError") as e:
            load_causal_lm(folder, quantization="none", device="cpu")  # refused at load: one message is rendered then
    assert len(str(e.value).splitlines()) == 1 and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("entry", ["../../secret.txt", "ABSOLUTE", "corpus/../../secret.txt", "link.txt"])
def test_a_params_file_list_naming_a_file_outside_the_artifact_is_refused_unread(tmp_path, arts, capsys, monkeypatch, entry):
    import lexrag.artifacts as A

    secret = write(tmp_path / "secret.txt", "s" * 4321)
    if entry == "ABSOLUTE":
        entry = str(secret)
    if entry == "link.txt":
        (arts / "bm25" / "link.txt").symlink_to(secret)
    p = arts / "bm25" / "params.json"
    doc = json.loads(p.read_text())
    doc["files"][entry] = {"size": 4321, "sha256": A.sha256_file(secret)}
    p.write_text(json.dumps(doc))
    touched = []
    real = A.sha256_file
    monkeypatch.setattr(A, "sha256_file", lambda path, *a: touched.append(Path(path).name) or real(path, *a))
    rc, _, err = cli(capsys, "run", "--queries", write(tmp_path / "q.csv", QUERIES), "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and "which is not a file inside the artifact folder" in err and "4321" not in err, err
    assert "secret.txt" not in touched


def test_an_llm_cache_inside_an_artifact_folder_is_refused_and_a_rebuild_never_deletes_one(tmp_path, arts, capsys):
    rc, _, err, _ = llm_run(capsys, tmp_path, arts, arts / "corpus" / "llm_cache")
    assert rc == 2 and f"lies inside the artifact folder {arts / 'corpus'}" in err and not (arts / "corpus" / "llm_cache").exists()
    q = write(tmp_path / "q.csv", QUERIES)  # the artifacts found by the resolver, the working folder inside one of them
    rc, _, err = cli(capsys, "run", "--queries", q, "--out", tmp_path / "s.csv", "--config", DEMO / "config_llm.yaml",
                     "--set", f"llm.model={SCRIPTED}", "--set", f"paths.artifacts_dir={arts}",
                     "--set", f"paths.working_dir={arts / 'bm25'}")
    assert rc == 2 and f"lies inside the artifact folder {arts / 'bm25'}" in err, err
    import lexrag.llm.cache as C

    cache = arts / "bm25" / "llm_cache"  # written there by an older kit
    cache.mkdir()
    C.write_params(cache, C.ARTIFACT, "test", {}, files=False)
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", arts)
    assert rc == 2 and f"holds another artifact, {cache}" in err and (cache / "params.json").is_file()


# ---------------------------------------------------------------- 13. silently wrong, poor messages


def test_a_query_id_with_spaces_around_it_is_refused_not_trimmed(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES.replace("q2,", "q2 ,"))
    out = tmp_path / "s.csv"
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", out)
    assert rc == 2 and "line 3: query_id 'q2 ' has spaces around it" in err and not out.exists()
    sub = _sub(tmp_path, "q1,\nq2,\nq3,\nq4,\n")  # the trimmed ids: Kaggle would not match 'q2 '
    rc, out_text, err = cli(capsys, "validate-submission", sub, "--queries", q)
    assert rc == 2 and "OK" not in out_text and "has spaces around it" in err


def test_two_grid_flags_for_one_field_are_refused_not_overwritten(tmp_path, arts, capsys):
    rc, _, err = cli(capsys, "tune", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts,
                     "--grid", "count.k=3,5", "--grid", "count.k=10")
    assert rc == 2 and "--grid count.k is given twice" in err and "--grid count.k=3,5,10" in err


@pytest.mark.parametrize("device", ["/dev/null", "/dev/stdin"])
def test_a_device_given_as_the_queries_file_is_named_as_such(tmp_path, arts, capsys, device):
    rc, _, err = cli(capsys, "run", "--queries", device, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and f"{device}: not a regular file (a device, pipe or socket" in err and "file not found" not in err


def test_calibrating_on_gold_that_the_corpus_lacks_is_refused_and_keeps_the_calibration_there(tmp_path, arts, capsys):
    good = write(tmp_path / "ok.csv", (DEMO / "queries_demo.csv").read_text(encoding="utf-8"))
    rc, _, err = cli(capsys, "calibrate", "--queries", good, "--artifacts", arts, "--out", tmp_path / "cal")
    assert rc == 0, err
    before = (tmp_path / "cal" / "params.json").read_bytes()
    gold = write(tmp_path / "g.csv", "query_id,query,gold_citations\n"
                 "q1,Wer haftet für einen Schaden?,Art. 9999 XYZ\nq2,Welche Frist gilt?,Art. 8888 XYZ\n")
    rc, _, err = cli(capsys, "calibrate", "--queries", gold, "--artifacts", arts, "--out", tmp_path / "cal")
    assert rc == 2 and "none of its 2 gold citations is a citation of the corpus" in err and "nothing was written" in err
    assert (tmp_path / "cal" / "params.json").read_bytes() == before
    rc, _, err = cli(capsys, "tune", "--queries", gold, "--artifacts", arts, "--grid", "count.k=3,5", "--out", tmp_path / "t.yaml")
    assert rc == 2 and "none of its gold citations is a citation of the corpus" in err and not (tmp_path / "t.yaml").exists()
    one = write(tmp_path / "one.csv", "\n".join(good.read_text(encoding="utf-8").splitlines()[:2]) + "\n")
    rc, _, err = cli(capsys, "tune", "--queries", one, "--artifacts", arts, "--grid", "count.k=3,5", "--out", tmp_path / "t.yaml")
    assert rc == 2 and "1 question with gold citations; tune holds questions out" in err and not (tmp_path / "t.yaml").exists()


def test_a_benchmark_run_of_some_phases_reports_them_and_makes_the_json_folder(tmp_path):
    out = tmp_path / "new" / "b.jsonl"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "60", "--work", str(tmp_path / "w"),
                        "--phases", "corpus", "bm25", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "no summary table: it needs every phase" in r.stdout, r.stderr[-800:]
    assert json.loads(out.read_text(encoding="utf-8"))["bm25_build_s"] > 0 and "query_ms_median" not in out.read_text()


def test_an_alias_bomb_in_expected_scores_or_a_grid_value_is_refused_at_once(tmp_path, arts, capsys):
    metrics = write(tmp_path / "m.json", json.dumps({"metrics": {"macro_f1": 0.5}}))
    exp = write(tmp_path / "e.yaml", BOMB + "metrics: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n")
    rc, _, err = cli(capsys, "check-scores", metrics, "--expected", exp)
    assert rc == 2 and "its aliases expand it to more than 100,000 nodes" in err and len(err) < 400, err
    value = "[" + ", ".join(f"&{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefg", "bcdefgh")).replace(
        "&b [*a", "&a [x, x, x, x, x, x, x, x, x], &b [*a", 1) + "]"
    rc, _, err = cli(capsys, "tune", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--grid", f"llm.tasks={value}")
    assert rc == 2 and "its aliases expand it" in err, err


def test_disk_errors_are_one_line_naming_the_file_in_the_cli_and_the_notebooks():
    """The one helper the CLI and every notebook use for a disk that refuses a write."""
    import errno

    from lexrag.errors import disk_error

    full = OSError(errno.ENOSPC, "No space left on device", "/kaggle/working/bm25/data.npy")
    assert disk_error(full) == ("/kaggle/working/bm25/data.npy: the disk is full (No space left on device); free space or "
                                "write elsewhere (the files that were there are kept)")
    assert disk_error(OSError(errno.EROFS, "Read-only file system"), "out_dir x").startswith("out_dir x: the disk is read-only")
    assert disk_error(OSError(errno.ENOENT, "No such file or directory", "x")) is None  # not a disk refusal
    notebooks = sorted((ROOT / "notebooks").glob("*.py"))
    # each notebook through the helper, or the cell guard that calls it (errors.one_line_errors)
    assert all(re.search(r"\b(disk_error|one_line_errors)\(", p.read_text(encoding="utf-8")) for p in notebooks), notebooks


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_lines_that_read_like_rows_are_named_whatever_the_line_ends(tmp_path, eol):
    from lexrag.io.csvio import FileReport, read_csv_rows

    text = eol.join(["citation,text,title", "Art. 9 OR,z,t", '"Art. 1 OR","a', "Art. 2 OR,b,c", 'x",t', "Art. 3 OR,d,t", ""])
    report = FileReport("laws.csv")
    rows = list(read_csv_rows(write(tmp_path / "laws.csv", text), ("citation", "text"), report))
    assert [r["citation"] for _, r in rows] == ["Art. 9 OR", "Art. 1 OR", "Art. 3 OR"]
    assert (report.multiline, report.suspect) == (1, 1) and report.examples[0]["reason"].startswith("lines 3-5")


def test_a_write_that_fails_keeps_the_file_that_was_there(tmp_path, monkeypatch):
    """`tune --out`, metrics, reports and the manifest go through one writer: on a full disk (the
    write raises) the old file stays whole and no temporary file is left beside it."""
    import os

    from lexrag.io.outputs import replace_text

    out = tmp_path / "tuned.yaml"
    out.write_text("count:\n  k: 5\n", encoding="utf-8")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        replace_text(out, "count:\n  k: 3\n" * 2000)
    assert out.read_text(encoding="utf-8") == "count:\n  k: 5\n" and [p.name for p in tmp_path.iterdir()] == ["tuned.yaml"]
    monkeypatch.undo()
    replace_text(out, "count:\n  k: 3\n")
    assert out.read_text(encoding="utf-8") == "count:\n  k: 3\n"


def test_validation_outputs_inside_an_artifact_folder_are_refused(demo_artifacts, demo_queries, tmp_path):
    """As `lexrag run --out` does: outputs written into an artifact folder would go with its next build."""
    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    cfg = load_config(None, {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    for bad in (demo_artifacts / "bm25", demo_artifacts / "bm25" / "validation_out"):
        with pytest.raises(ConfigError, match="lies inside the artifact folder .*bm25") as e:
            validate_run(cfg, art, demo_queries, bad)
        assert "\n" not in str(e.value)
    assert not (demo_artifacts / "bm25" / "validation_out").exists()
    for bad in (demo_artifacts, demo_artifacts / "validation_out"):  # the artifacts folder itself, as `run --out` refuses it
        with pytest.raises(ConfigError, match="is or lies inside the artifacts folder .* the run reads"):
            validate_run(cfg, art, demo_queries, bad)
    assert not (demo_artifacts / "validation_out").exists() and not (demo_artifacts / "metrics.json").exists()
    validate_run(cfg, art, demo_queries, tmp_path / "ok")
    assert (tmp_path / "ok" / "metrics.json").is_file()


def test_two_validation_runs_into_one_out_dir_never_mix_their_outputs(demo_artifacts, demo_queries, tmp_path):
    """A run whose outputs are several files holds its out_dir until its process ends; a second run
    into it (another papermill run, another kernel) is refused in one line before any work, and runs
    once the first has ended."""
    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.validation import ablation_table, validate_run
    from lexrag.pipeline import Artifacts

    out = tmp_path / "shared_out"
    out.mkdir()
    (out / "metrics.json").write_text('{"first": "run"}')
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from lexrag.io.outputs import claim_folder; claim_folder(sys.argv[1], 'out_dir'); "
         "print('held', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "kernel_src")})
    try:
        assert holder.stdout.readline().strip() == "held"
        cfg = load_config(None, {"runtime.progress": False})
        art = Artifacts.from_folder(demo_artifacts, cfg)
        for call in (validate_run, ablation_table):
            with pytest.raises(ConfigError, match="another run writes its outputs there now") as e:
                call(cfg, art, demo_queries, out)
            assert "\n" not in str(e.value) and str(out) in str(e.value)
        assert sorted(p.name for p in out.iterdir()) == ["metrics.json"]
        assert (out / "metrics.json").read_text() == '{"first": "run"}'
    finally:
        holder.communicate("")
    validate_run(cfg, art, demo_queries, out)  # the first run has ended: the folder is free
    assert (out / "submission.csv").is_file() and "first" not in json.loads((out / "metrics.json").read_text())
    validate_run(cfg, art, demo_queries, out)  # this process holds it now: a second run of its own is no conflict


def test_a_params_json_without_its_file_list_is_refused_and_reads_nothing_outside(tmp_path, demo_artifacts):
    """Deleting `files` from params.json would switch every file check off: it is refused by name.
    An LLM cache (whose files are never listed) holding a link out of its folder is refused too."""
    import json
    import shutil

    from lexrag.artifacts import read_params
    from lexrag.errors import ArtifactError
    from lexrag.llm.cache import LLMCache

    bm25 = tmp_path / "bm25"
    shutil.copytree(demo_artifacts / "bm25", bm25)
    doc = json.loads((bm25 / "params.json").read_text(encoding="utf-8"))
    del doc["files"]
    (bm25 / "params.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="records no list of its files") as e:
        read_params(bm25, "bm25")
    assert "\n" not in str(e.value)
    secret = write(tmp_path / "secret.txt", "not yours")
    cache = tmp_path / "cache"
    LLMCache(cache).close()
    (cache / "cache.sqlite").unlink()
    (cache / "cache.sqlite").symlink_to(secret)
    with pytest.raises(ArtifactError, match="a link out of the artifact folder"):
        read_params(cache, "llm_cache")


@pytest.mark.parametrize("expected,message", [
    ("metrics: {}\n", "no expected metrics"),
    ("", "no expected metrics"),
    ("metrics:\n  macro_f1: {value: 0.3, tol: [1]}\n", "tol must be a finite number"),
    ("metrics:\n  macro_f1: {value: 0.3, tol: 0.1, direction: upwards}\n", "direction must be one of both, higher, lower"),
    ("metrics:\n  macro_f1: {value: true}\n", "needs {value: NUMBER"),
    ("metrics:\n  null: {value: 0.3}\n", "needs {value: NUMBER"),
    ("[" * 5000 + "]" * 5000, "nested too deeply|not valid YAML"),
])
def test_check_scores_refuses_an_expectations_file_that_checks_nothing_or_is_malformed(tmp_path, capsys, expected, message):
    m = write(tmp_path / "m.json", '{"metrics": {"macro_f1": 0.3}}')
    e = write(tmp_path / "e.yaml", expected)
    rc, _, err = cli(capsys, "check-scores", m, "--expected", e)
    assert rc == 2 and re.search(message, err) and len(err.strip().splitlines()) == 1, err


def test_metrics_and_expectations_that_are_fifos_are_refused_without_waiting(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "m.json")
    rc, _, err = cli(capsys, "show-metrics", tmp_path / "m.json")
    assert rc == 2 and "is a FIFO, not a file" in err
    m = write(tmp_path / "ok.json", '{"metrics": {"macro_f1": 0.3}}')
    os.mkfifo(tmp_path / "e.yaml")
    rc, _, err = cli(capsys, "check-scores", m, "--expected", tmp_path / "e.yaml")
    assert rc == 2 and "is a FIFO, not a file" in err


def test_a_build_never_deletes_files_its_artifact_did_not_write(tmp_path, capsys):
    """A user's notes inside an artifact folder, or a folder whose params.json only claims to be an
    artifact: the rebuild refuses to replace it, naming the files, and they stay."""
    out = tmp_path / "art"
    rc, _, _ = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", out)
    assert rc == 0
    notes = write(out / "bm25" / "NOTES.md", "mine")
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", out)
    assert rc == 2 and "holds 1 file(s) its build did not write (NOTES.md)" in err and notes.read_text() == "mine"
    notes.unlink()
    bare = tmp_path / "bare"
    write(bare / "corpus" / "params.json", '{"artifact": "corpus"}')
    precious = write(bare / "corpus" / "precious.txt", "keep me")
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--out", bare)
    assert rc == 2 and "precious.txt" in err and precious.read_text() == "keep me"


@pytest.mark.parametrize("metrics,expected,message", [
    ('{"metrics": {"macro_f1": Infinity}}', "metrics:\n  macro_f1: {value: 0.3, tol: 0.1}\n", "not a finite number"),
    ('{"metrics": {"macro_f1": 0.3}}', "metrics:\n  macro_f1: {value: 0.3, tol: .inf}\n", "tol must be a finite number"),
])
def test_check_scores_never_passes_on_infinities(tmp_path, capsys, metrics, expected, message):
    rc, _, err = cli(capsys, "check-scores", write(tmp_path / "m.json", metrics), "--expected", write(tmp_path / "e.yaml", expected))
    assert rc == 2 and message in err


@pytest.mark.parametrize("metrics,message", [('{"metrics": {}}', "is empty"),
                                             ('{"metrics": {"macro_f1": "high"}}', "'macro_f1' is 'high'")])
def test_show_metrics_refuses_empty_or_non_numeric_metrics(tmp_path, capsys, metrics, message):
    rc, _, err = cli(capsys, "show-metrics", write(tmp_path / "m.json", metrics))
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_bm25_index_over_another_corpus_is_refused_even_with_its_corpus_id_edited(tmp_path, demo_artifacts):
    import json
    import shutil

    from lexrag.artifacts import seal
    from lexrag.config import load_config
    from lexrag.errors import ArtifactError
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts

    cfg = load_config(None, {"runtime.progress": False})
    other = tmp_path / "other"
    laws = write(tmp_path / "laws.csv", "citation,text,title\nArt. 1 Abs. 1 OR,Der Vertrag.,OR\nArt. 2 Abs. 1 OR,Die Form.,OR\n")
    build_artifacts(cfg, laws, other)
    art = tmp_path / "art"
    shutil.copytree(demo_artifacts, art)
    shutil.rmtree(art / "bm25")
    shutil.copytree(other / "bm25", art / "bm25")
    p = art / "bm25" / "params.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    doc["corpus_id"] = json.loads((demo_artifacts / "bm25" / "params.json").read_text(encoding="utf-8"))["corpus_id"]
    p.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="bm25/params.json: edited after the build"):  # its own digest tells first
        Artifacts.from_folder(art, cfg)
    p.write_text(json.dumps(seal(doc)), encoding="utf-8")  # and with the digest written anew, the index's size still tells
    with pytest.raises(ArtifactError, match="covers 2 documents, the loaded corpus has"):
        Artifacts.from_folder(art, cfg)
    # the same size: the demo laws with their texts in reverse order, the corpus id edited to match
    import csv as _csv

    rows = list(_csv.reader(open(DEMO / "laws_demo.csv", encoding="utf-8", newline="")))
    texts = [r[1] for r in rows[1:]][::-1]
    with open(tmp_path / "shuffled.csv", "w", encoding="utf-8", newline="") as f:
        w = _csv.writer(f)
        w.writerow(rows[0])
        w.writerows([r[0], t, *r[2:]] for r, t in zip(rows[1:], texts))
    build_artifacts(cfg, tmp_path / "shuffled.csv", tmp_path / "same-size", courts=DEMO / "courts_demo.csv")
    shutil.rmtree(art / "bm25")
    shutil.copytree(tmp_path / "same-size" / "bm25", art / "bm25")
    doc = json.loads(p.read_text(encoding="utf-8"))
    doc["corpus_id"] = json.loads((demo_artifacts / "bm25" / "params.json").read_text(encoding="utf-8"))["corpus_id"]
    p.write_text(json.dumps(seal(doc)), encoding="utf-8")
    with pytest.raises(ArtifactError, match="built over other texts than this corpus"):
        Artifacts.from_folder(art, cfg)


def test_an_index_over_other_fields_than_the_text_loads_and_is_spot_checked_over_them(tmp_path):
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts

    cfg = load_config(None, {"runtime.progress": False, "lexical.fields": ["title"]})
    build_artifacts(cfg, DEMO / "laws_demo.csv", tmp_path / "a")  # once refused at load: "built over other texts"
    art = Artifacts.from_folder(tmp_path / "a", cfg)
    assert art.bm25.n_docs == len(art.corpus)
    titles = art.corpus.field_texts([0, len(art.corpus) - 1], ["title"])
    assert titles == [t for batch in art.corpus.iter_texts(fields=["title"]) for t in batch][:: len(art.corpus) - 1][:2]


def test_a_causal_lm_given_as_the_reranker_is_refused(tiny_llm):
    """It would load with a random score head and the status would say OK."""
    from lexrag.errors import ModelLoadError
    from lexrag.models import load_cross_encoder

    with pytest.raises(ModelLoadError, match="not a cross-encoder"):
        load_cross_encoder(tiny_llm, device="cpu")


def test_messages_name_what_the_input_is(tmp_path, capsys, demo_artifacts, demo_queries):
    """A gzipped laws file, a folder given as the submission, a replay folder that is no cache and a
    manifest that is a FIFO: each one line saying what it is and what to give."""
    import gzip
    import os

    from lexrag.config import load_config
    from lexrag.errors import ArtifactError
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    packed = tmp_path / "laws.csv"
    packed.write_bytes(gzip.compress((DEMO / "laws_demo.csv").read_bytes()))
    rc, _, err = cli(capsys, "build", "--laws", packed, "--out", tmp_path / "art")
    assert rc == 2 and "a gzip-compressed file, not a UTF-8 CSV; unpack it" in err
    rc, out, err = cli(capsys, "validate-submission", demo_artifacts, "--queries", demo_queries)
    assert rc != 0 and "is a folder; give the submission file itself" in out + err
    cfg = load_config(None, {"runtime.progress": False, "llm.enabled": True, "llm.mode": "replay", "llm.model": "m",
                             "llm.replay_dirs": [str(tmp_path / "no-such-cache")]})
    with pytest.raises(ArtifactError, match="llm.replay_dirs: .*no-such-cache is not an LLM cache folder"):
        run_pipeline([Query("q", "Frage")], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    os.mkfifo(tmp_path / "manifest.yaml")
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--manifest", str(tmp_path / "manifest.yaml"), "--check",
                        "--out", str(tmp_path / "ds")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "is a FIFO, not a file" in r.stdout + r.stderr


def test_a_loop_of_links_and_a_header_of_200000_columns_are_one_line(tmp_path, capsys, demo_artifacts):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    rc, _, err = cli(capsys, "run", "--artifacts", demo_artifacts, "--queries", tmp_path / "a", "--out", tmp_path / "s.csv")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "a loop of links" in err, err
    wide = write(tmp_path / "q.csv", ",".join(["id", "text"] + [f"c{i}" for i in range(200_000)]) + "\n")
    rc, _, err = cli(capsys, "run", "--artifacts", demo_artifacts, "--queries", wide, "--out", tmp_path / "s.csv")
    assert rc == 2 and "missing column(s) query_id" in err and "(200002 columns)" in err and len(err) < 1000


def test_an_out_that_is_a_link_a_fifo_or_a_folder_name_is_refused(tmp_path, capsys, demo_artifacts, demo_queries):
    import os

    target = write(tmp_path / "target.txt", "mine")
    (tmp_path / "link.csv").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.csv")
    for out, message in ((tmp_path / "link.csv", "is a link, a device or a FIFO"), (tmp_path / "fifo.csv", "is a link, a device or a FIFO"),
                         (f"{tmp_path / 'newdir'}/", "names a folder")):
        rc, _, err = cli(capsys, "run", "--artifacts", demo_artifacts, "--queries", demo_queries, "--out", out)
        assert rc == 2 and message in err, err
    assert target.read_text() == "mine" and (tmp_path / "link.csv").is_symlink() and not (tmp_path / "newdir").exists()
    old = write(tmp_path / "sub.csv", "old")
    os.chmod(old, 0o644)
    rc, _, _ = cli(capsys, "run", "--artifacts", demo_artifacts, "--queries", demo_queries, "--out", old)
    assert rc == 0 and oct(os.stat(old).st_mode & 0o777) == "0o644"  # the old file's mode, not a temporary file's 0o600


def test_a_json_key_given_twice_and_a_size_that_is_no_number_are_named(tmp_path, capsys, demo_artifacts):
    import json
    import shutil

    from lexrag.artifacts import read_params
    from lexrag.errors import ArtifactError

    m = write(tmp_path / "m.json", '{"metrics": {"macro_f1": 0.1}, "metrics": {"macro_f1": 0.9}}')
    rc, _, err = cli(capsys, "show-metrics", m)
    assert rc == 2 and "key 'metrics' appears twice" in err
    bm25 = tmp_path / "bm25"
    shutil.copytree(demo_artifacts / "bm25", bm25)
    doc = json.loads((bm25 / "params.json").read_text(encoding="utf-8"))
    first = next(iter(doc["files"]))
    size = doc["files"][first]["size"]
    for bad in (str(size), -1):  # a negative size was once blamed on a truncated file
        doc["files"][first]["size"] = bad
        (bm25 / "params.json").write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(ArtifactError, match="params.json: the entry of .* has no valid size and sha256"):
            read_params(bm25, "bm25")


def test_a_preset_written_as_a_path_and_a_folder_as_tune_out_get_the_right_hint(tmp_path, capsys, demo_artifacts, demo_queries):
    rc, _, err = cli(capsys, "config", "--config", "./kaggle")
    assert rc == 2 and "the preset 'kaggle' is named without a path: --config kaggle" in err
    rc, _, err = cli(capsys, "tune", "--queries", demo_queries, "--artifacts", demo_artifacts, "--grid", "count.k=3,5",
                     "--out", tmp_path)
    assert rc == 2 and "tuned.yaml" in err and "submission.csv" not in err


def test_a_submission_that_is_not_utf8_is_scored_as_read_with_a_warning_naming_its_lines(tmp_path, capsys, caplog, demo_queries):
    text = "query_id,predicted_citations\nq1,Art. 41 Abs. 1 OR\nq2,Art. 1 Abs. 1 ZGB;Ärt. 2 ZGB\n"
    pred = write(tmp_path / "pred.csv", text.encode("latin-1"))
    gold = write(tmp_path / "gold.csv", QUERIES)
    with caplog.at_level("WARNING"):
        rc, out, _ = cli(capsys, "evaluate", "--gold", gold, "--pred", pred)
    assert rc == 0 and "macro_f1" in out
    warned = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert warned and str(pred) in warned[0] and "lines 3" in warned[0] and "save the file as UTF-8" in warned[0]


def test_a_law_key_given_twice_with_other_text_keeps_both_and_is_named(tmp_path, caplog):
    from lexrag.config import Config
    from lexrag.index.corpus_build import build_corpus

    laws = write(tmp_path / "laws.csv", "citation,text,title\nArt. 1 OR,Erster Text,OR\nArt. 2 OR,Zweiter,OR\n"
                                        "Art. 1 OR,Anderer Text,OR\nArt. 2 OR,Zweiter,OR\n")
    with caplog.at_level("WARNING"):
        report = build_corpus(tmp_path / "corpus", laws, cfg=Config().corpus)
    f = report["files"][0]
    assert report["n_docs"] == 3 and f["same_key"] == 1 and f["duplicates"] == 1
    assert any(e["kind"] == "same_key" and e["line"] == 4 and "'Art. 1 OR'" in e["reason"] for e in f["examples"])
    assert any("1 citations given again with other text" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_training_gold_outside_the_corpus_is_a_warning_naming_the_file(tmp_path, capsys, caplog):
    train = write(tmp_path / "train.csv", QUERIES.replace("Art. 8 ZGB", "Art. 999 XYZ"))
    with caplog.at_level("WARNING"):
        rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--courts", DEMO / "courts_demo.csv",
                         "--train", train, "--out", tmp_path / "art")
    assert rc == 0, err
    warned = [r.getMessage() for r in caplog.records if "not citations of the corpus" in r.getMessage()]
    assert len(warned) == 1 and str(train) in warned[0] and "1 of 4 gold citations" in warned[0] and "'Art. 999 XYZ'" in warned[0]


def test_a_count_beyond_the_candidate_lists_is_one_note_in_the_status(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    rc, out, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv",
                       "--config", DEMO / "config.yaml", "--set", "count.k=250", "--set", "runtime.batch_size=2")
    assert rc == 0, err
    notes = [line for line in out.splitlines() if line.startswith("note: count.k=250")]
    assert len(notes) == 1 and "count.k=250: 4 queries have fewer distinct citations" in notes[0] and "lexical.top_k" in notes[0]
    rc, out, _ = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv", "--config", DEMO / "config.yaml")
    assert rc == 0 and "note: count.k" not in out


def test_a_missing_model_library_names_the_extra_to_install(tmp_path, monkeypatch):
    import importlib.util

    from lexrag.errors import ModelLoadError
    from lexrag.models import load_causal_lm, load_cross_encoder, load_encoder

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("sentence_transformers", "transformers")
                        else real(name, *a))
    for load, extra in ((load_encoder, "semantic"), (load_cross_encoder, "semantic"), (load_causal_lm, "llm")):
        with pytest.raises(ModelLoadError, match=rf"not installed: pip install 'lexrag\[{extra}\]'"):
            load(folder)


# ---------------------------------------------------------------- sweep 3: outputs that are not plain files, truthful status


def test_an_output_that_is_a_link_or_fifo_is_refused_not_replaced_or_blocked_on(tmp_path, demo_artifacts, demo_queries):
    from lexrag.io.outputs import replace_text
    from lexrag.config import load_config
    from lexrag.errors import OutputError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    target = write(tmp_path / "target.json", "{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(OutputError, match="is a link, a device or a FIFO"):
            replace_text(path, "{}")
    assert link.is_symlink() and target.read_text() == "{}" and stat_is_fifo(fifo)
    out = tmp_path / "val"
    out.mkdir()
    os.mkfifo(out / "per_query.csv")  # once the run hung opening it
    cfg = load_config(str(DEMO / "config.yaml"))
    with pytest.raises(OutputError, match="per_query.csv is a link, a device or a FIFO"):
        validate_run(cfg, Artifacts.from_folder(demo_artifacts, cfg), demo_queries, out)
    assert not (out / "submission.csv").exists()  # refused before the run


def stat_is_fifo(path: Path) -> bool:
    import stat

    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_build_datasets_keeps_a_manifest_link_and_refuses_an_empty_only(tmp_path):
    def build_datasets(*args):
        return subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), *map(str, args)], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)

    real = write(tmp_path / "real.yaml", (DEMO / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    link = tmp_path / "manifest.yaml"
    link.symlink_to(real)
    r = build_datasets("--manifest", link, "--laws", DEMO / "laws_demo.csv", "--no-courts", "--only", "corpus", "--out", tmp_path / "ds")
    assert r.returncode == 2 and link.is_symlink() and not (tmp_path / "ds").exists()
    assert "is a link, a device or a FIFO" in r.stderr and "Traceback" not in r.stderr
    r = build_datasets("--only", "", "--laws", DEMO / "laws_demo.csv", "--out", tmp_path / "ds2")
    assert r.returncode == 2 and "--only is empty" in r.stderr and not (tmp_path / "ds2").exists()
    r = build_datasets("--owner", "", "--laws", DEMO / "laws_demo.csv", "--out", tmp_path / "ds3")
    assert r.returncode == 2 and "--owner is empty" in r.stderr and not (tmp_path / "ds3").exists()


def test_the_quality_harness_gives_one_line_for_a_user_error(tmp_path, demo_artifacts):
    for extra, message in ((["--data", str(tmp_path / "none")], "error: "), (["--dev-areas", "-1"], "--dev-areas -1"),
                           (["--expected", str(tmp_path / "missing.yaml")], "missing.yaml")):
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--artifacts", str(demo_artifacts), *extra],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr and message in r.stderr, (extra, r.stderr[-800:])


def test_a_run_where_nothing_answers_is_failed_and_odd_settings_are_said(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    base = ["run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv", "--config", DEMO / "config.yaml"]
    rc, out, _ = cli(capsys, *base, "--set", "lexical.enabled=false", "--set", "seeds.enabled=false")
    assert rc == 1 and "\nFAILED: none of the 4 queries got a citation" in out and "note: count.k" not in out
    rc, _, err = cli(capsys, *base, "--set", "lexical.variants=[]")
    assert rc == 2 and "lexical.variants is empty" in err
    from lexrag.config import load_config

    zeros = [f"fusion.weights.{s}=0" for s in load_config(str(DEMO / "config.yaml")).fusion.weights]
    rc, out, _ = cli(capsys, *base, "--set", "fusion.default_weight=0", *[x for z in zeros for x in ("--set", z)])
    assert rc == 0 and "note: every signal that found documents" in out
    rc, out, _ = cli(capsys, *base, "--set", "count.method=adaptive")
    assert rc == 0 and "\nDEGRADED" in out and re.search(r"count +partial .*without calibration", out)


def test_check_scores_fails_a_run_that_was_not_ok(tmp_path, capsys):
    m = write(tmp_path / "metrics.json", json.dumps({"metrics": {"macro_f1": 0.5}, "status": {"status": "DEGRADED"}}))
    x = write(tmp_path / "x.yaml", "metrics:\n  macro_f1: {value: 0.5, tol: 0.01}\n")
    rc, out, _ = cli(capsys, "check-scores", m, "--expected", x)
    assert rc == 1 and "ended DEGRADED, not OK" in out
    rc, out, _ = cli(capsys, "show-metrics", m)
    assert rc == 0 and "DEGRADED:" in out


def test_tune_refuses_a_grid_over_what_the_index_fixes(tmp_path, demo_artifacts, demo_queries, capsys):
    rc, _, err = cli(capsys, "tune", "--queries", demo_queries, "--artifacts", demo_artifacts, "--grid", "lexical.k1=1.2,1.5",
                     "--out", tmp_path / "t.yaml")
    assert rc == 2 and "the BM25 index fixes this when it is built" in err and not (tmp_path / "t.yaml").exists()


def test_an_empty_file_list_and_offsets_that_do_not_rise_are_refused(tmp_path, arts, capsys):
    from lexrag.artifacts import write_params
    from lexrag.index.corpus import Corpus

    q = write(tmp_path / "q.csv", QUERIES)
    params = arts / "bm25" / "params.json"
    doc = json.loads(params.read_text(encoding="utf-8"))
    params.write_text(json.dumps({**doc, "files": {}}), encoding="utf-8")
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv")
    assert rc == 2 and "its list of files is empty" in err
    corpus = arts / "corpus"
    offsets = np.load(corpus / "text_offsets.npy")
    np.save(corpus / "text_offsets.npy", offsets[::-1].copy())
    cdoc = json.loads((corpus / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in cdoc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(corpus, cdoc["artifact"], cdoc["builder"], cdoc["params"], **extra)  # hashes re-recorded: only the check is left
    with pytest.raises(ArtifactErrorType(), match="the offsets do not start at 0 and rise"):
        Corpus(corpus).texts([0])


def ArtifactErrorType():
    from lexrag.errors import ArtifactError

    return ArtifactError


def test_config_fifo_missing_calibration_and_a_submission_inside_an_artifact_are_named(tmp_path, arts, capsys, monkeypatch):
    from lexrag.errors import ArtifactError
    from lexrag.kaggle.notebook import run_submission

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    rc, _, err = cli(capsys, "config", "--config", fifo)
    assert rc == 2 and "is not a regular file" in err and "not found" not in err
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv", "--set",
                     "count.method=adaptive", "--set", f"count.calibration={tmp_path / 'nocal'}")
    assert rc == 2 and "lexrag calibrate" in err
    with pytest.raises(ArtifactError, match="is or lies inside the artifact folder"):
        run_submission(str(DEMO / "config.yaml"), None, q, arts, arts / "corpus" / "submission.csv")


def test_validation_of_a_queries_file_without_gold_is_one_line_before_the_run(tmp_path, demo_artifacts):
    from lexrag.config import load_config
    from lexrag.errors import CsvInputError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    q = write(tmp_path / "q.csv", "query_id,query,gold_citations\nq1,Wer haftet?,\nq2,Was gilt?,\n")
    cfg = load_config(str(DEMO / "config.yaml"))
    with pytest.raises(CsvInputError, match="no query has gold citations .* run `python -m lexrag run` for predictions only"):
        validate_run(cfg, Artifacts.from_folder(demo_artifacts, cfg), q, tmp_path / "out")
    assert not (tmp_path / "out" / "submission.csv").exists()


# ---------------------------------------------------------------- sweep 4


def test_odd_spaces_in_citations_are_made_plain_at_build_and_named_in_a_submission(tmp_path, capsys):
    from lexrag.config import Config
    from lexrag.eval.submission import validate_submission
    from lexrag.index.corpus import Corpus
    from lexrag.index.corpus_build import build_corpus

    laws = write(tmp_path / "laws.csv", 'citation,text,title\nArt.\u00a041 Abs. 1 OR,Wer einem andern,OR\n"Art. 1\nOR",Verträge,OR\n')
    keys = write(tmp_path / "keys.txt", "\ufeffArt. 2 OR\nArt.  2 ISLK-V\n")
    report = build_corpus(tmp_path / "c", laws, law_keys=keys, cfg=Config().corpus)
    assert [f["citation_repaired"] for f in report["files"]] == [2, 0]  # the BOM of a file's first line is the file's
    cits = Corpus(tmp_path / "c").citations
    assert {"Art. 41 Abs. 1 OR", "Art. 1 OR", "Art. 2 OR", "Art.  2 ISLK-V"} <= set(cits)  # doubled plain spaces are kept
    sub = write(tmp_path / "s.csv", "query_id,predicted_citations\nq1,Art.\u00a041 Abs. 1 OR\n")
    problems = validate_submission(sub, ["q1"])
    assert len(problems) == 1 and "holds a no-break space" in problems[0]


def test_check_scores_reads_every_shape_of_a_failed_status_and_odd_settings_are_named(tmp_path, capsys):
    x = write(tmp_path / "x.yaml", "metrics:\n  macro_f1: {value: 0.5, tol: 0.01}\n")
    for status in ("FAILED", {"headline": "FAILED: x"}):
        m = write(tmp_path / "m.json", json.dumps({"metrics": {"macro_f1": 0.5}, "status": status}))
        rc, out, _ = cli(capsys, "check-scores", m, "--expected", x)
        assert rc == 1 and "ended FAILED" in out
    from lexrag.config import load_config

    assert load_config(None, {"runtime.time_budget_s": "1e-9"}).runtime.time_budget_s == 1e-9  # YAML 1.2 reads it a float
    r = subprocess.run([sys.executable, "-c", "import lexrag.index.bm25_kernel as k; print(k.BACKEND)"], capture_output=True,
                       text=True, env={**os.environ, "LEXRAG_BM25_BACKEND": "nunpy"}, timeout=120)
    assert r.returncode == 0 and "LEXRAG_BM25_BACKEND='nunpy' is neither numba nor numpy" in r.stderr


def test_quality_refuses_two_variants_of_one_name(tmp_path, demo_artifacts):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--artifacts", str(demo_artifacts), "--variants",
                        "a=lexical", "a=exam"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "the name 'a' is given twice" in r.stderr and "Traceback" not in r.stderr


def test_a_decompound_file_nested_too_deep_is_one_line_and_the_engine_bench_checks_its_arguments(tmp_path, arts, capsys):
    from lexrag.artifacts import write_params

    bm25 = arts / "bm25"
    if not (bm25 / "decompound.json").is_file():
        pytest.skip("this build has no decompounding lexicon")
    (bm25 / "decompound.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    doc = json.loads((bm25 / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(bm25, doc["artifact"], doc["builder"], doc["params"], **extra)  # hashes re-recorded
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv")
    assert rc == 2 and "decompound.json" in err and len(err.strip().splitlines()) == 1  # one line, no traceback
    for extra_args, message in ((["--threads", "0"], "--threads must be 1 or more"),
                                (["--queries", str(tmp_path / "none.csv")], "none.csv: not a file")):
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_engines.py"), "--work", str(tmp_path / "w"),
                            "--laws", str(DEMO / "laws_demo.csv"), *extra_args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and message in r.stderr and not (tmp_path / "w").exists()


def test_gold_citations_listed_with_commas_are_warned_about(tmp_path):
    from lexrag.queries import load_gold

    gold = write(tmp_path / "g.csv", "query_id,query,gold_citations\nq1,Frage,\"Art. 1 OR, Art. 2 OR\"\nq2,Frage,Art. 3 OR;Art. 4 OR\n")
    with pytest.warns(UserWarning, match=r"1 gold cell\(s\) look like citations listed with commas \(lines 2\)"):
        got = load_gold(gold)
    assert got == {"q1": ["Art. 1 OR, Art. 2 OR"], "q2": ["Art. 3 OR", "Art. 4 OR"]}  # read as written, not guessed


def test_a_test_csv_that_is_a_folder_a_vocabulary_that_repeats_ids_and_unknown_stages_are_named(tmp_path, arts, monkeypatch):
    from lexrag.config import load_config
    from lexrag.errors import ArtifactError, ConfigError, LexragError
    from lexrag.paths import resolve_paths
    from lexrag.config import notebook_stages

    (tmp_path / "inputs" / "competitions" / "legal-ir" / "test.csv").mkdir(parents=True)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path / "inputs"))
    with pytest.raises(LexragError, match="test.csv is a folder, not a file"):
        resolve_paths(load_config(None, {"paths.competition": "legal-ir"}).paths).input_file("test.csv")
    vocab = arts / "bm25" / "vocab.index.json"
    terms = json.loads(vocab.read_text(encoding="utf-8"))
    vocab.write_text(json.dumps({t: 0 for t in terms}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="term ids are not distinct columns"):
        _load_unverified(arts / "bm25")
    assert notebook_stages({"graph": "false"}) == {"graph.enabled": False}
    with pytest.raises(ConfigError, match="parameter stages: 'lexcial' is not a stage .* stages: agent, articles"):
        notebook_stages({"lexcial": False})


def _load_unverified(folder):
    """The BM25 index loaded with its file hashes re-recorded, so only the vocabulary check is left."""
    from lexrag.artifacts import write_params
    from lexrag.config import load_config
    from lexrag.index.lexical import BM25Index

    doc = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(folder, doc["artifact"], doc["builder"], doc["params"], **extra)
    return BM25Index.load(folder, load_config(str(DEMO / "config.yaml")).lexical)


def test_quality_asks_for_the_dictionary_before_building_and_refuses_one_it_would_not_read(tmp_path, demo_artifacts):
    script = str(ROOT / "scripts" / "quality.py")
    r = subprocess.run([sys.executable, script, "--data", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    # the data folder is empty: a build would have failed on the laws file, so the line shows it stopped before
    assert r.returncode == 2 and "pass --dictionary FILE" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, script, "--artifacts", str(demo_artifacts), "--dictionary", "x"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "--dictionary is read only when this script builds" in r.stderr


@pytest.mark.parametrize("name", ["submission.csv", "per_query.csv"])
def test_validation_never_writes_an_output_over_its_queries_or_config_file(tmp_path, demo_artifacts, demo_queries, name):
    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    cfg = load_config(None, {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    queries = tmp_path / name  # the queries file is one of the outputs' names in out_dir
    shutil.copyfile(demo_queries, queries)
    with pytest.raises(ConfigError, match=f"its {name} would overwrite queries .*{name}; write the outputs to another folder"):
        validate_run(cfg, art, queries, tmp_path)
    assert queries.read_bytes() == demo_queries.read_bytes()
    config = write(tmp_path / "c" / "metrics.json", "{}")
    with pytest.raises(ConfigError, match="its metrics.json would overwrite config_path"):
        validate_run(cfg, art, demo_queries, config.parent, inputs=[("config_path", config)])
    assert config.read_text() == "{}" and not (config.parent / "submission.csv").exists()


def test_a_stemmer_a_home_folder_and_a_document_count_that_cannot_be_are_named_in_one_line(arts):
    from lexrag.config import load_config
    from lexrag.errors import ArtifactError, ConfigError

    with pytest.raises(ConfigError, match="lexical.stemmer 'klingon' is not a Snowball stemmer; one of .*german"):
        load_config(None, {"lexical.stemmer": "klingon"})
    assert load_config(None, {"lexical.stemmer": ""}).lexical.stemmer == ""  # none is allowed
    with pytest.raises(ConfigError, match="llm.cache_dir '~nosuchuser_lexrag/x': there is no such user's home folder"):
        load_config(None, {"llm.cache_dir": "~nosuchuser_lexrag/x"})
    p = arts / "bm25" / "params.index.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    for bad in ("x", doc["num_docs"] + 1):
        p.write_text(json.dumps({**doc, "num_docs": bad}), encoding="utf-8")
        with pytest.raises(ArtifactError, match=f"num_docs {bad!r} in params.index.json is not the {doc['num_docs']} "
                                                "documents recorded at build") as e:
            _load_unverified(arts / "bm25")
        assert "\n" not in str(e.value)


def test_a_prior_from_no_gold_is_refused_and_a_laws_file_without_text_is_a_warning(tmp_path, capsys, caplog):
    train = write(tmp_path / "train.csv", "query_id,query,gold_citations\nq1,Frage eins?,\nq2,Frage zwei?,\n")
    out = tmp_path / "art"
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--train", train, "--out", out)
    assert rc == 2 and "train.csv: no question has gold citations (every gold_citations cell is empty)" in err
    assert not (out / "prior" / "params.json").exists()
    laws = write(tmp_path / "laws.csv", "citation,text,title\nArt. 1 OR,,Titel\nArt. 2 OR,  ,Titel\n")
    with caplog.at_level("WARNING"):
        rc, _, _ = cli(capsys, "build", "--laws", laws, "--no-courts", "--out", tmp_path / "a2")
    assert rc == 0 and "laws.csv: every one of its 2 documents has empty text" in caplog.text


def test_quality_checks_every_option_before_it_builds(tmp_path):
    """Each of these once failed only after a build of many minutes (or built the wrong thing)."""
    data = tmp_path / "data"
    data.mkdir()
    write(data / "laws_de.csv", (DEMO / "laws_demo.csv").read_text(encoding="utf-8"))
    lines = (DEMO / "queries_demo.csv").read_text(encoding="utf-8").splitlines()
    with_courses = "\n".join([lines[0] + ",course", *(f"{x},Kurs {i % 3}" for i, x in enumerate(lines[1:]))]) + "\n"
    write(data / "lexam_dev.csv", with_courses)
    write(data / "train_dev.csv", with_courses)
    write(data / "no_courses.csv", "\n".join(lines) + "\n")
    outside = write(tmp_path / "tune.csv", with_courses)
    base = [sys.executable, str(ROOT / "scripts" / "quality.py"), "--data", str(data), "--queries", "train_dev.csv",
            "--variants", "lexical;dictionary.enabled=false"]
    cases = [(["--courts", str(tmp_path / "missing.csv")], "--courts"),
             (["--tune-on", "nope.csv"], "--tune-on nope.csv: "),
             (["--queries", "val.csv"], "--queries val.csv: "),
             (["--variants", "lexical;dictionary.enabled=false;count.k=-3"], "variant 'lexical;dictionary.enabled=false;count.k=-3': "),
             (["--ablation", "nosuchpreset"], "--ablation and --variants both name the variants"),
             (["--config", str(tmp_path / "none.yaml")], "none.yaml"),
             (["--json", str(tmp_path)], "is a folder"),
             (["--json", str(data / "train_dev.csv")], "is the --queries train_dev.csv file"),  # once replaced by the metrics
             (["--json", str(data / "other.json")], "lies inside the --data folder"),
             (["--tune-on", str(outside), "--json", str(outside)], "is the --tune-on file"),  # given outside --data
             (["--queries", str(outside), "--json", str(outside)], f"is the --queries {outside} file"),
             (["--json", str(tmp_path / "newdir") + "/"], "names a folder; give a file name such as"),
             (["--tune-on", "no_courses.csv"], "no course column, so the questions cannot be grouped by legal area"),
             (["--by"], "--by is empty: give a path or a value"),
             (["--ablation", "exam"], "--ablation and --variants both name the variants"),
             (["--config", str(write(tmp_path / "c.yaml", "count:\n  k: 4\n")), "--json", str(tmp_path / "c.yaml")],
              "is the --config file: writing it would overwrite the input")]
    for extra, message in cases:
        argv = list(base)
        for opt in {"--queries", "--variants"} & set(extra):  # given in the case: the base's is left out (no option twice)
            i = argv.index(opt)
            del argv[i:i + 2]
        r = subprocess.run(argv + extra, capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr[-600:])
        assert "built artifacts" not in r.stderr


def test_build_datasets_on_a_full_disk_is_one_line_naming_the_folder(tmp_path, monkeypatch, capsys):
    import errno

    import importlib.util

    import lexrag.kaggle.datasets as datasets

    spec = importlib.util.spec_from_file_location("build_datasets", ROOT / "build_datasets.py")  # the script under test
    build_datasets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_datasets)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(datasets, "rebuild", full)
    rc = build_datasets.main(["--laws", str(DEMO / "laws_demo.csv"), "--only", "corpus", "--out", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert rc == 2 and f"error: a file under --out {tmp_path / 'ds'}: the disk is full" in err and "Traceback" not in err


@pytest.mark.parametrize("script,args,message", [
    ("bench_bm25.py", ["--sizes", "-5"], "--sizes -5: give document counts of 1 or more"),
    ("bench_bm25.py", ["--work", "{file}"], "not a folder"),
    ("bench_bm25.py", ["--json", "{fifo}"], "is a link, a device or a FIFO"),
    ("bench_bm25.py", ["--json", "{art}/bm25/b.jsonl"], "lies inside the artifact folder {art}/bm25"),
    ("bench_bm25.py", ["--sizes", "50", "--work", "{tmp}/w", "--phases", "query"],
     "each phase reads what the phases before it made"),
    ("bench_graph.py", ["--sizes", "0"], "--sizes 0: give document counts"),
    ("bench_graph.py", ["--set", "graph.nope=1"], "--set: unknown config key 'graph.nope'"),
    ("bench_dictionary.py", ["--dictionary", "{tmp}/none"], "--dictionary {tmp}/none: not a file"),
    ("bench_dictionary.py", ["--dictionary", str(DEMO / "dictionary_demo.txt"), "--queries", str(DEMO / "laws_demo.csv")],
     "laws_demo.csv"),
    ("bench_dictionary.py", ["--dictionary", str(DEMO / "dictionary_demo.txt"), "--queries", str(DEMO / "queries_demo.csv"),
                             "--artifacts", "{tmp}"],
     "--artifacts {tmp}: no bm25 there"),
    ("bench_walk.py", ["--artifacts", "{tmp}"], "no corpus/ there"),
    ("bench_semantic.py", ["faiss", "--n", "0"], "--n 0: give 1 or more"),
    ("bench_semantic.py", ["faiss", "--emb", "{tmp}"], "no params.json there"),
    ("bench_e5.py", ["--artifacts", "{tmp}"], "--artifacts {tmp}: no corpus there"),
    ("bench_llm.py", ["--hidden", "0"], "--hidden 0: give 1 or more"),
    ("bench_llm.py", ["--queries", "{tmp}/none.csv"], "--queries {tmp}/none.csv: not a file"),
    ("bench_ranker.py", ["--artifacts", "{tmp}", "--questions", "5"], "--artifacts {tmp}: no corpus there"),
    ("bench_ranker.py", ["--artifacts", "{art}", "--data", "{art}", "--json", "{tmp}"], "--json {tmp} is a folder"),
    ("bench_ranker.py", ["--artifacts", "{art}", "--data", "{art}", "--json", "{art}/lexam_dev.csv"],
     "--json {art}/lexam_dev.csv lies inside the --artifacts folder {art}, whose files this run reads"),
])
def test_a_benchmark_checks_its_options_before_any_phase(tmp_path, script, args, message):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    art = tmp_path / "art"
    (art / "corpus").mkdir(parents=True)
    write(art / "bm25" / "params.json", "{}")
    write(art / "lexam_dev.csv", "query_id,query,gold_citations\n")
    fill = {"tmp": tmp_path, "file": write(tmp_path / "f.txt", "x"), "fifo": fifo, "art": art}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *(a.format(**fill) for a in args)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and message.format(**fill) in r.stderr and "Traceback" not in r.stderr, r.stderr[-600:]


def test_a_damaged_hash_cache_costs_a_rehash_never_a_traceback_a_hang_or_a_refused_artifact(tmp_path, arts, monkeypatch):
    from lexrag.artifacts import read_params

    cache = tmp_path / "hc"
    cache.mkdir()
    monkeypatch.setenv("LEXRAG_CACHE_DIR", str(cache))
    read_params(arts / "corpus", "corpus")  # fills the cache
    good = json.loads((cache / "sha256.json").read_text(encoding="utf-8"))
    wrong = {k: [v[0], v[1], "0" * 64, v[3]] for k, v in good.items()}  # digests that disagree with the files
    for damaged in ("[1, 2]", json.dumps({k: 7 for k in good}), json.dumps(wrong)):
        (cache / "sha256.json").write_text(damaged, encoding="utf-8")
        read_params(arts / "corpus", "corpus")
    (cache / "sha256.json").unlink()
    os.mkfifo(cache / "sha256.json")  # once it blocked the run for ever
    r = subprocess.run([sys.executable, "-c", f"from lexrag.artifacts import read_params; read_params({str(arts / 'corpus')!r}, "
                        "'corpus'); print('ok')"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "LEXRAG_CACHE_DIR": str(cache)})
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-500:]
    inner = arts / "corpus" / "hc"  # once sha256.json landed in the artifact and blocked its rebuild
    monkeypatch.setenv("LEXRAG_CACHE_DIR", str(inner))
    with pytest.warns(UserWarning, match="is or lies inside the artifact folder .*corpus.*set LEXRAG_CACHE_DIR to a folder"):
        read_params(arts / "corpus", "corpus")
    assert not inner.exists()


def test_a_folder_or_fifo_where_an_artifact_file_belongs_and_a_malformed_file_entry_are_named_as_such(tmp_path, arts):
    from lexrag.artifacts import read_params
    from lexrag.errors import ArtifactError

    texts = arts / "corpus" / "texts.bin"
    texts.unlink()
    os.mkfifo(texts)
    with pytest.raises(ArtifactError, match="texts.bin: a FIFO, socket or device where artifact 'corpus' has a file"):
        read_params(arts / "corpus", "corpus")
    texts.unlink()
    texts.mkdir()
    with pytest.raises(ArtifactError, match="texts.bin: a folder where artifact 'corpus' has a file"):
        read_params(arts / "corpus", "corpus")
    params = arts / "bm25" / "params.json"
    doc = json.loads(params.read_text(encoding="utf-8"))
    doc["files"][next(iter(doc["files"]))] = [1, 2]
    params.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="has no valid size and sha256"):
        read_params(arts / "bm25", "bm25")


def test_an_empty_config_a_build_inside_an_artifact_an_unreadable_status_and_check_with_record_are_said(tmp_path, arts, capsys):
    with pytest.raises(SystemExit) as e:
        cli(capsys, "run", "--config", "", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert e.value.code == 2 and "--config is empty: give a path or a value" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli(capsys, "run", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--out", "")
    assert e.value.code == 2 and "--out is empty: give a path" in capsys.readouterr().err
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", arts / "corpus" / "sub")
    assert rc == 2 and "lies inside the artifact folder" in err and not (arts / "corpus" / "sub").exists()
    metrics = write(tmp_path / "m.json", json.dumps({"metrics": {"macro_f1": 0.5}, "status": ["FAILED"]}))
    expected = write(tmp_path / "e.yaml", "metrics:\n  macro_f1: {value: 0.5, tol: 0.01}\n")
    rc, out, _ = cli(capsys, "check-scores", metrics, "--expected", expected)
    assert rc == 1 and "ended UNREADABLE (a list where the run writes its status), not OK" in out
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--check", "--record", "--out", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "--record not read: --check builds nothing" in r.stderr


def test_validation_refuses_a_folder_among_its_outputs_and_says_what_gold_the_corpus_lacks(tmp_path, demo_artifacts,
                                                                                         demo_queries, caplog):
    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    with pytest.raises(ConfigError, match="the config is empty"):
        load_config("")
    (tmp_path / "truncated.yaml").write_text("# nothing left\n")  # well-formed YAML: accepted, but said
    with pytest.warns(UserWarning, match="truncated.yaml holds no settings"):
        assert load_config(tmp_path / "truncated.yaml").count.k == load_config(None).count.k
    cfg = load_config(None, {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    (tmp_path / "v" / "report.html").mkdir(parents=True)  # once a traceback after the whole run
    with pytest.raises(ConfigError, match="report.html there is a folder, where the run writes a file"):
        validate_run(cfg, art, demo_queries, tmp_path / "v")
    assert not (tmp_path / "v" / "metrics.json").exists()
    lines = demo_queries.read_text(encoding="utf-8").splitlines()
    head, first = lines[0], next(csv.reader([lines[1]]))
    first[-1] = first[-1] + ";Art. 999999 QQQ"  # gold_citations is the last column of the demo queries
    q = write(tmp_path / "q.csv", "\n".join([head, ",".join(f'"{c}"' for c in first), *lines[2:]]) + "\n")
    with caplog.at_level("WARNING", logger="lexrag"):
        validate_run(cfg, art, q, tmp_path / "w")
    assert "1 of" in caplog.text and "gold citations are not citations of the corpus (e.g. 'Art. 999999 QQQ')" in caplog.text
    assert json.loads((tmp_path / "w" / "metrics.json").read_text(encoding="utf-8"))["gold_outside_corpus"] == 1


def test_hidden_user_files_in_an_artifact_a_too_long_listed_name_and_outputs_inside_artifacts_are_refused(tmp_path, arts,
                                                                                                          capsys):
    from lexrag.artifacts import read_params
    from lexrag.io.publish import check_replaceable
    from lexrag.errors import ArtifactError

    notes = write(arts / "corpus" / ".notes.md", "mine")  # once deleted without a word by the next rebuild
    with pytest.raises(ArtifactError, match="holds 1 file\\(s\\) its build did not write \\(.notes.md\\)"):
        check_replaceable(arts / "corpus")
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--courts", DEMO / "courts_demo.csv", "--out", arts,
                     "--config", DEMO / "config.yaml")
    assert rc == 2 and ".notes.md" in err and notes.read_text() == "mine"
    (arts / "bm25" / ".git").mkdir()
    write(arts / "bm25" / ".git" / "HEAD", "ref")
    with pytest.raises(ArtifactError, match="did not write \\(.git/HEAD\\)"):
        check_replaceable(arts / "bm25")
    params = arts / "graph" / "params.json"
    doc = json.loads(params.read_text(encoding="utf-8"))
    doc["files"]["x" * 5000] = {"size": 1, "sha256": "0" * 64}
    params.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ArtifactError, match="which cannot be looked up \\(File name too long"):
        read_params(arts / "graph", "graph")
    rc, _, err = cli(capsys, "calibrate", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts,
                     "--out", arts / "corpus" / "cal")
    assert rc == 2 and "lies inside the artifact folder" in err and not (arts / "corpus" / "cal").exists()
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--laws", str(DEMO / "laws_demo.csv"), "--only",
                        "corpus", "--out", str(arts / "bm25" / "ds")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "lies inside the artifact folder" in r.stderr and not (arts / "bm25" / "ds").exists()


def test_a_build_notebook_refuses_a_plain_file_where_its_artifact_goes_before_building(arts):
    from lexrag.errors import ArtifactError
    from lexrag.kaggle.notebook import build_artifact

    shutil.rmtree(arts / "bm25")
    (arts / "bm25").write_text("my notes\n", encoding="utf-8")  # once refused only after the build, its staging left
    with pytest.raises(ArtifactError, match="bm25 is a file; the build would replace it"):
        build_artifact("bm25", None, {"runtime.progress": False}, arts)
    assert (arts / "bm25").read_text(encoding="utf-8") == "my notes\n"
    assert not [p.name for p in arts.iterdir() if p.name.startswith(".bm25")]


def test_an_llm_cache_in_an_artifacts_folder_itself_is_refused(tmp_path):
    from lexrag.errors import ArtifactError
    from lexrag.llm.cache import LLMCache

    write(tmp_path / "art" / "corpus" / "params.json", "{}")
    with pytest.raises(ArtifactError, match="holds artifact folders \\(corpus\\): it is an artifacts folder"):
        LLMCache(tmp_path / "art")
    assert not (tmp_path / "art" / "params.json").exists()  # once it made the root an artifact, refused by every build
    LLMCache(tmp_path / "art" / "llm_cache").close()


def test_a_build_says_which_artifact_the_config_asks_for_but_lacks_the_input_of(tmp_path, capsys):
    with pytest.warns(UserWarning, match="ranker.enabled is on, but ranker is not built: it is built from --train TRAIN.csv"):
        rc, _, _ = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", tmp_path / "a",
                       "--set", "ranker.enabled=true")
    assert rc == 0
    assert not (tmp_path / "a" / "ranker").exists()


def test_the_staging_folder_of_a_killed_build_not_yet_reaped_is_swept_by_the_next_build(tmp_path):
    import time

    from lexrag.io.publish import staged

    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; left unreaped, a zombie answers kill(0)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").is_file() and " Z " not in Path(f"/proc/{child.pid}/stat").read_text():
        if time.monotonic() > deadline:
            pytest.skip("the child did not become a zombie")
        time.sleep(0.05)
    left = tmp_path / f".art.building-{child.pid}-abc123"
    write(left / "part.bin", b"x" * 10)
    with staged(tmp_path / "art") as folder:
        write(folder / "params.json", "{}")
    child.wait()
    assert not left.exists() and (tmp_path / "art" / "params.json").is_file()


def test_a_corpus_whose_document_count_is_no_number_is_named_as_such(tmp_path, demo_artifacts):
    from lexrag.artifacts import seal
    from lexrag.errors import ArtifactError
    from lexrag.index.corpus import Corpus

    shutil.copytree(demo_artifacts / "corpus", tmp_path / "corpus")
    p = tmp_path / "corpus" / "params.json"
    doc = json.loads(p.read_text(encoding="utf-8"))
    p.write_text(json.dumps(seal({**doc, "n_docs": str(doc["n_docs"])})), encoding="utf-8")  # as a build that wrote it
    with pytest.raises(ArtifactError, match=f"n_docs '{doc['n_docs']}' is not a whole number .*rebuild it"):
        Corpus(tmp_path / "corpus")  # once: "params.json says 8530 docs, parquet has 8530"


def test_a_question_nothing_matches_is_named_in_a_status_note(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", "query_id,query\nq1,\U0001F642\U0001F642\nq2,Wer haftet für einen Schaden?\n")
    rc, out, _ = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 0 and "note: 1 query got no citation: nothing in the artifacts matched them" in out and ": q1" in out


def test_tune_says_when_its_grid_changes_nothing_or_a_point_lacks_the_calibration(tmp_path, arts, capsys):
    assert not (arts / "calibration").exists()
    with pytest.warns(UserWarning, match="every grid point scored the same on every one of the .* graph.top_k changes nothing"):
        rc, _, _ = cli(capsys, "tune", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--grid",
                       "graph.top_k=10,100", "--set", "graph.enabled=false")
    assert rc == 0
    with pytest.warns(UserWarning, match="count.method=adaptive weighs a calibration .* but none is loaded"):
        rc, _, _ = cli(capsys, "tune", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--grid",
                       "count.method=fixed,adaptive")
    assert rc == 0


def test_a_locked_manifest_is_refused_before_the_build_and_a_failed_write_names_the_file_asked_for(tmp_path, monkeypatch):
    import errno

    from lexrag.errors import disk_error
    from lexrag.io.outputs import replace_text

    manifest = write(tmp_path / "m.yaml", (ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    if subprocess.run(["chattr", "+i", str(manifest)], capture_output=True).returncode == 0:
        try:
            r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--laws", str(DEMO / "laws_demo.csv"),
                                "--no-courts", "--only", "corpus", "--out", str(tmp_path / "ds"), "--manifest", str(manifest),
                                "--record"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
            assert r.returncode == 2 and f"--manifest {manifest} exists and cannot be replaced" in r.stderr
            assert not (tmp_path / "ds").exists()  # refused before the build, not after it
        finally:
            subprocess.run(["chattr", "-i", str(manifest)], capture_output=True)

    def refuse(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted", src)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError) as e:
        replace_text(tmp_path / "out.yaml", "x: 1\n")
    line = disk_error(e.value)
    assert line.startswith(f"{tmp_path / 'out.yaml'}: not permitted") and "give this user access to it" in line
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.yaml")] == []


def test_a_replaced_folder_that_cannot_be_removed_is_said(tmp_path, monkeypatch):
    from lexrag.io import publish

    write(tmp_path / "art" / "params.json", "{}")  # an artifact folder a rebuild replaces
    real_rmtree = shutil.rmtree

    def stubborn(path, ignore_errors=False, **k):  # a file inside that cannot be deleted (immutable, another owner's)
        if ".art.old-" in str(path):
            return
        real_rmtree(path, ignore_errors=ignore_errors, **k)

    monkeypatch.setattr(publish.shutil, "rmtree", stubborn)
    with pytest.warns(UserWarning, match="the replaced folder .*could not be removed .*remove .* by hand"):
        with publish.staged(tmp_path / "art") as folder:
            write(folder / "params.json", "{}")
    assert (tmp_path / "art" / "params.json").is_file()
    monkeypatch.setattr("lexrag.io.outputs.pid_alive", lambda pid: False)  # the next build runs in another process
    with pytest.warns(UserWarning, match="is named like an earlier art a build set aside, but no journal says so: left alone"):
        with publish.staged(tmp_path / "art") as folder:
            write(folder / "params.json", "{}")


# ---------------------------------------------------------------- sweep 10: what a rebuild may delete, caches, long names


def test_a_rebuild_over_a_damaged_or_foreign_params_json_keeps_the_users_files(tmp_path, arts, capsys):
    base = ["build", "--laws", DEMO / "laws_demo.csv", "--courts", DEMO / "courts_demo.csv", "--out", arts,
            "--set", "runtime.progress=false"]
    write(arts / "bm25" / "params.json", "[1, 2]")  # damaged: it lists no files
    notes = write(arts / "bm25" / "NOTES.txt", "my notes")
    rc, _, err = cli(capsys, *base)
    assert rc == 2 and f"{arts / 'bm25'} holds 1 file(s) its build did not write (NOTES.txt)" in err, err
    assert notes.read_text() == "my notes"
    notes.unlink()
    write(arts / "graph" / "params.json", '{"artifact": "wheels"}')  # an artifact that lists no files, but not this one
    precious = write(arts / "graph" / "precious.txt", "precious")
    rc, _, err = cli(capsys, *base)
    assert rc == 2 and "(precious.txt)" in err and precious.read_text() == "precious"
    precious.unlink()
    rc, _, err = cli(capsys, *base)  # the damaged artifacts alone: their rebuild is for them
    assert rc == 0, err
    assert json.loads((arts / "bm25" / "params.json").read_text())["artifact"] == "bm25"


def test_the_hash_cache_sees_an_edit_whose_mtime_was_put_back(tmp_path, arts, monkeypatch):
    from lexrag.artifacts import read_params
    from lexrag.errors import ArtifactError

    monkeypatch.setenv("LEXRAG_CACHE_DIR", str(tmp_path / "hc"))
    doc = read_params(arts / "bm25", "bm25")  # hashes every file and caches the digests
    name = max(doc["files"], key=lambda n: doc["files"][n]["size"])
    f = arts / "bm25" / name
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size
    with open(f, "r+b") as out:
        out.write(data)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime put back (touch -r)
    with pytest.raises(ArtifactError, match="sha256 differs"):
        read_params(arts / "bm25", "bm25")


def test_a_live_llm_cache_whose_database_is_a_link_is_refused_and_nothing_outside_is_written(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    outside = write(tmp_path / "outside" / "target", "")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "cache.sqlite").symlink_to(outside)
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv",
                     "--config", DEMO / "config_llm.yaml", "--set", f"llm.model={DEMO / 'scripted_llm'}",
                     "--set", f"llm.cache_dir={cache}")
    assert rc == 2 and f"llm.cache_dir {cache}: its cache.sqlite is a link to {outside}" in err, err
    assert outside.stat().st_size == 0 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", "{long}"),
    ("run", "--artifacts", "{arts}", "--queries", "{long}.csv", "--out", "{tmp}/s.csv"),
    ("run", "--artifacts", "{arts}", "--queries", "{q}", "--out", "{long}.csv"),
    ("config", "--config", "{long}.yaml"),
    ("evaluate", "--gold", "{long}.csv", "--pred", "{q}"),
])
def test_a_path_with_a_name_too_long_is_one_line(tmp_path, arts, capsys, args):
    fill = {"long": str(tmp_path / ("x" * 300)), "arts": str(arts), "tmp": str(tmp_path), "q": str(write(tmp_path / "q.csv", QUERIES))}
    rc, _, err = cli(capsys, *(str(a).format(**fill) for a in args))
    assert rc == 2 and "a name in this path is longer than the file system allows" in err, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400


def test_build_datasets_and_a_benchmark_name_a_path_too_long_or_a_bad_set_value_in_one_line(tmp_path):
    long = tmp_path / ("x" * 300)
    for args in ([str(ROOT / "build_datasets.py"), "--laws", str(DEMO / "laws_demo.csv"), "--only", "corpus", "--out", str(long)],
                 [str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "50", "--phases", "corpus", "--work", str(long)],
                 [str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "50", "--work", str(tmp_path / "w"), "--set", "count.k=[1,"]):
        r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]
        assert "longer than the file system allows" in r.stderr or "the value is not YAML" in r.stderr


def test_a_file_of_blank_questions_fails_and_a_long_repeated_id_is_cut(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", "query_id,query\nq1,\nq2,  \n")
    rc, out, _ = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 1 and "FAILED: every one of the 2 queries is blank: nothing was asked" in out
    assert (tmp_path / "s.csv").read_text(encoding="utf-8").splitlines()[1:] == ["q1,", "q2,"]  # still a valid file
    long = "y" * 20_000
    q = write(tmp_path / "d.csv", f"query_id,query\n{long},a\n{long},b\n")
    rc, _, err = cli(capsys, "run", "--queries", q, "--artifacts", arts, "--out", tmp_path / "s.csv")
    assert rc == 2 and "repeats line 2" in err and len(err) < 300


def test_a_grid_value_listed_twice_a_manifest_size_not_a_number_and_a_bad_owner_are_named(tmp_path, arts, capsys):
    from lexrag.errors import ConfigError
    from lexrag.eval.tune import parse_grid

    with pytest.raises(ConfigError, match="lists 3 more than once; list each value once"):
        parse_grid(["count.k=3,5,3"])
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--laws", str(DEMO / "laws_demo.csv"), "--only", "corpus",
                        "--owner", "evil/../x y", "--out", str(tmp_path / "ds")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "is not a Kaggle user or organisation name" in r.stderr and not (tmp_path / "ds").exists()
    import yaml

    from lexrag.kaggle.manifest import check

    manifest = yaml.safe_load((DEMO / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    entry = next(a for a in manifest["artifacts"] if a["name"] == "corpus")
    entry["files"][0]["size"] = str(entry["files"][0]["size"])  # "822", as a hand edit may leave it
    m = write(tmp_path / "m.yaml", yaml.safe_dump(manifest))
    problems = check(m, arts, only=["corpus"])
    assert any("the manifest's size is '" in p and "not a whole number" in p for p in problems), problems


def test_an_artifact_folder_given_for_the_artifacts_folder_names_its_parent(tmp_path, arts, capsys):
    rc, _, err = cli(capsys, "run", "--queries", write(tmp_path / "q.csv", QUERIES), "--artifacts", arts / "corpus",
                     "--out", tmp_path / "s.csv")
    assert rc == 2 and f"{arts / 'corpus'} is itself an artifact folder" in err and f"the artifacts, {arts}" in err, err


def test_an_empty_law_keys_file_a_preset_shadowed_by_a_file_and_a_kaggle_root_that_is_a_file_are_said(tmp_path, capsys,
                                                                                                       monkeypatch):
    keys = write(tmp_path / "keys.txt", "")
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "build", "--laws", str(DEMO / "laws_demo.csv"), "--no-courts",
                        "--law-keys", str(keys), "--out", str(tmp_path / "art"), "--set", "runtime.progress=false"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"{keys}: the --law-keys file holds no rows" in r.stderr, r.stderr[-800:]
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "lexical", "count:\n  k: 7\n")
    from lexrag.config import load_config

    with pytest.warns(UserWarning, match="is read, not the preset 'lexical'"):
        assert load_config("lexical").count.k == 7
    from lexrag.errors import ConfigError
    from lexrag.paths import kaggle_input

    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(keys))
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        kaggle_input()


def test_a_check_that_mismatches_names_the_manifest_it_compared_with(tmp_path):
    out = tmp_path / "ds"
    shutil.copyfile(DEMO / "artifacts_manifest.yaml", tmp_path / "m.yaml")
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--manifest", str(tmp_path / "m.yaml"), "--record",
                        "--laws", str(DEMO / "laws_demo.csv"), "--no-courts", "--only", "corpus", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    shutil.copyfile(tmp_path / "m.yaml", out / "artifacts_manifest.yaml")
    # without --manifest the check reads the manifest the build of these datasets wrote
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--check", "--only", "corpus", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"checking against {out / 'artifacts_manifest.yaml'}" in r.stderr, r.stdout + r.stderr
    # against the committed one (other data): every mismatch, and the manifest that would match named
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--check", "--only", "corpus", "--out", str(out),
                        "--manifest", str(ROOT / "artifacts_manifest.yaml")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout + r.stderr
    assert f"--check --manifest {out / 'artifacts_manifest.yaml'}" in r.stderr and "compared with " in r.stderr


# ---------------------------------------------------------------- sweep 10, the rest: leftovers, stale indexes, foreign gold
def test_a_killed_writer_s_temporary_file_is_swept_by_the_next_write(tmp_path):
    from lexrag.io.outputs import replace_text

    dead = write(tmp_path / ".submission.csv.999999999-abcd1234.tmp", "half")  # its writer was killed
    live = write(tmp_path / f".submission.csv.{os.getpid()}-abcd1234.tmp", "being written")
    other = write(tmp_path / ".notes.csv.999999999-abcd1234.tmp", "another file's")
    replace_text(tmp_path / "submission.csv", "query_id,predicted_citations\n")
    assert not dead.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, "submission.csv"])


def test_a_laws_only_rebuild_names_the_graph_it_leaves_over_the_old_corpus(tmp_path, arts, caplog):
    assert (arts / "graph" / "params.json").is_file()
    with caplog.at_level("WARNING"):
        rc = main(["build", "--laws", str(DEMO / "laws_demo.csv"), "--no-courts", "--out", str(arts)])
    assert rc == 0
    said = caplog.text
    assert "its graph will have no court edges" not in said and "no graph is built unless graph.enabled is on" in said
    assert re.search(r"graph: this build replaces the corpus but not \S+graph \(graph.enabled is off and --courts is not "
                     r"given\), so it stays over the old corpus and runs refuse it: rebuild it \(python -m lexrag build", said)


def test_a_benchmark_that_fails_removes_what_it_generated_unless_kept(tmp_path):
    args = [sys.executable, str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "40", "--phases", "query"]
    r = subprocess.run([*args, "--work", str(tmp_path / "w")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "each phase reads" in r.stderr and "is kept" not in r.stderr
    assert not (tmp_path / "w" / "40").exists()  # the generated courts.csv went with it
    r = subprocess.run([*args, "--work", str(tmp_path / "k"), "--keep"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and f"{tmp_path / 'k' / '40'} is kept" in r.stderr
    assert (tmp_path / "k" / "40" / "courts.csv").is_file()
    write(tmp_path / "u" / "40" / "thesis.txt", "the user's")  # a size folder that was there: never removed
    r = subprocess.run([*args, "--work", str(tmp_path / "u")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and (tmp_path / "u" / "40" / "thesis.txt").read_text() == "the user's"


def test_quality_says_when_the_gold_lies_outside_the_artifacts_corpus(tmp_path, arts):
    from lexrag.index.prior import build_prior

    build_prior(DEMO / "queries_demo.csv", arts / "prior")  # the demo's prior, from other questions than --data's
    data = tmp_path / "data"
    gold = ";".join(f"Art. {i} StPO" for i in range(1, 9))  # a code the demo corpus does not hold
    rows = "".join(f"d{i},Frage {i} zur Haft?,{gold},Strafprozessrecht\n" for i in range(12))
    write(data / "lexam_dev.csv", "query_id,query,gold_citations,course\n" + rows)
    for f in ("train_dev.csv", "val.csv"):
        write(data / f, "query_id,query,gold_citations\nv1,Wer haftet?,Art. 41 Abs. 1 OR\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--data", str(data), "--artifacts",
                        str(arts), "--variants", "x=lexical", "--by", "query"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-800:]
    assert (f"note: 96 of 96 gold citations of lexam_dev.csv are not in the corpus of {arts}: they count as "
            "misses; most are missing: are these artifacts built from the laws of --data?") in r.stdout
    assert "gold citations of val.csv" not in r.stdout  # all of its gold is there


def test_a_make_call_leaves_nothing_in_the_temporary_folder(tmp_path):
    """Jupyter's state lives under out/ (``make clean`` removes it), not in a fresh temporary folder per call."""
    r = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_notebook_cell_guard_turns_user_and_disk_errors_into_one_line():
    import errno

    from lexrag.errors import ConfigError, one_line_errors

    with pytest.raises(SystemExit, match="^error: parameter x: bad$"):
        with one_line_errors():
            raise ConfigError("parameter x: bad")
    with pytest.raises(SystemExit, match="^error: a file under OUT: the disk is full"):
        with one_line_errors("a file under OUT"):
            raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(ConnectionResetError):  # not the user's to fix: passes unchanged, with its traceback
        with one_line_errors():
            raise ConnectionResetError(errno.ECONNRESET, "reset")


def test_a_leftover_named_by_no_possible_process_and_a_submission_listed_with_commas(tmp_path, capsys, caplog):
    from lexrag.eval.submission import read_submission, validate_submission
    from lexrag.io.outputs import pid_alive, replace_text

    for name in (".s.csv.99999999999999999999-ab.tmp", ".s.csv.0-ab.tmp", ".s.csv.-1-ab.tmp"):
        write(tmp_path / name, "left")
    replace_text(tmp_path / "s.csv", "x\n")  # no OverflowError from a pid past any range; the leftovers go
    assert sorted(p.name for p in tmp_path.iterdir()) == [".s.csv.-1-ab.tmp", "s.csv"]  # "-1-ab": no pid in our form
    assert not pid_alive(0) and not pid_alive(-1) and not pid_alive(2**40) and pid_alive(os.getpid())
    sub = write(tmp_path / "sub.csv", 'query_id,predicted_citations\nq1,"Art. 41 Abs. 1 OR, Art. 8 ZGB"\nq2,Art. 8 ZGB\n')
    with caplog.at_level("WARNING"):
        assert read_submission(sub)["q1"] == ["Art. 41 Abs. 1 OR, Art. 8 ZGB"]
    assert "1 row(s) look like citations listed with commas (lines 2); citations are separated by ';'" in caplog.text
    problems = validate_submission(sub, ["q1", "q2"])
    assert len(problems) == 1 and "citations listed with commas" in problems[0] and "line 2" in problems[0]


def test_numba_refusing_its_environment_is_one_warning_and_numpy_answers():
    r = subprocess.run([sys.executable, "-c", "import lexrag.index.bm25_kernel as k; print(k.BACKEND)"], capture_output=True,
                       text=True, env={**os.environ, "NUMBA_NUM_THREADS": "0"}, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "numpy", r.stderr[-500:]
    assert "numba cannot start" in r.stderr and "NUMBA_* environment variables" in r.stderr and "Traceback" not in r.stderr


def test_an_abbreviations_file_that_gives_no_alias_is_a_warning(tmp_path):
    write(tmp_path / "abbrev.json", "[]")
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "build", "--laws", str(DEMO / "laws_demo.csv"), "--no-courts",
                        "--abbreviations", str(tmp_path / "abbrev.json"), "--out", str(tmp_path / "a"),
                        "--set", "runtime.progress=false"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    assert "the --abbreviations file gives no alias of the corpus's law codes (no entries)" in r.stderr


def test_a_blank_variant_one_course_to_tune_on_and_a_long_grid_are_said_once(tmp_path, demo_artifacts):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--artifacts", str(demo_artifacts), "--variants",
                        ""], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "--variants: value 1 is empty" in r.stderr and "Traceback" not in r.stderr
    lines = (DEMO / "queries_demo.csv").read_text(encoding="utf-8").splitlines()
    one = write(tmp_path / "one.csv", "\n".join([lines[0] + ",course", *(x + ",Kurs A" for x in lines[1:])]) + "\n")
    base = [sys.executable, "-m", "lexrag", "tune", "--artifacts", str(demo_artifacts), "--set", "runtime.progress=false"]
    r = subprocess.run([*base, "--queries", str(one), "--grid", "count.k=3,5"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stderr.count("folds by query") == 1 and "all 22 questions are in one course (Kurs A)" in r.stderr
    assert "folds by course instead" not in r.stderr and "grouped by query (fewer than two courses)" in r.stdout
    many = write(tmp_path / "many.csv", "\n".join([lines[0] + ",course", *(f"{x},Kurs {i % 3}" for i, x in enumerate(lines[1:]))]) + "\n")
    ks = ",".join(str(k) for k in range(1, 41))
    r = subprocess.run([*base, "--queries", str(many), "--grid", f"count.k={ks}"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-800:]
    said = [x for x in r.stderr.splitlines() if "fewer distinct citations" in x]
    assert 1 <= len(said) <= 2 and "alike but for their numbers" in said[0], said[:3]


def test_ctrl_c_is_one_line_and_the_shell_s_code(tmp_path, capsys, monkeypatch):
    import lexrag.queries

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(lexrag.queries, "load_gold", interrupted)
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "evaluate", "--pred", q, "--gold", q)
    assert rc == 130 and err.strip().startswith("interrupted: evaluate stopped") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("script,args,message", [
    ("citation_roundtrip.py", ["{tmp}/nope.txt"], "{tmp}/nope.txt: file not found"),
    ("citation_roundtrip.py", ["{tmp}/u16.txt"], "{tmp}/u16.txt: UTF-16/UTF-32 or binary"),
    ("experiment_head.py", ["--data", "{tmp}/none", "--artifacts", "{tmp}/none"], "error: "),
    ("experiment_lexical.py", ["--data", "{tmp}/none", "--artifacts", "{tmp}/none"], "error: "),
])
def test_the_experiment_scripts_name_a_wrong_path_in_one_line(tmp_path, script, args, message):
    (tmp_path / "u16.txt").write_bytes("Art. 1 OR\n".encode("utf-16"))  # a key file saved as UTF-16
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *(a.format(tmp=tmp_path) for a in args)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and message.format(tmp=tmp_path) in r.stderr and "Traceback" not in r.stderr, r.stderr[-600:]


def test_sweep_12_numbers_statuses_and_manifest_digests(tmp_path, capsys):
    from lexrag.artifacts import write_params
    from lexrag.config import load_config
    from lexrag.errors import ArtifactError
    from lexrag.stages.count import Calibration

    cfg = load_config(None, {"fusion.weights.bm25_de": "1e-3", "runtime.stage_estimates_s": {"bm25": "1e-3"}})
    assert cfg.fusion.weights["bm25_de"] == 0.001 and cfg.runtime.stage_estimates_s["bm25"] == 0.001  # as float fields read it
    m = write(tmp_path / "m.json", '{"status": "", "metrics": {"macro_f1": 0.3}}')
    e = write(tmp_path / "e.yaml", "metrics:\n  macro_f1: {value: 0.3, tol: 0.01}\n")
    rc, out, _ = cli(capsys, "check-scores", m, "--expected", e)
    assert rc == 1 and "ended UNREADABLE (a blank status), not OK" in out
    (tmp_path / "cal").mkdir()
    write_params(tmp_path / "cal", "calibration", "tests", {}, thresholds={"fuzed": 0.5}, default=0.9)
    with pytest.raises(ArtifactError, match="thresholds for fuzed, which is no stage"):
        Calibration.load(tmp_path / "cal")
    manifest = write(tmp_path / "man.yaml", "artifacts:\n- name: bm25\n  dataset: lexrag-bm25\n  files:\n"
                     "  - {path: a.npy, size: 1, sha256: '" + "a" * 63 + "'}\n")
    from lexrag.errors import ManifestError
    from lexrag.kaggle.manifest import load_manifest

    with pytest.raises(ManifestError, match="a.npy: sha256 'a{63}' is not 64 hex digits"):
        load_manifest(manifest)


def test_a_run_where_no_query_gets_a_citation_is_failed(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", "query_id,query\nq1,xyzzyq plughq\nq2,qwertzq uiopq\n")  # words no document holds
    rc, out, _ = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv")
    assert rc == 1 and "FAILED: none of the 2 queries got a citation: " in out and "ran and found nothing" in out, out[-800:]


def test_a_benchmark_work_folder_linked_out_and_a_check_of_a_file(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "40").symlink_to(outside)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "40", "--work", str(tmp_path / "w")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "is a link or a file, not a folder" in r.stderr and list(outside.iterdir()) == []
    f = write(tmp_path / "afile", "x")
    r = subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), "--check", "--out", str(f)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr, r.stderr + r.stdout


def test_a_benchmark_s_json_inside_its_work_folder_is_refused_before_it_exists(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "40", "--work", str(tmp_path / "w"),
                        "--json", str(tmp_path / "w" / "40" / "res.json")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "lies inside --work" in r.stderr and not (tmp_path / "w").exists()


def test_gold_written_as_whole_articles_is_not_called_outside_the_corpus(tmp_path, demo_artifacts):
    from lexrag.config import load_config
    from lexrag.eval.submission import outside_corpus
    from lexrag.pipeline import Artifacts

    corpus = Artifacts.from_folder(demo_artifacts, load_config(None, {"runtime.progress": False})).corpus
    assert "Art. 41 Abs. 1 OR" in corpus.citations and "Art. 41 OR" not in corpus.citations
    assert outside_corpus(corpus, ["Art. 41 OR", "Art. 41 Abs. 1 OR", "Art. 9999 OR"]) == ["Art. 9999 OR"]


def test_sweep_13_options_twice_a_file_size_limit_deep_values_and_tolerances(tmp_path, capsys):
    import errno

    from lexrag.errors import disk_error
    from lexrag.eval.expect import check_expected

    with pytest.raises(SystemExit):
        main(["run", "--queries", "a.csv", "--queries", "b.csv", "--out", str(tmp_path / "s.csv")])
    assert "--queries is given twice; give it once" in capsys.readouterr().err
    line = disk_error(OSError(errno.EFBIG, "File too large", "/x/keep.csv"))
    assert line.startswith("/x/keep.csv: the file would pass the file-size limit (ulimit -f)") and "ulimit -f unlimited" in line
    rc, _, err = cli(capsys, "run", "--queries", "q.csv", "--out", tmp_path / "s.csv", "--set", "count.k=" + "[" * 5000 + "]" * 5000)
    assert rc == 2 and "nested too deeply to read" in err and len(err.strip().splitlines()) == 1
    rows = check_expected({"macro_f1": 0.3005}, {"metrics": {"macro_f1": {"value": "3e-1", "tol": "1e-3"}}})
    assert rows[0]["tol"] == 0.001 and rows[0]["status"] == "OK"


def test_an_option_twice_in_every_tool_and_upper_case_digests_in_params(tmp_path, arts, capsys):
    import json as js

    from lexrag.artifacts import seal

    for tool, args in (("scripts/quality.py", ["--by", "course", "--by", "area"]), ("build_datasets.py", ["--out", "a", "--out", "b"]),
                       ("scripts/bench_bm25.py", ["--work", "a", "--work", "b"])):
        r = subprocess.run([sys.executable, str(ROOT / tool), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and f"{args[0]} is given twice; give it once" in r.stderr, (tool, r.stderr[-400:])
    params = arts / "bm25" / "params.json"
    doc = js.loads(params.read_text(encoding="utf-8"))
    doc["files"] = {k: {**v, "sha256": v["sha256"].upper()} for k, v in doc["files"].items()}
    params.write_text(js.dumps(seal(doc)), encoding="utf-8")  # as a writer of upper-case hex would, its digest with them
    q = write(tmp_path / "q.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv")
    assert rc == 0, err[-400:]  # the same digests, in upper case


def test_a_stage_switched_on_without_the_stage_it_needs_is_said(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES)
    rc, out, _ = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv", "--set", "verify.enabled=true")
    assert rc == 0 and "DEGRADED: " in out
    assert "verify          missing  verify.enabled is on, but it needs llm.enabled, which is off" in out
    assert "verify" not in out.split("off in the config:")[-1].splitlines()[0]


def test_tune_says_when_most_of_the_gold_is_not_in_the_corpus(tmp_path, demo_artifacts):
    lines = (DEMO / "queries_demo.csv").read_text(encoding="utf-8").splitlines()
    rows = [lines[0]] + [f"{x.rsplit(',', 1)[0]},\"{x.rsplit(',', 1)[1].strip(chr(34))};Art. 9001 StPO;Art. 9002 StPO\""
                         for x in lines[1:]]
    q = write(tmp_path / "q.csv", "\n".join(rows) + "\n")
    r = subprocess.run([sys.executable, "-m", "lexrag", "tune", "--artifacts", str(demo_artifacts), "--queries", str(q),
                        "--grid", "count.k=3,5", "--set", "runtime.progress=false"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-600:]
    assert "tune: only " in r.stderr and "every point scores the rest as misses" in r.stderr


def test_a_queries_file_padded_with_nul_bytes_after_its_text_is_named_as_such(tmp_path, arts, capsys):
    q = write(tmp_path / "q.csv", QUERIES.encode() + b"\x00" * 4096)
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", q, "--out", tmp_path / "s.csv")
    assert rc == 2 and f"{q}: NUL bytes fill it from byte {len(QUERIES.encode()):,} on, after the text" in err, err
    assert "UTF-16" not in err and len(err.strip().splitlines()) == 1


def test_a_prior_file_of_another_shape_and_artifacts_given_as_a_file_are_one_line_each(tmp_path, arts, capsys):
    import shutil

    from lexrag.artifacts import ArtifactError, read_params, write_params
    from lexrag.index.prior import TrainingPrior, build_prior

    build_prior(DEMO / "queries_demo.csv", tmp_path / "prior")
    doc = read_params(tmp_path / "prior", "prior")
    shutil.copyfile(arts / "corpus" / "citation_keys.parquet", tmp_path / "prior" / "gold.parquet")  # another file of the set
    write_params(tmp_path / "prior", "prior", doc["builder"], doc["params"], sources=doc.get("sources"))  # its digests agree
    with pytest.raises(ArtifactError, match=r"artifact 'prior' at .* cannot be read \(KeyError: .*query_id.*rebuild it"):
        TrainingPrior.load(tmp_path / "prior")
    f = write(tmp_path / "a.csv", QUERIES)
    rc, _, err = cli(capsys, "run", "--artifacts", f, "--queries", f, "--out", tmp_path / "s.csv")
    assert rc == 2 and f"{f} is a file, not a folder; give the folder that holds the artifacts" in err, err


def test_a_script_stopped_by_ctrl_c_is_one_line_and_a_killed_quality_build_is_swept(tmp_path):
    code = ("import sys; sys.path.insert(0, 'scripts'); import benchkit\n"
            "def main():\n    raise KeyboardInterrupt\n"
            "sys.exit(benchkit.guarded(main))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 130 and r.stderr.startswith("interrupted: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    dead, done, live = tmp_path / "lexrag-quality-999999999-ab", tmp_path / "lexrag-quality-999999998-cd", \
        tmp_path / f"lexrag-quality-{os.getpid()}-ef"
    for d in (dead, done, live):
        (d / "bm25").mkdir(parents=True)
    (done / "corpus").mkdir()
    (done / "corpus" / "params.json").write_text("{}")  # a finished build the run announced as kept
    code = "import sys; sys.path.insert(0, 'scripts'); import quality; quality._sweep_dead_builds()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert not dead.exists() and done.is_dir() and live.is_dir()


def test_a_benchmark_size_beyond_the_free_disk_is_refused_before_anything_is_generated(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_bm25.py"), "--sizes", "10000000000", "--work",
                        str(tmp_path / "w")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--sizes 10,000,000,000: its generated CSV alone takes about" in r.stderr, r.stderr
    assert not (tmp_path / "w").exists()


def test_a_quality_variant_changing_what_the_bm25_index_fixes_is_refused_unless_an_index_built_so_is_given(tmp_path,
                                                                                                        demo_artifacts):
    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.experiment import _bm25_of_variants
    from lexrag.eval.variants import parse_variant
    from lexrag.pipeline import Artifacts
    from lexrag.pipeline.build import build_index

    base = load_config(None, {"runtime.progress": False})
    art = Artifacts.from_folder(demo_artifacts, base)
    assert _bm25_of_variants([parse_variant("lexical"), parse_variant("k=lexical;count.k=3")], None, base, demo_artifacts, art) == {}
    k1 = parse_variant("k1=lexical;lexical.k1=2")
    with pytest.raises(ConfigError, match="variant 'k1' changes k1 of BM25, which the index in .* fixes when it is built"):
        _bm25_of_variants([k1], None, base, demo_artifacts, art)
    build_index("bm25", load_config(None, {"lexical.k1": 2, "runtime.progress": False}), demo_artifacts / "corpus", tmp_path / "k1",
                corpus=art.corpus)
    got = _bm25_of_variants([k1], None, base, demo_artifacts, art, [tmp_path / "k1"])
    assert got["k1"].params["params"]["k1"] == 2 and got["k1"] is not art.bm25  # scored with the index built with it


def test_quality_refuses_courts_it_would_not_read(tmp_path, demo_artifacts):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--artifacts", str(demo_artifacts), "--courts",
                        str(DEMO / "courts_demo.csv")], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2 and "--courts is read only when this script builds the artifacts" in r.stderr, r.stderr[-400:]


def test_tune_refuses_a_field_given_both_to_set_and_to_the_grid(tmp_path, capsys):
    rc, _, err = cli(capsys, "tune", "--artifacts", tmp_path, "--queries", DEMO / "queries_demo.csv", "--grid", "count.k=3,5",
                     "--set", "count.k=9")
    assert rc == 2 and "--set count.k and --grid count.k: the grid sets it at every point; drop one of them" in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_standard_output_is_named_as_such_not_as_the_file_written(tmp_path, demo_artifacts):
    out = tmp_path / "s.csv"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "run", "--artifacts", str(demo_artifacts), "--queries",
                            str(DEMO / "queries_demo.csv"), "--out", str(out), "--set", "runtime.progress=false"],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: standard output cannot be written"), r.stderr
    assert str(out) not in r.stderr and len(out.read_text(encoding="utf-8").splitlines()) == 23  # the submission is whole


def test_calibrate_refuses_a_single_question_as_tune_does(tmp_path, arts, capsys):
    lines = (DEMO / "queries_demo.csv").read_text(encoding="utf-8").splitlines()
    q = write(tmp_path / "one.csv", "\n".join(lines[:2]) + "\n")
    rc, _, err = cli(capsys, "calibrate", "--queries", q, "--artifacts", arts, "--out", tmp_path / "cal")
    assert rc == 2 and "1 question with gold citations; calibrate fits thresholds over questions" in err, err
    assert not (tmp_path / "cal").exists()


def test_quality_refuses_a_tuning_file_of_one_question(tmp_path, demo_artifacts):
    lines = (DEMO / "queries_demo.csv").read_text(encoding="utf-8").splitlines()
    data = tmp_path / "data"
    data.mkdir()
    write(data / "one.csv", f"{lines[0]},course\n{lines[1]},Kurs A\n")
    for name in ("train_dev.csv", "val.csv"):
        write(data / name, "\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--data", str(data), "--artifacts",
                        str(demo_artifacts), "--variants", "lexical", "--tune-on", "one.csv"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "1 question with gold citations; the nested folds hold questions out" in r.stderr, r.stderr[-600:]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("point", ["prepare", "bm25"])  # in the run itself, or while a phase's subprocess runs
def test_a_benchmark_stopped_by_sigterm_or_killed_leaves_no_size_folder_behind(tmp_path, point):
    import signal

    work, marker = tmp_path / "w", tmp_path / "paused"
    script = tmp_path / "paused_bench.py"  # bench_bm25 whose run pauses at ``point`` until the test stops it
    script.write_text(PAUSE_AT + (
        f"sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
        "import benchkit, bench_bm25\n"
        "point, marker = os.environ['PAUSE_POINT'], os.environ['PAUSE_MARKER']\n"
        "def prepare(work, n):\n"
        "    out = bench_bm25.prepare(work, n)\n"
        "    if point == 'prepare':\n"
        "        pause(marker)\n"
        "    return out\n"
        "def phase(name, work, n):\n"
        "    if name == point:\n"
        "        pause(marker)\n"
        "    return bench_bm25.phase(name, work, n)\n"
        "sys.exit(benchkit.main(__file__, bench_bm25.__doc__, phase, ('corpus', 'bm25', 'query', 'bm25s'), [40], '',\n"
        "                       bench_bm25.table, prepare))\n"), encoding="utf-8")
    p = subprocess.Popen([sys.executable, str(script), "--sizes", "40", "--work", str(work)],  # 40 documents: it stops on an event
                         env={**os.environ, "PAUSE_POINT": point, "PAUSE_MARKER": str(marker)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(marker, p)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM and not (work / "40").exists(), p.stderr.read()[-400:]
    killed, kept = work / "5", work / "6"  # a folder a killed run marked as its own, and one of the user's
    for d in (killed, kept):
        d.mkdir(parents=True)
        (d / "courts.csv").write_text("x")
    (killed / ".lexrag-bench-run-999999999").touch()
    code = "import sys; from pathlib import Path; sys.path.insert(0, 'scripts'); import benchkit\n" \
           f"benchkit._sweep_killed_size(Path({str(killed)!r})); benchkit._sweep_killed_size(Path({str(kept)!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=ROOT)
    assert not killed.exists() and (kept / "courts.csv").is_file()


@pytest.mark.parametrize("tool,args", [("scripts/bench_bm25.py", ["--json", ""]), ("scripts/quality.py", ["--expected", " "]),
                                       ("scripts/quality.py", ["--artifacts", ""]), ("scripts/bench_e5.py", ["--artifacts", ""]),
                                       ("scripts/bench_bm25.py", ["--set"]),  # a list option whose default is no values
                                       ("scripts/experiment_e5.py", ["--work", "", "--artifacts", "x"])])
def test_an_option_given_an_empty_value_is_refused_not_read_as_left_out(tmp_path, tool, args):
    r = subprocess.run([sys.executable, str(ROOT / tool), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and f"{args[0]} is empty: give a path or a value, or leave the option out" in r.stderr, r.stderr[-400:]
    assert not list(tmp_path.iterdir())


def test_an_out_name_too_long_for_its_temporary_name_and_a_removed_working_folder_are_said_first(tmp_path, arts, capsys):
    out = tmp_path / ("s" * 240 + ".csv")
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", DEMO / "queries_demo.csv", "--out", out)
    assert rc == 2 and "its name is 244 bytes; it is written whole under a temporary name beside it" in err, err
    assert ".tmp" not in err and not list(tmp_path.glob("s*"))
    gone = tmp_path / "gone"
    gone.mkdir()
    r = subprocess.run(["sh", "-c", f"cd {gone} && rmdir {gone} && exec {sys.executable} -m lexrag run --queries "
                        f"{DEMO / 'queries_demo.csv'} --artifacts {arts} --out {tmp_path / 's.csv'}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "the current folder no longer exists" in r.stderr and not (tmp_path / "s.csv").exists()


def test_a_causal_lm_given_as_the_encoder_is_refused(tiny_llm):
    from lexrag.errors import ModelLoadError
    from lexrag.models import load_encoder

    with pytest.raises(ModelLoadError, match=r"semantic.model .*: its config.json says \w+ForCausalLM, a model that writes "
                                             "text or scores pairs, not an encoder"):
        load_encoder(tiny_llm)


def test_an_ablation_table_an_earlier_run_left_is_not_shown_as_this_run_s(tmp_path, capsys):
    from lexrag.eval.report import write_report

    table = write(tmp_path / "ablation.csv", "run,macro_f1\nfull,0.357\n")
    m = write(tmp_path / "metrics.json", json.dumps({"metrics": {"macro_f1": 0.6136}}))
    os.utime(table, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))  # written before this run's metrics
    os.utime(m, ns=(2_000_000_000_000_000_000, 2_000_000_000_000_000_000))
    rc, out, _ = cli(capsys, "show-metrics", m)
    assert rc == 0 and "ablation.csv: not shown: it is older than metrics.json, so an earlier run's" in out and "0.357" not in out
    assert "0.357" not in write_report(tmp_path).read_text(encoding="utf-8")
    assert "ablation.csv (an earlier run's)" in out
    os.utime(table, ns=(3_000_000_000_000_000_000, 3_000_000_000_000_000_000))  # this run's: written after its metrics
    rc, out, _ = cli(capsys, "show-metrics", m)
    assert rc == 0 and "0.357" in out and "not shown" not in out


def test_an_index_over_the_earlier_corpus_of_a_half_published_set_names_the_set_aside_corpus(tmp_path, arts, capsys):
    from lexrag.artifacts import seal

    params = arts / "corpus" / "params.json"
    doc = json.loads(params.read_text(encoding="utf-8"))
    doc["sources"] = {"laws": "another build's laws"}  # the new corpus moved in; bm25 still the earlier one's
    params.write_text(json.dumps(seal(doc)), encoding="utf-8")
    (arts / ".corpus.old-4242-0a1b2c3d").mkdir()
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", DEMO / "queries_demo.csv", "--out", tmp_path / "s.csv")
    assert rc == 2 and ".corpus.old-4242-0a1b2c3d beside it holds the earlier corpus" in err, err


def test_an_option_given_again_under_an_abbreviated_name_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli(capsys, "run", "--queries", tmp_path / "a.csv", "--quer", tmp_path / "b.csv", "--out", tmp_path / "s.csv")
    assert e.value.code == 2 and "--queries is given twice; give it once" in capsys.readouterr().err
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--json", "a", "--js", "b"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "--json is given twice" in r.stderr and not list(tmp_path.iterdir())


def test_a_reranker_as_the_encoder_is_refused_and_leaves_no_folder(tmp_path, demo_artifacts):
    pytest.importorskip("sentence_transformers")
    from lexrag.errors import ModelLoadError
    from lexrag.index.corpus import Corpus
    from lexrag.index.embeddings import build_embeddings
    from lexrag.testing import make_tiny_reranker

    rr = make_tiny_reranker(tmp_path / "rr")
    with pytest.raises(ModelLoadError, match="ForSequenceClassification, a model that writes text or scores pairs, not an encoder"):
        build_embeddings(Corpus(demo_artifacts / "corpus", lookups=False), rr, tmp_path / "emb", corpus_id="x", progress=False)
    assert not (tmp_path / "emb").exists()


def test_corpus_texts_that_are_not_utf8_and_a_folder_named_like_a_journal_are_one_line_each(tmp_path, arts, capsys):
    from lexrag.artifacts import read_params, write_params

    blob = arts / "corpus" / "texts.bin"
    blob.write_bytes(blob.read_bytes()[::-1])  # the same size, bytes that are not UTF-8
    doc = read_params(arts / "corpus", "corpus", verify=False)
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(arts / "corpus", "corpus", doc["builder"], doc["params"], **extra)  # its digests re-recorded
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", DEMO / "queries_demo.csv", "--out", tmp_path / "s.csv")
    assert rc == 2 and "artifact 'corpus' at" in err and "UnicodeDecodeError" in err and len(err.strip().splitlines()) == 1, err
    own = tmp_path / "out" / ".lexrag-publish-done-99999-abcdef12.json"
    (own / "x").mkdir(parents=True)
    with pytest.warns(UserWarning, match="has the name of a publish journal but is a folder or a link: left alone"):
        rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", tmp_path / "out")
    assert rc == 0 and (own / "x").is_dir(), err


def test_a_calibration_given_as_its_params_file_is_told_its_folder(tmp_path):
    from lexrag.artifacts import ArtifactError, read_params

    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "params.json").write_text("{}")
    with pytest.raises(ArtifactError, match=r"is the artifact's params.json; give the folder that holds it, .*cal$"):
        read_params(tmp_path / "cal" / "params.json", "calibration")


def test_a_replay_over_a_cache_a_killed_writer_left_a_journal_beside_names_the_journal(tmp_path):
    from lexrag.errors import ArtifactError
    from lexrag.llm.cache import CACHE_FILE, LLMCache

    LLMCache(tmp_path / "c").close()  # an empty cache, closed cleanly
    (tmp_path / "c" / (CACHE_FILE + "-journal")).write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 504)
    with pytest.raises(ArtifactError, match="cache.sqlite-journal beside cache.sqlite is the journal of a writer that was killed"):
        LLMCache(None, readonly=[tmp_path / "c"])


def test_names_too_long_for_gpu_check_json_and_for_the_notebook_s_answer_are_refused_first(tmp_path, demo_artifacts, demo_queries):
    from lexrag.errors import ArtifactError
    from lexrag.kaggle.notebook import run_submission

    r = subprocess.run([sys.executable, "-m", "lexrag.cli.gpu_check", "--cpu", "--json", str(tmp_path / ("j" * 257))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "a name in this path is longer than the file system allows" in r.stderr, r.stderr[-400:]
    assert "Traceback" not in r.stderr
    with pytest.raises(ArtifactError, match="out_path .*: its name is 244 bytes; it is written whole under a temporary name"):
        run_submission(str(DEMO / "config.yaml"), {"runtime.progress": False}, demo_queries, demo_artifacts,
                       out=tmp_path / ("s" * 240 + ".csv"))


def test_a_dataset_build_that_replaces_the_corpus_but_not_the_graph_says_so_and_check_finds_it(tmp_path):
    from lexrag.config import load_config
    from lexrag.kaggle.datasets import rebuild
    from lexrag.kaggle.manifest import check

    manifest = tmp_path / "m.yaml"
    shutil.copy(ROOT / "artifacts_manifest.yaml", manifest)
    out, cfg = tmp_path / "ds", load_config(None, {"runtime.progress": False, "graph.enabled": True})
    rebuild(manifest, out, cfg, laws=DEMO / "laws_demo.csv", courts=DEMO / "courts_demo.csv", only=["corpus", "bm25", "graph"])
    assert check(manifest, out, only=["corpus", "bm25", "graph"]) == []
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("lexrag.pipeline.build").addHandler(handler)
    try:
        rebuild(manifest, out, cfg, laws=DEMO / "laws_demo.csv", only=["corpus", "bm25"])  # laws only: another corpus
    finally:
        logging.getLogger("lexrag.pipeline.build").removeHandler(handler)
    assert any("replaces the corpus but not" in r.getMessage() and "graph" in r.getMessage() for r in records)
    assert any("graph: built over another corpus than" in p for p in check(manifest, out, only=["corpus", "bm25", "graph"]))


def test_numbers_are_read_as_yaml_1_2_reads_them_and_out_dash_is_refused(tmp_path, capsys):
    from lexrag.config import load_config, parse_overrides
    from lexrag.errors import ConfigError

    for value in ("1:30", "5_0"):  # as --set count.k=... gives them; YAML 1.1 would read 90 and 50
        with pytest.raises(ConfigError, match=f"count.k: expected int, got str '{value}'"):
            load_config(None, parse_overrides([f"count.k={value}"]))
    assert load_config(None, parse_overrides(["count.k=7"])).count.k == 7
    cfg = load_config(None, {"fusion.rrf_k": 30, "fusion.weights": {"bm25_de": "1e-3"}})
    assert cfg.fusion.rrf_k == 30 and cfg.fusion.weights["bm25_de"] == 0.001
    rc, _, err = cli(capsys, "run", "--queries", DEMO / "queries_demo.csv", "--artifacts", tmp_path, "--out", "-")
    assert rc == 2 and "the output is a file, not standard output" in err and not (Path.cwd() / "-").exists()


def test_a_config_saved_as_utf16_without_a_byte_order_mark_is_named_as_such(tmp_path, capsys):
    cfg = write(tmp_path / "c.yaml", "count:\n  k: 3\n".encode("utf-16-le"))
    rc, _, err = cli(capsys, "config", "--config", cfg)
    assert rc == 2 and f"{cfg}: UTF-16/UTF-32, not UTF-8 text" in err, err


def test_a_misspelt_sibling_kind_is_refused_at_config_load():
    from lexrag.config import load_config, parse_overrides
    from lexrag.errors import ConfigError

    with pytest.raises(ConfigError, match="graph.siblings_kinds must be law, bge or docket, got 'lawx'"):
        load_config(None, parse_overrides(["graph.siblings_kinds=[lawx]"]))
    assert load_config(None, parse_overrides(["graph.siblings_kinds=[law, bge]"])).graph.siblings_kinds == ["law", "bge"]


def test_a_hidden_folder_of_the_user_s_named_like_a_set_aside_artifact_is_left_alone(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    mine = out / ".notes.old-99999-abcdef12"  # the user's, named as a publish names what it sets aside
    mine.mkdir()
    (mine / "params.json").write_text('{"artifact": "notes"}')
    (mine / "backup.txt").write_text("mine")
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", out, "--set", "runtime.progress=false")
    assert rc == 0 and (mine / "backup.txt").read_text() == "mine", err


def test_a_key_file_with_a_stray_cp1252_byte_is_read_with_a_warning(tmp_path):
    keys = write(tmp_path / "k.txt", b"Art. 1 OR\nVertr\xe4ge\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "citation_roundtrip.py"), str(keys)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "1 key(s) hold bytes that are not UTF-8" in r.stderr and "Traceback" not in r.stderr


def test_a_validation_output_that_cannot_be_replaced_is_refused_before_the_run(tmp_path, demo_artifacts, demo_queries, monkeypatch):
    import errno

    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.eval.validation import validate_run
    from lexrag.pipeline import Artifacts

    out = tmp_path / "v"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    (out / "submission.csv").write_text("earlier")
    real_open = os.open

    def immutable(path, flags, *a, **k):  # as chattr +i makes it (root could write a read-only mode)
        if str(path).endswith("metrics.json") and flags & os.O_WRONLY:
            raise OSError(errno.EPERM, "Operation not permitted", str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(os, "open", immutable)
    cfg = load_config(None, {"runtime.progress": False})
    with pytest.raises(ConfigError, match="metrics.json exists and cannot be replaced"):
        validate_run(cfg, Artifacts.from_folder(demo_artifacts, cfg), demo_queries, out)
    assert (out / "submission.csv").read_text() == "earlier"


def test_a_quoted_tilde_out_is_a_folder_named_tilde_and_an_option_list_given_no_value_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "build", "--laws", str(DEMO / "laws_demo.csv"), "--no-courts",
                        "--out", "~/arts", "--set", "runtime.progress=false"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "~" / "arts" / "corpus" / "params.json").is_file(), r.stderr[-400:]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--variants"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "--variants is empty" in r.stderr, r.stderr[-400:]


def test_out_dash_for_a_folder_output_is_refused(tmp_path, capsys):
    rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", "-")
    assert rc == 2 and "--out -: the output is a folder, not standard output" in err and not Path("-").exists()


def test_a_kind_named_twice_a_config_file_s_bad_value_and_a_second_test_csv_are_named(tmp_path, monkeypatch, caplog):
    """A list of kinds with a name given twice is refused; a value out of range in a config file is
    named with the file; on Kaggle a test.csv in another input besides the competition's is named."""
    import logging

    from lexrag.config import load_config
    from lexrag.errors import ConfigError
    from lexrag.paths import resolve_paths

    with pytest.raises(ConfigError, match="graph.siblings_kinds names 'law' twice"):
        load_config(None, {"graph.siblings_kinds": ["law", "bge", "law"]})
    cfg = tmp_path / "c.yaml"
    cfg.write_text("graph: {siblings_kinds: [law, lawx]}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(cfg))}: graph.siblings_kinds must be law, bge or docket"):
        load_config(cfg)
    cfg.write_text("count: {k: 0}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(cfg))}: count.k must be >= 1"):
        load_config(cfg, {"count.k": 3})
    for folder, rows in (("competitions/legal-ir", 2), ("legal-ir-copy", 22)):
        (tmp_path / "in" / folder).mkdir(parents=True)
        (tmp_path / "in" / folder / "test.csv").write_text("query_id,query\n" + "q,x\n" * rows, encoding="utf-8")
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch")
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path / "in"))
    with caplog.at_level(logging.WARNING, logger="lexrag.paths"):
        got = resolve_paths(load_config(None, {"paths.competition": "legal-ir"}).paths).input_file("test.csv")
    assert got == tmp_path / "in" / "competitions" / "legal-ir" / "test.csv"
    assert "1 other inputs hold one too" in caplog.text and str(tmp_path / "in" / "legal-ir-copy" / "test.csv") in caplog.text


@pytest.mark.parametrize("argv", [["show-metrics", ""], ["check-scores", " ", "--expected", "x.yaml"],
                                  ["validate-submission", "", "--queries", "q.csv"]])
def test_an_empty_positional_argument_is_refused_not_read_as_the_current_folder(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "is empty: give a path or a value\n" in err and "leave the option out" not in err, err


def test_round_19_looks_a_bom_in_an_id_an_extra_column_a_slash_after_a_file_and_a_stale_calibration(tmp_path, arts, capsys,
                                                                                                     caplog):
    """A byte-order mark inside a row's query id (two files joined with cat) is refused by name; a
    scored submission's extra column is named; `--out FILE/` where FILE is a file says so; a
    laws rebuild beside a calibration says the calibration was fitted over the replaced corpus."""
    import logging

    from lexrag.eval.submission import read_submission

    q = write(tmp_path / "q.csv", "query_id,query,gold_citations\nq1,Was gilt?,Art. 1 OR\n\ufeffq2,Und dann?,Art. 2 OR\n")
    rc, _, err = cli(capsys, "evaluate", "--gold", q, "--pred", q)
    assert rc == 2 and "line 3: query_id '\\ufeffq2' holds a byte-order mark" in err
    sub = write(tmp_path / "s.csv", "query_id,predicted_citations,note\nq1,Art. 1 OR,x\n")
    with caplog.at_level(logging.WARNING, logger="lexrag.eval.submission"):
        assert read_submission(sub) == {"q1": ["Art. 1 OR"]}
    assert "column(s) 'note' besides query_id,predicted_citations are not read" in caplog.text
    rc, _, err = cli(capsys, "run", "--queries", DEMO / "queries_demo.csv", "--artifacts", arts, "--out", f"{sub}/")
    assert rc == 2 and f"ends with a slash, but {sub} is a file" in err
    (arts / "calibration").mkdir()
    (arts / "calibration" / "params.json").write_text('{"artifact": "calibration"}')
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lexrag.pipeline.build"):
        rc, _, err = cli(capsys, "build", "--laws", DEMO / "laws_demo.csv", "--no-courts", "--out", arts)
    assert rc == 0, err
    assert f"calibration: {arts / 'calibration'} was fitted over the corpus this build replaces" in caplog.text


def test_quality_by_a_grouping_named_twice_is_refused(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "quality.py"), "--data", str(tmp_path), "--by", "course",
                        "course", "--variants", "d=lexical;dictionary.enabled=false"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--by names course twice; give each once" in r.stderr, r.stderr[-400:]


def test_a_graph_whose_document_map_was_altered_with_its_hashes_re_recorded_is_refused(arts, capsys, tmp_path):
    """No hash check sees it (the hashes were re-recorded); the spot check of documents against
    their nodes does, as BM25's vocabulary check does for its index."""
    from lexrag.artifacts import write_params

    graph = arts / "graph"
    if not (graph / "doc_node.npy").is_file():
        pytest.skip("this build has no graph")
    np.save(graph / "doc_node.npy", np.load(graph / "doc_node.npy")[::-1].copy(), allow_pickle=False)
    doc = json.loads((graph / "params.json").read_text(encoding="utf-8"))
    extra = {k: v for k, v in doc.items() if k not in ("artifact", "builder", "params", "files", "version")}
    write_params(graph, doc["artifact"], doc["builder"], doc["params"], **extra)  # hashes re-recorded
    rc, _, err = cli(capsys, "run", "--artifacts", arts, "--queries", write(tmp_path / "q.csv", QUERIES), "--out",
                     tmp_path / "s.csv", "--set", "graph.enabled=true")
    assert rc == 2 and "its doc_node.npy is not this corpus's" in err and len(err.strip().splitlines()) == 1, err
