#!/usr/bin/env python
"""Benchmark (not a test): seconds per question of a long run against a short one, over built
artifacts (corpus, bm25, graph; e.g. the folder bench_scale.py --keep leaves), with the CPU
stages that read a question's BM25 scores switched on (BM25, statutes, articles, feedback,
graph). A run of more questions than the BM25 index's score cache holds (512 MB of vectors:
50 at 2.65M documents) scored each question again for every such stage while the walk went
stage by stage; the walk now goes chunk by chunk through them when the run has no time budget.

  python scripts/bench_walk.py --artifacts /tmp/lexrag-scale/2476315/art --questions 40 642 [--order stage]

Each run is its own process (nothing cached carries over); it prints seconds per question, the
BM25 scorings and the peak RSS. ``--order stage`` walks stage by stage (as a run with a time
budget does), for comparison.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import benchkit  # beside this script


def one(artifacts: Path, n: int, order: str) -> dict:
    from lexrag.config import load_config
    from lexrag.artifacts import corpus_id
    from lexrag.index.corpus import Corpus
    from lexrag.index.graph import CitationGraph
    from lexrag.index.lexical import BM25Index
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.pipeline import run as walk_module
    from lexrag.queries import Query
    from lexrag.testing.synthetic import TextSampler

    cfg = load_config(None, {"runtime.progress": False, "statutes.enabled": True, "articles.enabled": True,
                             "feedback.enabled": True, "graph.enabled": True, "count.method": "elbow"})
    t0 = time.perf_counter()
    corpus = Corpus(artifacts / "corpus")
    cid = corpus_id(artifacts / "corpus")
    bm25 = BM25Index.load(artifacts / "bm25", cfg.lexical, corpus_id=cid)
    graph = CitationGraph.load(artifacts / "graph", len(corpus), cid, cfg.graph.resolutions)
    art = Artifacts(corpus=corpus, bm25=bm25, graph=graph, prior=None)
    load_s = time.perf_counter() - t0
    if order == "stage":  # as a run with a time budget walks
        chunked = walk_module.call_order
        walk_module.call_order = lambda stages, n_, size, by_chunk: chunked(stages, n_, size, False)
    scorings = [0]
    real = bm25._accumulate
    bm25._accumulate = lambda w: scorings.__setitem__(0, scorings[0] + 1) or real(w)
    s = TextSampler(seed=5)
    qs = [Query(f"q{i}", s.text(250) + " Art. 41 OR") for i in range(n)]
    t1 = time.perf_counter()
    res = run_pipeline(qs, art, cfg)
    run_s = time.perf_counter() - t1
    return {"questions": n, "order": order, "load_s": round(load_s, 1), "run_s": round(run_s, 1),
            "s_per_question": round(run_s / n, 3), "bm25_scorings": scorings[0], "cache_vectors": bm25.cache_size,
            "peak_rss_gb": round(benchkit.peak_rss_mb() / 1024, 2),
            "stage_s": {k: round(v, 1) for k, v in res.timings.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", required=True, type=Path)
    ap.add_argument("--questions", nargs="*", type=int, default=[40, 642])
    ap.add_argument("--order", choices=["chunk", "stage"], default="chunk")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    if not (args.artifacts / "corpus").is_dir():
        ap.error(f"--artifacts {args.artifacts}: no corpus/ there (build the artifacts first: python -m lexrag build ...)")
    if any(n < 1 for n in args.questions) or not args.questions:
        ap.error("--questions: give question counts of 1 or more")
    if args.one:
        print(json.dumps(one(args.artifacts, args.one, args.order)))
        return 0
    rows = []
    for n in args.questions:
        out = subprocess.run([sys.executable, __file__, "--artifacts", str(args.artifacts), "--order", args.order,
                              "--one", str(n)], capture_output=True, text=True)
        if out.returncode:  # the child's own line, and its exit code (2: an error the user can fix)
            print(out.stderr.strip(), file=sys.stderr)
            return out.returncode
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print("| questions | walk | s/question | BM25 scorings | score cache (vectors) | peak RSS GB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['questions']} | {r['order']} | {r['s_per_question']} | {r['bm25_scorings']} | {r['cache_vectors']} "
              f"| {r['peak_rss_gb']} |")
    if len(rows) > 1:
        print(f"ratio s/question {rows[-1]['questions']} vs {rows[0]['questions']}: "
              f"{rows[-1]['s_per_question'] / rows[0]['s_per_question']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
