import json
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
REQUIRED = {"01_build_corpus", "02_build_bm25", "03_build_graph", "04_build_embeddings", "inference", "validation"}


def test_required_notebooks_exist():
    assert REQUIRED <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_in_sync(py):
    ipynb = py.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{ipynb.name} missing: run `make notebooks`"
    a = jupytext.read(py)
    b = jupytext.read(ipynb)
    cells = lambda nb: [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]
    assert cells(a) == cells(b), f"{py.name} and {ipynb.name} differ: run `make notebooks`"
    assert b.metadata.get("kernelspec", {}).get("name") == "python3"


def _papermill(nb, out, **params):
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(nb), str(out)]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
def test_validation_notebook_runs_on_demo(tmp_path, demo_artifacts, demo_queries):
    _papermill(ROOT / "notebooks" / "validation.ipynb", tmp_path / "out.ipynb",
               queries=demo_queries, artifacts_dir=demo_artifacts, out_dir=tmp_path / "val",
               config_path=ROOT / "demo" / "config.yaml", ablation=True)
    metrics = json.loads((tmp_path / "val" / "metrics.json").read_text())["metrics"]
    assert metrics["n_queries"] == 22 and metrics["recall@10"] > 0.5
    assert (tmp_path / "val" / "per_query.csv").is_file()
    import csv

    rows = {r["run"]: r for r in csv.DictReader(open(tmp_path / "val" / "ablation.csv", encoding="utf-8"))}
    assert set(rows) == {"full", "without seeds", "without lexical", "without graph"}
    assert float(rows["full"]["macro_f1"]) == pytest.approx(metrics["macro_f1"])
    # without BM25 only the questions that name their provisions are answered
    assert float(rows["without lexical"]["recall@100"]) < float(rows["full"]["recall@100"])
    assert (tmp_path / "val" / "ablation.png").stat().st_size > 1000


@pytest.mark.slow
def test_build_and_inference_notebooks(tmp_path, demo_laws, demo_queries):
    art = tmp_path / "art"
    _papermill(ROOT / "notebooks" / "01_build_corpus.ipynb", tmp_path / "1.ipynb", laws=demo_laws, out_dir=art)
    _papermill(ROOT / "notebooks" / "02_build_bm25.ipynb", tmp_path / "2.ipynb", artifacts_dir=art)
    _papermill(ROOT / "notebooks" / "03_build_graph.ipynb", tmp_path / "g.ipynb", artifacts_dir=art)
    _papermill(ROOT / "notebooks" / "inference.ipynb", tmp_path / "3.ipynb", artifacts_dir=art,
               queries=demo_queries, out_path=tmp_path / "submission.csv", config_path="lexical")
    lines = (tmp_path / "submission.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query_id,predicted_citations" and len(lines) == 23


@pytest.mark.slow
def test_embeddings_notebook_builds_and_resumes(tmp_path, demo_laws):
    sys.path.insert(0, str(ROOT / "tests"))
    from tinymodels import make_tiny_encoder

    enc = make_tiny_encoder(tmp_path / "enc")
    art = tmp_path / "art"
    _papermill(ROOT / "notebooks" / "01_build_corpus.ipynb", tmp_path / "1.ipynb", laws=demo_laws, out_dir=art)
    overrides = f"overrides: {{semantic.model: '{enc}', semantic.device: cpu, semantic.shard_size: 3000, semantic.max_seq: 64}}"
    for max_shards, expect in ((1, "incomplete"), ("None", "complete")):
        args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "04_build_embeddings.ipynb"),
                str(tmp_path / "4.ipynb"), "-p", "artifacts_dir", str(art), "-y", overrides, "-p", "max_shards", str(max_shards)]
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads((tmp_path / "4.ipynb").read_text())
        text = "".join("".join(o.get("text", "")) for c in out["cells"] for o in c.get("outputs", []))
        assert f"embeddings {expect}" in text
    assert len(list((art / "embeddings").glob("shard_*.npy"))) == 3
