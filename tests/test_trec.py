"""TREC run and qrels files: citations survive as DOCNOs, the written format is what trec_eval
reads (checked against a hand-written file), scores fall with rank, and ``run --run-file``,
``evaluate`` and ``fuse`` write and read them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lexrag.eval.trec import decode_docno, encode_docno, read_qrels, read_trec_run, rrf_fuse, trec_kind, write_trec_run


@pytest.mark.parametrize("cit", ["Art. 11 Abs. 2 OR", "BGE 145 II 32 E. 3.1", "5A_800/2019 E. 2.", "Art. 5 %20 x", "Art.\t1\nZGB", "Ä ü"])
def test_a_citation_is_one_field_and_comes_back(cit):
    d = encode_docno(cit)
    assert d.split() == [d] and decode_docno(d) == cit


def test_the_run_file_is_written_as_trec_eval_reads_it(tmp_path):
    path = tmp_path / "run.trec"
    n = write_trec_run(path, {"q1": [("Art. 41 OR", 0.5), ("Art. 41 Abs. 1 OR", 0.5), ("BGE 1 I 1", 0.25)], "q2": []}, "t1")
    assert n == 3
    lines = path.read_text(encoding="utf-8").splitlines()
    # hand-written: six fields, Q0, ranks from 1, the tie's second score lowered just under the first
    assert lines[0] == "q1 Q0 Art.%2041%20OR 1 0.5 t1"
    assert lines[1].startswith("q1 Q0 Art.%2041%20Abs.%201%20OR 2 0.49999999999999") and lines[1].endswith(" t1")
    assert lines[2] == "q1 Q0 BGE%201%20I%201 3 0.25 t1"
    scores = [float(ln.split()[4]) for ln in lines]
    assert scores[0] > scores[1] > scores[2]
    assert trec_kind(path) == "run"
    back = read_trec_run(path)
    assert [c for c, _ in back["q1"]] == ["Art. 41 OR", "Art. 41 Abs. 1 OR", "BGE 1 I 1"]


def test_a_run_line_of_another_shape_is_named(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 x t\n", encoding="utf-8")
    from lexrag.errors import CsvInputError

    with pytest.raises(CsvInputError, match=r"bad.trec: line 2: rank '2' or score 'x'"):
        read_trec_run(path)
    with pytest.raises(ValueError, match="whitespace"):
        write_trec_run(tmp_path / "x", {}, "two words")


def test_qrels_give_the_relevant_citations(tmp_path):
    path = tmp_path / "q.qrels"
    path.write_text("q1 0 Art.%2041%20OR 1\nq1 0 Art.%201%20OR 0\nq2 0 BGE%201%20I%201 2\n", encoding="utf-8")
    assert trec_kind(path) == "qrels"
    assert read_qrels(path) == {"q1": ["Art. 41 OR"], "q2": ["BGE 1 I 1"]}


def test_fusing_runs_adds_weighted_reciprocal_ranks():
    a = {"q": [("x", 9.0), ("y", 8.0)]}
    b = {"q": [("y", 1.0), ("z", 0.5)]}
    fused = rrf_fuse([a, b], [1.0, 2.0], rrf_k=60)
    got = dict(fused["q"])
    assert got["y"] == pytest.approx(1 / 62 + 2 / 61) and got["x"] == pytest.approx(1 / 61) and got["z"] == pytest.approx(2 / 62)
    assert [c for c, _ in fused["q"]] == ["y", "z", "x"]


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "lexrag", "-q", *args], capture_output=True, text=True, cwd=cwd)


def test_run_writes_a_run_file_that_evaluate_and_fuse_read(tmp_path, demo_artifacts):
    from lexrag.config import load_config
    from lexrag.eval.metrics import evaluate
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_gold, load_queries

    queries = "demo/queries_demo.csv"
    run = tmp_path / "run.trec"
    r = _cli("run", "--artifacts", str(demo_artifacts), "--queries", queries, "--out", str(tmp_path / "sub.csv"),
             "--run-file", str(run), "--config", "lexical")
    assert r.returncode == 0, r.stderr
    assert "a TREC run of" in r.stdout
    cfg = load_config("lexical")
    res = run_pipeline(load_queries(queries), Artifacts.from_folder(demo_artifacts, cfg), cfg)
    back = read_trec_run(run)
    assert {q: [c for c, _ in h] for q, h in back.items()} == {q: v for q, v in res.ranked.items() if v}
    gold = load_gold(queries)
    e = _cli("evaluate", "--gold", queries, "--pred", str(run), "--k", "2", "--json")
    assert e.returncode == 0, e.stderr
    import json

    got = json.loads(e.stdout)
    want = evaluate(gold, {q: v[:2] for q, v in res.ranked.items()}, res.ranked, ks=(10, 100))
    assert got["macro_f1"] == pytest.approx(want["macro_f1"]) and got["recall@100"] == pytest.approx(want["recall@100"])
    f = _cli("fuse", str(run), str(run), "--out", str(tmp_path / "fused.trec"), "--queries", queries, "--k", "2")
    assert f.returncode == 0, f.stderr
    assert [c for c, _ in read_trec_run(tmp_path / "fused.trec")["demo_01"]] == [c for c, _ in back["demo_01"]]
    rows = {ln.split()[0]: ln.split() for ln in f.stdout.splitlines() if ln.startswith(("run.trec", "fused"))}
    assert rows["fused"][1] == rows["run.trec"][1]  # a run fused with itself keeps its order and its score
