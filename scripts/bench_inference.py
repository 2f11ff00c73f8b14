#!/usr/bin/env python
"""Benchmark (not a test): the inference notebook's own process at scale, every artifact loaded.

  python scripts/bench_scale.py --sizes 2476315 --keep --work /tmp/lexrag-scale   # builds WORK/2476315/art
  python scripts/bench_inference.py --work /tmp/lexrag-scale/2476315 [--questions 40] [--index flat]
  python scripts/bench_inference.py --work ... --repo /tmp/lexrag-old              # another checkout, for before/after

Over the artifacts bench_scale.py left under WORK/art (corpus, bm25, graph, embeddings of its
random 1024-d encoder) it adds the prior (built from ``train_dev.csv`` of the data folder) and tiny
random models for the reranker and the LLM (``lexrag.testing``), writes WORK/test.csv of
synthetic questions, and runs ``notebooks/inference.ipynb`` of ``--repo`` under papermill with the
kaggle preset (every stage; models on the CPU, the LLM without quantization and at most 32
generated tokens a call), inside
``/usr/bin/time -v``.  The package is imported from ``--repo``'s ``kernel_src`` (``PYTHONPATH``).

It prints one JSON object and a table: the kernel's memory as the notebook's summary records it
(the peak resident set, and at the end its anonymous and file pages), what each artifact load
took and added, the maximum resident set over the process tree as ``/usr/bin/time`` reports it
(the papermill kernel is the largest process in it), the notebook's wall time, seconds per stage
and the run status.  Models here are tiny: on Kaggle the LLM, the encoder and the reranker sit on
the GPUs, so their host memory is not what this measures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchkit

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def prepare(work: Path, n_questions: int, data: Path) -> dict[str, Path]:
    """The prior, the tiny reranker and LLM, the questions (each made once per WORK)."""
    from lexrag.testing.synthetic import TextSampler
    from lexrag.testing import make_tiny_llm, make_tiny_reranker

    from lexrag.index.prior import build_prior

    art = work / "art"
    for need in ("corpus", "bm25", "graph", "embeddings"):
        if not (art / need / "params.json").is_file():
            raise SystemExit(f"{art / need}: not built; run scripts/bench_scale.py --keep (its phases up to embeddings) first")
    if not (art / "prior" / "params.json").is_file():
        build_prior(data / "train_dev.csv", art / "prior")
    models = work / "models"
    if not (models / "reranker" / "config.json").is_file():
        make_tiny_reranker(models / "reranker")
    if not (models / "llm" / "config.json").is_file():
        make_tiny_llm(models / "llm")
    questions = work / f"test_{n_questions}.csv"
    if not questions.is_file():
        s = TextSampler(seed=5)
        import csv

        with open(questions, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["query_id", "query"])
            for i in range(n_questions):
                w.writerow([f"q{i}", f"Under which conditions is the claim admissible? {s.text(120)} Art. 41 OR"])
    return {"art": art, "encoder": Path((work / "encoder_path.txt").read_text().strip()), "reranker": models / "reranker",
            "llm": models / "llm", "questions": questions}


def run_notebook(repo: Path, parts: dict[str, Path], index: str, out: Path) -> dict:
    overrides = {"semantic.model": str(parts["encoder"]), "semantic.device": "cpu", "semantic.index": index,
                 "rerank.model": str(parts["reranker"]), "rerank.device": "cpu",
                 "llm.model": str(parts["llm"]), "llm.device": "cpu", "llm.quantization": "none",
                 "llm.max_new_tokens": 32,  # a random tiny model writes noise: its length costs time, not memory
                 "llm.cache_dir": str(out / "llm_cache"), "runtime.progress": False}
    jupyter = Path(tempfile.mkdtemp(prefix="lexrag-jupyter-"))
    env = {**os.environ, "PYTHONPATH": str(repo / "kernel_src"), "HF_HUB_OFFLINE": "1", "CI": "true",
           "JUPYTER_DATA_DIR": str(jupyter / "data"), "JUPYTER_CONFIG_DIR": str(jupyter / "config"),
           "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"), "IPYTHONDIR": str(jupyter / "ipython"),
           "MPLCONFIGDIR": str(jupyter / "mpl")}
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "papermill", "-k", "python3", "--log-output",
           str(repo / "notebooks" / "inference.ipynb"), str(out / "inference.ipynb"),
           "-p", "config_path", "kaggle", "-p", "queries", str(parts["questions"]),
           "-p", "artifacts_dir", str(parts["art"]), "-p", "out_path", str(out / "submission.csv"),
           "-y", json.dumps({"overrides": overrides})]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out)
    finally:  # Jupyter's state for this run only
        shutil.rmtree(jupyter, ignore_errors=True)
    wall = time.perf_counter() - t0
    (out / "papermill.log").write_text(p.stdout + p.stderr, encoding="utf-8")
    if p.returncode != 0:
        raise SystemExit(f"papermill failed ({p.returncode}); see {out / 'papermill.log'}:\n{p.stderr[-3000:]}")
    tree_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return {"wall_s": round(wall, 1), "tree_max_rss_gb": round(tree_kb / 2**20, 2), "summary": notebook_summary(out / "inference.ipynb")}


def notebook_summary(path: Path) -> dict:
    """The summary the notebook printed (its JSON) and the last cell's status lines."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    texts = ["".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
             if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    summary = next((json.loads(t) for t in texts if t.lstrip().startswith("{")), {})
    summary["last_output"] = texts[-1] if texts else ""
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="a bench_scale.py size folder (holding art/ and encoder_path.txt)")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--index", default="flat", choices=["flat", "ivfpq"])
    ap.add_argument("--repo", default=str(ROOT), help="the checkout whose notebook and package run (default: this one)")
    ap.add_argument("--data", default=str(DATA), help="the folder holding train_dev.csv (for the prior)")
    ap.add_argument("--json", help="append the result to this JSON-lines file")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("questions",), within=[("work", "art")], outputs=("json",))
    work, repo = Path(args.work).resolve(), Path(args.repo).resolve()
    parts = prepare(work, args.questions, Path(args.data))
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    out = work / f"nb_{commit}{'+' if dirty else ''}_{args.index}_{args.questions}_{int(time.time())}"
    out.mkdir()
    r = run_notebook(repo, parts, args.index, out)
    s = r.pop("summary")
    m = s.get("measured", {})
    row = {"repo": str(repo), "commit": commit + ("+" if dirty else ""), "index": args.index, "questions": args.questions,
           "docs": None, **r, "kernel_memory_gb": m.get("host_memory_gb"), "loads": m.get("loads"),
           "stage_anon_gb_added": {k: v["anon_gb_added"] for k, v in m.get("stages", {}).items() if "anon_gb_added" in v},
           "load_s": s.get("load_s"), "seconds": s.get("seconds"), "status": s.get("status"), "out": str(out)}
    try:
        row["docs"] = json.loads((parts["art"] / "corpus" / "params.json").read_text())["n_docs"]
    except (OSError, KeyError, ValueError):
        pass
    print(json.dumps(row))
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    km = row["kernel_memory_gb"] or {}
    docs = f"{row['docs']:,}" if row["docs"] else "?"
    print(f"\n{docs} documents, {args.questions} questions, {args.index} index, {row['commit']}: "
          f"status {row['status']}, notebook {row['wall_s']} s (artifact load {row['load_s']} s)")
    print("| measure | GB |\n| --- | --- |")
    print(f"| max RSS over the process tree (/usr/bin/time -v) | {row['tree_max_rss_gb']} |")
    for k, label in (("peak", "kernel peak resident (VmHWM, file pages included)"), ("anon", "kernel anonymous at the end"),
                     ("file", "kernel file pages at the end (memory maps)")):
        if k in km:
            print(f"| {label} | {km[k]} |")
    for name, v in (row["loads"] or {}).items():
        print(f"| load {name}: {v['s']} s | {v.get('anon_gb', 0):+.2f} anonymous, {v.get('file_gb', 0):+.2f} file |")
    for name, gb in row["stage_anon_gb_added"].items():
        if abs(gb) >= 0.05:
            print(f"| stage {name}: {row['seconds'].get(name)} s | {gb:+.2f} anonymous left resident |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
