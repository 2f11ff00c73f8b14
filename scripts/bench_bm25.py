#!/usr/bin/env python
"""Benchmark (not a test): corpus build and BM25 build throughput, peak RSS and query latency on
synthetic German legal-like court considerations (lexrag.synthetic; 200-300 words and 3-5
references each) at several corpus sizes.

Each phase runs in its own process so its peak RSS (ru_maxrss) is its own:
  1. write a synthetic court_considerations.csv of N rows (not timed as part of the build);
  2. ``build_corpus`` over it (streamed CSV -> parquet);
  3. ``build_bm25`` over the corpus (the paper's analyzer, fields citation+title+text);
  4. load the index and time 200 queries of 20-60 words (top-100 each).

  python scripts/bench_bm25.py --sizes 100000 500000 2470000 --work /tmp/lexrag-bench
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lexrag.synthetic import TextSampler, write_court_csv

def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase(name: str, work: Path, n: int) -> dict:
    from lexrag.config import load_config

    cfg = load_config(None, {"runtime.progress": False})
    if name == "corpus":
        from lexrag.corpus import build_corpus

        laws = work / "laws_empty.csv"
        laws.write_text("citation,text,title\n", encoding="utf-8")
        t0 = time.perf_counter()
        build_corpus(work / "art" / "corpus", laws, work / "courts.csv", cfg.corpus)
        dt = time.perf_counter() - t0
        return {"corpus_build_s": dt, "corpus_docs_per_s": n / dt, "corpus_peak_rss_mb": peak_rss_mb()}
    if name == "bm25":
        from lexrag.corpus import Corpus
        from lexrag.lexical import build_bm25
        from lexrag.pipeline import corpus_id

        corpus = Corpus(work / "art" / "corpus")
        del corpus.citations, corpus.sources, corpus.parents  # the build needs only the texts
        t0 = time.perf_counter()
        idx = build_bm25(Corpus.iter_texts(corpus, fields=cfg.lexical.fields), work / "art" / "bm25", cfg.lexical,
                         corpus_id=corpus_id(work / "art" / "corpus"))
        dt = time.perf_counter() - t0
        return {"bm25_build_s": dt, "bm25_docs_per_s": n / dt, "bm25_peak_rss_mb": peak_rss_mb(),
                "vocab": idx.params["vocab_size"], "nnz": idx.params["nnz"]}
    if name == "query":
        from lexrag.lexical import BM25Index

        t0 = time.perf_counter()
        idx = BM25Index.load(work / "art" / "bm25", cfg.lexical)
        load_s = time.perf_counter() - t0
        s = TextSampler(seed=0)  # the corpus vocabulary, a fresh random stream
        s.rng = np.random.default_rng(7)
        rng = np.random.default_rng(3)
        queries = [s.text(int(rng.integers(20, 60))) for _ in range(200)]
        idx.search(queries[0], 100)
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            idx.search(q, 100)
            lat.append(time.perf_counter() - t0)
        lat_ms = np.array(lat) * 1000
        return {"index_load_s": load_s, "query_ms_median": float(np.median(lat_ms)), "query_ms_p95": float(np.percentile(lat_ms, 95)),
                "query_peak_rss_mb": peak_rss_mb()}
    raise ValueError(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=int, default=[100_000, 500_000, 2_470_000])
    ap.add_argument("--work", default="/tmp/lexrag-bench")
    ap.add_argument("--json", help="append results to this JSON-lines file")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.work), args.n)))
        return 0
    rows = []
    for n in args.sizes:
        work = Path(args.work) / str(n)
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        write_court_csv(work / "courts.csv", n)
        row = {"n_docs": n, "csv_gb": (work / "courts.csv").stat().st_size / 1e9, "generate_s": time.perf_counter() - t0}
        for ph in ("corpus", "bm25", "query"):
            out = subprocess.run([sys.executable, __file__, "--phase", ph, "--work", str(work), "--n", str(n)],
                                 capture_output=True, text=True, env={**os.environ, "CI": "true"})
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            row.update(json.loads(out.stdout.strip().splitlines()[-1]))
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        if not args.keep:
            import shutil

            shutil.rmtree(work)
    print("| docs | corpus build docs/s | corpus peak RSS | BM25 build docs/s | BM25 build s | BM25 peak RSS | query median ms | query p95 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['n_docs']:,} | {r['corpus_docs_per_s']:,.0f} | {r['corpus_peak_rss_mb'] / 1024:.2f} GB | "
              f"{r['bm25_docs_per_s']:,.0f} | {r['bm25_build_s']:.0f} | {r['bm25_peak_rss_mb'] / 1024:.2f} GB | "
              f"{r['query_ms_median']:.1f} | {r['query_ms_p95']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
