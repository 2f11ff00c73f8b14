#!/usr/bin/env python
"""Benchmark (not a test): the LLM stages on this CPU with a random-weight causal LM.

  python scripts/bench_llm.py [--hidden 64 --layers 2] [--max-new-tokens 64] [--queries demo/queries_demo.csv]

Builds the demo artifacts (lexical + graph) and a Qwen2-style model with random weights and a
tokenizer trained on a few sentences (lexrag.testing), then answers the queries four ways:
without the LLM, with the LLM rewrite live (4-bit NF4 on the CPU, every task generating up to
``--max-new-tokens``), with every LLM stage live (rewrite, verification of ``--verify-depth``
candidates, the agentic loop with ``--rounds`` rounds), and replayed from the cache the live runs
filled.  Prints seconds per stage, model load seconds, LLM calls and tokens per query per LLM
stage, the tiny tokenizer's characters per token (to convert its token counts into a real
tokenizer's), and peak RSS.  Random weights generate
nonsense, so this measures the machinery (prompting, batching, caching, replay), not quality;
GPU projections in the README state their own basis.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import benchkit

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", default=str(ROOT / "demo" / "queries_demo.csv"))
    ap.add_argument("--laws", default=str(ROOT / "demo" / "laws_demo.csv"))
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--verify-depth", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--observe-depth", type=int, default=10)
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("hidden", "layers", "max_new_tokens", "batch_size", "verify_depth", "rounds",
                                         "observe_depth"), files=("queries", "laws"))

    import logging

    logging.basicConfig(level=logging.WARNING)
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries
    from lexrag.testing import make_tiny_llm

    work = Path(tempfile.mkdtemp(prefix="lexrag-bench-llm-"))
    model = make_tiny_llm(work / "tiny-qwen2", hidden=args.hidden, layers=args.layers)
    base = load_config(ROOT / "demo" / "config.yaml", {"runtime.progress": False})
    build_artifacts(base, args.laws, work / "art")
    queries = load_queries(args.queries)
    llm = {"llm.enabled": True, "llm.model": str(model), "llm.device": "cpu", "llm.cache_dir": str(work / "cache"),
           "llm.max_new_tokens": args.max_new_tokens, "llm.batch_size": args.batch_size}
    full = {**llm, "verify.enabled": True, "verify.depth": args.verify_depth, "agent.enabled": True,
            "agent.max_rounds": args.rounds, "agent.observe_depth": args.observe_depth, "agent.threshold": 0.0}
    rows = []
    for name, over in (("no LLM", {}), ("LLM rewrite live", llm), ("all LLM stages live", full),
                       ("all LLM stages replay", {**full, "llm.mode": "replay"})):
        cfg = load_config(ROOT / "demo" / "config.yaml", {"runtime.progress": False, **over})
        t0 = time.perf_counter()
        res = run_pipeline(queries, Artifacts.from_folder(work / "art", cfg), cfg)
        wall = time.perf_counter() - t0
        totals = res.cost_totals()
        n = len(queries)
        per_stage = {st: {k: round(totals.get(st, {}).get(k, 0) / n, 1)
                          for k in ("llm_calls", "prompt_tokens", "gen_tokens", "cache_hits")}
                     for st in ("rewrite", "verify", "agent") if st in totals}
        rounds = [r["round"] for r in res.traces]
        rows.append({"run": name, "queries": n, "wall_s": round(wall, 2),
                     "stage_s": {k: round(v, 3) for k, v in res.timings.items() if k != "total"},
                     "model_load_s": {k: round(v, 2) for k, v in res.model_load_seconds.items()},
                     "per_query": per_stage, "agent_rounds_per_query": round((len(rounds) - rounds.count(0)) / n, 2),
                     "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)})
        print(json.dumps(rows[-1]), flush=True)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    sample = " ".join(open(args.laws, encoding="utf-8").read().splitlines()[1:400])
    print(f"\ntiny tokenizer: {len(sample) / len(tok(sample)['input_ids']):.2f} characters per token on German law text")
    print("\n(calls and tokens: answers generated in this run; answers from the cache count as cache hits)")
    print("\n| run | queries | wall s | rewrite s | verify s | agent s | LLM load s | per query: rewrite calls / prompt tok / gen tok "
          "| verify calls / prompt tok | agent calls / prompt tok / gen tok | cache hits/query | agent rounds/query |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        pq = r["per_query"]
        cell = lambda st, keys: " / ".join(str(pq.get(st, {}).get(k, 0)) for k in keys) if st in pq else "–"  # noqa: E731
        print(f"| {r['run']} | {r['queries']} | {r['wall_s']} | {r['stage_s'].get('rewrite', '–')} | {r['stage_s'].get('verify', '–')} | "
              f"{r['stage_s'].get('agent', '–')} | {r['model_load_s'].get('llm', '–')} | "
              f"{cell('rewrite', ('llm_calls', 'prompt_tokens', 'gen_tokens'))} | {cell('verify', ('llm_calls', 'prompt_tokens'))} | "
              f"{cell('agent', ('llm_calls', 'prompt_tokens', 'gen_tokens'))} | "
              f"{round(sum(v.get('cache_hits', 0) for v in pq.values()), 1)} | {r['agent_rounds_per_query']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
