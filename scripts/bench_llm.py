#!/usr/bin/env python
"""Benchmark (not a test): the LLM rewrite path on this CPU with a random-weight causal LM.

  python scripts/bench_llm.py [--hidden 64 --layers 2] [--max-new-tokens 64] [--queries demo/queries_demo.csv]

Builds the demo artifacts (lexical + graph) and a Qwen2-style model with random weights and a
tokenizer trained on a few sentences (tests/tinymodels.py), then answers the queries three ways:
without the LLM, with it live (4-bit NF4 on the CPU, every task generating up to
``--max-new-tokens``), and replayed from the cache the live run filled.  Prints seconds per stage,
model load seconds, LLM calls and tokens per query, and peak RSS.  Random weights generate
nonsense, so this measures the machinery (prompting, batching, caching, replay), not quality;
GPU projections in the README state their own basis.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny-model builder the tests use


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", default=str(ROOT / "demo" / "queries_demo.csv"))
    ap.add_argument("--laws", default=str(ROOT / "demo" / "laws_demo.csv"))
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)
    from lexrag.config import load_config
    from lexrag.index.build import build_artifacts
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries
    from tinymodels import make_tiny_llm

    work = Path(tempfile.mkdtemp(prefix="lexrag-bench-llm-"))
    model = make_tiny_llm(work / "tiny-qwen2", hidden=args.hidden, layers=args.layers)
    base = load_config(ROOT / "demo" / "config.yaml", {"runtime.progress": False})
    build_artifacts(base, args.laws, work / "art")
    queries = load_queries(args.queries)
    llm = {"llm.enabled": True, "llm.model": str(model), "llm.device": "cpu", "llm.cache_dir": str(work / "cache"),
           "llm.max_new_tokens": args.max_new_tokens, "llm.batch_size": args.batch_size}
    rows = []
    for name, over in (("no LLM", {}), ("LLM live", llm), ("LLM replay", {**llm, "llm.mode": "replay"})):
        cfg = load_config(ROOT / "demo" / "config.yaml", {"runtime.progress": False, **over})
        t0 = time.perf_counter()
        res = run_pipeline(queries, Artifacts.load(work / "art", cfg), cfg)
        wall = time.perf_counter() - t0
        cost = res.cost_totals().get("rewrite", {})
        n = len(queries)
        rows.append({"run": name, "queries": n, "wall_s": round(wall, 2),
                     "stage_s": {k: round(v, 3) for k, v in res.timings.items() if k != "total"},
                     "model_load_s": {k: round(v, 2) for k, v in res.model_load_seconds.items()},
                     "llm_calls_per_query": round(cost.get("llm_calls", 0) / n, 2),
                     "prompt_tokens_per_query": round(cost.get("prompt_tokens", 0) / n, 1),
                     "gen_tokens_per_query": round(cost.get("gen_tokens", 0) / n, 1),
                     "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)})
        print(json.dumps(rows[-1]), flush=True)
    print("\n| run | queries | wall s | rewrite s | LLM load s | LLM calls/query | prompt tok/query | generated tok/query |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['run']} | {r['queries']} | {r['wall_s']} | {r['stage_s'].get('rewrite', 0)} | "
              f"{r['model_load_s'].get('llm', 0)} | {r['llm_calls_per_query']} | {r['prompt_tokens_per_query']} | "
              f"{r['gen_tokens_per_query']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
