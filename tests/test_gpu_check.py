"""The GPU check (`python -m lexrag.cli.gpu_check`, `scripts/gpu_check.py`) in its reduced CPU mode: the
GPU paths' code (fp32 and 4-bit NF4 generation and P(Yes), encoder, reranker, a cuda:1 setting on
a machine without it, the whole pipeline with three models resident and a simulated
out-of-memory that the pipeline must contain) runs through lexrag's own loaders with tiny random
models, and the check reports each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_check_runs_in_cpu_mode(tmp_path):
    out = tmp_path / "results" / "gpu_check.json"  # a folder that is not there yet is made
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--cpu", "--json", str(out), "--prompts", "4"],
                       capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert not list(tmp.glob("lexrag-*")), "the check leaves its tiny models behind"
    assert r.stdout.strip().splitlines()[-1].startswith("OK: 6 checks on the CPU")
    doc = json.loads(out.read_text(encoding="utf-8"))
    checks = {c["check"]: c for c in doc["results"]}
    assert set(checks) == {"llm fp32 (cpu)", "llm nf4", "encoder", "reranker", "cuda:1 on this machine",
                           "pipeline, three models resident"}
    assert all(c["ok"] for c in checks.values())
    assert checks["llm nf4"]["gen_tok_per_s"] > 0 and checks["encoder"]["items_per_s"] > 0
    assert checks["cuda:1 on this machine"]["resolved"] == "cpu"
    pipe = checks["pipeline, three models resident"]
    assert pipe["faiss"] == "cpu" and pipe["rerank_calls"] > 1 and {"rewrite", "dense", "rerank", "verify"} <= set(pipe["stages_s"])


def test_a_json_path_that_cannot_take_the_results_is_refused_before_the_checks(tmp_path):
    import subprocess
    import sys

    (tmp_path / "outside.json").write_text("mine")
    (tmp_path / "link.json").symlink_to(tmp_path / "outside.json")
    for target, said in ((tmp_path, "is a folder; give a file name"), (tmp_path / "link.json", "is a link")):
        r = subprocess.run([sys.executable, "-m", "lexrag.cli.gpu_check", "--cpu", "--json", str(target)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and said in r.stderr and "results" not in r.stdout, r.stderr[-400:]
    assert (tmp_path / "outside.json").read_text() == "mine"
