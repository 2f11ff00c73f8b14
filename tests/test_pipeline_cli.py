import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lexrag.config import load_config
from lexrag.eval.validation import validate_run
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import Query, load_queries

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=None):
    env = {**os.environ, "CI": "true"}
    return subprocess.run([sys.executable, "-m", "lexrag", *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)


def test_pipeline_on_demo(demo_artifacts, demo_queries):
    cfg = load_config(None, {"runtime.progress": False, "count.k": 5, "graph.enabled": False})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    qs = load_queries(demo_queries)
    res = run_pipeline(qs, art, cfg)
    assert res.query_ids == [q.query_id for q in qs]
    corpus = set(art.corpus.citations)
    for qid, cits in res.predictions.items():
        assert len(cits) <= 5 and set(cits) <= corpus
    # a query naming its provisions gets them as citation seeds, first; the bare "Art. 311 ZPO"
    # resolves to its paragraphs
    assert res.predictions["demo_21"][:3] == ["Art. 311 Abs. 1 ZPO", "Art. 311 Abs. 2 ZPO", "Art. 308 Abs. 1 ZPO"]
    # a plain German question finds its article lexically
    assert "Art. 337 Abs. 1 OR" in res.predictions["demo_06"]


def test_stage_switches_and_time_budget(demo_artifacts):
    q = [Query("a", "Kündigung nach Art. 337 OR aus wichtigen Gründen"), Query("b", "")]
    cfg = load_config(None, {"lexical.enabled": False, "graph.enabled": False, "runtime.progress": False})
    res = run_pipeline(q, Artifacts.from_folder(demo_artifacts, cfg), cfg)
    assert [s.signal for s in res.signals] == ["citation_seeds"]
    assert res.predictions["a"] == ["Art. 337 Abs. 1 OR", "Art. 337 Abs. 2 OR", "Art. 337 Abs. 3 OR"]
    assert res.predictions["b"] == []
    cfg = load_config(None, {"runtime.time_budget_s": 1e-9, "runtime.progress": False, "graph.enabled": True})
    assert Artifacts.from_folder(demo_artifacts, cfg).graph is not None
    with pytest.warns(UserWarning, match="time budget"):
        res = run_pipeline(q, Artifacts.from_folder(demo_artifacts, cfg), cfg)
    # past the budget only the essential stages run: seeds, BM25, fusion, count; the graph is skipped
    assert res.degraded == ["a"] and res.skipped == {"graph": ["a"]}
    assert {s.signal for s in res.signals} == {"citation_seeds", "bm25_query"}
    assert res.predictions["a"][:3] == ["Art. 337 Abs. 1 OR", "Art. 337 Abs. 2 OR", "Art. 337 Abs. 3 OR"]


def test_validate_run_writes_metrics_and_table(demo_artifacts, demo_queries, tmp_path):
    cfg = load_config(None, {"runtime.progress": False})
    metrics, _ = validate_run(cfg, Artifacts.from_folder(demo_artifacts, cfg), demo_queries, tmp_path)
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["metrics"]["macro_f1"] == metrics["macro_f1"] and 0 < metrics["macro_f1"] <= 1
    assert (tmp_path / "per_query.csv").read_text().count("\n") == 23


def test_cli_build_run_evaluate_validate(tmp_path, tiny_inputs):
    laws, courts = tiny_inputs
    r = cli("build", "--laws", laws, "--courts", courts, "--out", tmp_path / "art")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "art" / "bm25" / "params.json").is_file()
    q = tmp_path / "q.csv"
    q.write_text('query_id,query,gold_citations\nq1,"Beweislast nach Art. 8 ZGB?",Art. 8 ZGB\n'
                 'q2,"Innert welcher Frist ist die Beschwerde beim Bundesgericht einzureichen?",Art. 100 Abs. 1 BGG\n',
                 encoding="utf-8")
    r = cli("run", "--artifacts", tmp_path / "art", "--queries", q, "--out", tmp_path / "sub.csv",
            "--set", "count.k=1", "--set", "graph.enabled=false")
    assert r.returncode == 0, r.stderr
    assert "2 queries" in r.stdout
    r = cli("evaluate", "--gold", q, "--pred", tmp_path / "sub.csv", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["macro_f1"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0
    r = cli("evaluate", "--gold", q, "--pred", tmp_path / "sub.csv")
    assert "macro_f1" in r.stdout
    r = cli("validate-submission", tmp_path / "sub.csv", "--queries", q, "--artifacts", tmp_path / "art")
    assert r.returncode == 0 and r.stdout.startswith("OK")
    (tmp_path / "bad.csv").write_text("query_id,predicted_citations\nq1,Art. 99 ZGB\n", encoding="utf-8")
    r = cli("validate-submission", tmp_path / "bad.csv", "--queries", q, "--artifacts", tmp_path / "art")
    assert r.returncode == 1 and "query 'q2' is missing" in r.stdout and "not in the corpus" in r.stdout


def test_cli_errors_are_clear(tmp_path, tiny_inputs):
    r = cli("run", "--artifacts", tmp_path / "nothing", "--queries", "q.csv", "--out", tmp_path / "s.csv")
    assert r.returncode == 2 and "artifact 'corpus' not found" in r.stderr
    laws, _ = tiny_inputs
    r = cli("build", "--laws", laws, "--out", tmp_path / "a", "--set", "fusion.nope=1")
    assert r.returncode == 2 and "unknown config key 'fusion.nope'" in r.stderr
    r = cli("config")
    assert r.returncode == 0 and "rrf_k: 60" in r.stdout


def test_cli_names_a_missing_model_folder_in_one_line(tmp_path, demo_artifacts, demo_queries):
    r = cli("run", "--artifacts", demo_artifacts, "--queries", demo_queries, "--out", tmp_path / "s.csv",
            "--set", "semantic.enabled=true", "--set", f"semantic.model={tmp_path / 'bge-m3'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert f"semantic.model: no model folder at {tmp_path / 'bge-m3'}" in r.stderr
    r = cli("run", "--artifacts", demo_artifacts, "--queries", demo_queries, "--out", tmp_path / "s.csv",
            "--set", "fusion.weights={bm25_qurey: 1.0}")
    assert r.returncode == 2 and "did you mean 'bm25_query'" in r.stderr


def test_run_without_an_optional_artifact_is_degraded_and_names_its_dataset(tmp_path, demo_artifacts, demo_queries):
    # the lexical preset wants the dictionary; artifacts without one run without its stage, as the
    # inference notebook does, and the status says so with the fix; --strict refuses in one line
    arts = tmp_path / "art"
    arts.mkdir()
    for part in ("corpus", "bm25"):
        (arts / part).symlink_to(demo_artifacts / part, target_is_directory=True)
    args = ("run", "--artifacts", arts, "--queries", demo_queries, "--config", "lexical", "--out", tmp_path / "s.csv")
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert "DEGRADED" in r.stdout and "dictionary" in r.stdout and "lexrag-dictionary" in r.stdout
    assert (tmp_path / "s.csv").is_file()
    r = cli(*args, "--strict")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "artifact 'dictionary' not found" in r.stderr
    (arts / "bm25").unlink()
    (arts / "bm25").mkdir()  # there but empty: damaged, not missing, so refused even without --strict
    r = cli(*args)
    assert r.returncode == 2 and "bm25" in r.stderr


def test_graph_and_prior_signals_in_the_pipeline(tmp_path, tiny_inputs):
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    train = tmp_path / "train.csv"
    train.write_text("query_id,query,gold_citations\nt1,x,Art. 100 Abs. 1 BGG;Art. 8 ZGB\nt2,y,Art. 100 Abs. 1 BGG\n",
                     encoding="utf-8")
    cfg = load_config(None, {"runtime.progress": False, "prior.enabled": True, "prior.min_count": 1, "graph.enabled": True,
                             "graph.seed_k": 2})
    build_artifacts(cfg, laws, tmp_path / "art", courts=courts, train=train)
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    res = run_pipeline([Query("q", "Wer trägt die Beweislast nach Art. 8 ZGB?")], art, cfg)
    by = {r.signal: [art.corpus.citations[d] for d, _ in r.hits.get("q", [])] for r in res.signals}
    # seeds: Art. 8 ZGB (named) and 5A_800/2019 E. 2. (Beweislast); 5A_800/2019 cites BGE 145 II 32,
    # which PPR brings first, as its two considerations
    assert set(by["ppr"][:2]) == {"BGE 145 II 32 E. 3.1", "BGE 145 II 32 E. 3.2"}
    assert by["siblings"] == []  # neither seed has another document
    assert by["prior_frequent"] == ["Art. 100 Abs. 1 BGG", "Art. 8 ZGB"]  # in 2 and 1 of 2 training gold sets
    assert by["prior_cocited"] == ["Art. 100 Abs. 1 BGG"]  # co-cited with Art. 8 ZGB in t1
    assert set(by) >= {"citation_seeds", "bm25_query", "ppr", "hits_authority", "hits_hub", "coupling",
                       "cocitation", "community", "siblings", "prior_cocited", "prior_frequent"}
    cfg_off = load_config(None, {"runtime.progress": False, "graph.enabled": True, "graph.signals": {"ppr": False}})
    res = run_pipeline([Query("q", "Beweislast nach Art. 8 ZGB")], Artifacts.from_folder(tmp_path / "art", cfg_off), cfg_off)
    assert "ppr" not in {r.signal for r in res.signals} and "hits_hub" in {r.signal for r in res.signals}


def test_a_graph_without_court_edges_is_left_off_and_the_status_says_how_to_get_it(tmp_path, tiny_inputs):
    from lexrag.eval.status import run_status
    from lexrag.pipeline.build import build_artifacts

    laws, _ = tiny_inputs
    cfg = load_config(None, {"runtime.progress": False, "graph.enabled": True})
    build_artifacts(cfg, laws, tmp_path / "art")  # laws only: the graph has no court edges
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    res = run_pipeline([Query("q1", "Treu und Glauben")], art, cfg)
    row = run_status(cfg, art, res).to_dict()["stages"]["graph"]
    assert art.graph is None and row["state"] == "missing" and "no court edges" in row["why"]
    assert row["fix"] == "rebuild the corpus with court_considerations.csv, then the graph"
