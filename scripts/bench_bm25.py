#!/usr/bin/env python
"""Benchmark (not a test): corpus build and BM25 build throughput, peak RSS and query latency on
synthetic German legal-like court considerations (lexrag.testing.synthetic; 200-300 words and 3-5
references each) at several corpus sizes.

Each phase runs in its own process so its peak RSS (ru_maxrss) is its own:
  1. write a synthetic court_considerations.csv of N rows (not timed as part of the build);
  2. ``build_corpus`` over it (streamed CSV -> parquet);
  3. ``build_bm25`` over the corpus (the paper's analyzer, fields citation+title+text);
  4. load the index and time 200 queries of 20-60 words (top-100 each);
  5. ``bm25s`` (the reference a researcher would otherwise pick) over the same corpus texts, side
     by side: its own ``tokenize`` (its German stopwords, the same Snowball stemmer) and
     ``BM25().index``, then the same 200 queries; the table gives lexrag's build time and peak RSS
     as a ratio of bm25s's.

  python scripts/bench_bm25.py --sizes 100000 500000 2470000 --work /tmp/lexrag-bench
"""

from __future__ import annotations

import time
from pathlib import Path

import benchkit
import numpy as np
from lexrag.testing.synthetic import TextSampler, write_court_csv


def phase(name: str, work: Path, n: int) -> dict:
    from lexrag.config import load_config

    cfg = load_config(None, {"runtime.progress": False, **benchkit.overrides()})
    if name == "corpus":
        from lexrag.index.corpus import build_corpus

        laws = work / "laws_empty.csv"
        laws.write_text("citation,text,title\n", encoding="utf-8")
        t0 = time.perf_counter()
        build_corpus(work / "art" / "corpus", laws, work / "courts.csv", cfg.corpus)
        dt = time.perf_counter() - t0
        return {"corpus_build_s": dt, "corpus_docs_per_s": n / dt, "corpus_peak_rss_mb": benchkit.peak_rss_mb()}
    if name == "bm25":
        from lexrag.artifacts import corpus_id
        from lexrag.index.corpus import Corpus
        from lexrag.index.bm25_build import build_bm25

        corpus = Corpus(work / "art" / "corpus")
        del corpus.citations, corpus.sources, corpus.parents  # the build needs only the texts
        t0 = time.perf_counter()
        idx = build_bm25(Corpus.iter_texts(corpus, fields=cfg.lexical.fields), work / "art" / "bm25", cfg.lexical,
                         corpus_id=corpus_id(work / "art" / "corpus"))
        dt = time.perf_counter() - t0
        return {"bm25_build_s": dt, "bm25_docs_per_s": n / dt, "bm25_peak_rss_mb": benchkit.peak_rss_mb(),
                "vocab": idx.params["vocab_size"], "nnz": idx.params["nnz"]}
    if name == "query":
        from lexrag.index.lexical import BM25Index

        t0 = time.perf_counter()
        idx = BM25Index.load(work / "art" / "bm25", cfg.lexical)
        load_s = time.perf_counter() - t0
        s = TextSampler(seed=0)  # the corpus vocabulary, a fresh random stream
        s.rng = np.random.default_rng(7)
        rng = np.random.default_rng(3)
        queries = [s.text(int(rng.integers(20, 60))) for _ in range(200)]
        idx.top(idx.query_scores(queries[0], cfg.lexical, cache=False), 100)
        lat = []
        for q in queries:  # scored afresh (cache=False): the time and memory of one scoring, no score vectors kept
            t0 = time.perf_counter()
            idx.top(idx.query_scores(q, cfg.lexical, cache=False), 100)  # with the query settings of the config, as the lexical stage
            lat.append(time.perf_counter() - t0)
        lat_ms = np.array(lat) * 1000
        return {"index_load_s": load_s, "query_ms_median": float(np.median(lat_ms)), "query_ms_p95": float(np.percentile(lat_ms, 95)),
                "query_peak_rss_mb": benchkit.peak_rss_mb()}
    if name == "bm25s":
        import bm25s
        import Stemmer

        from lexrag.index.corpus import Corpus

        corpus = Corpus(work / "art" / "corpus", lookups=False)
        t0 = time.perf_counter()
        texts = [t for batch in corpus.iter_texts(fields=cfg.lexical.fields) for t in batch]  # what lexrag indexes
        read_s = time.perf_counter() - t0
        stemmer = Stemmer.Stemmer("german")
        t0 = time.perf_counter()
        tokens = bm25s.tokenize(texts, stopwords="de", stemmer=stemmer, show_progress=False)
        del texts
        retriever = bm25s.BM25(k1=cfg.lexical.k1, b=cfg.lexical.b, method=cfg.lexical.method)
        retriever.index(tokens, show_progress=False)
        dt = time.perf_counter() - t0
        del tokens
        s = TextSampler(seed=0)
        s.rng = np.random.default_rng(7)
        rng = np.random.default_rng(3)
        queries = [s.text(int(rng.integers(20, 60))) for _ in range(200)]
        lat = []
        for q in queries:
            qt = bm25s.tokenize([q], stopwords="de", stemmer=stemmer, show_progress=False)
            t1 = time.perf_counter()
            retriever.retrieve(qt, k=100, show_progress=False, n_threads=1)
            lat.append(time.perf_counter() - t1)
        return {"bm25s_read_s": read_s, "bm25s_build_s": dt, "bm25s_peak_rss_mb": benchkit.peak_rss_mb(),
                "bm25s_query_ms_median": float(np.median(np.array(lat) * 1000))}
    raise ValueError(name)


def prepare(work: Path, n: int) -> dict:
    t0 = time.perf_counter()
    write_court_csv(work / "courts.csv", n)
    return {"csv_gb": (work / "courts.csv").stat().st_size / 1e9, "generate_s": time.perf_counter() - t0}


def table(rows: list[dict]) -> None:
    print("| docs | corpus build docs/s | corpus peak RSS | BM25 build docs/s | BM25 build s | BM25 peak RSS "
          "| query median ms | query p95 ms | bm25s build s | bm25s peak RSS | bm25s query median ms | time lexrag/bm25s "
          "| memory lexrag/bm25s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['n']:,} | {r['corpus_docs_per_s']:,.0f} | {r['corpus_peak_rss_mb'] / 1024:.2f} GB | "
              f"{r['bm25_docs_per_s']:,.0f} | {r['bm25_build_s']:.0f} | {r['bm25_peak_rss_mb'] / 1024:.2f} GB | "
              f"{r['query_ms_median']:.1f} | {r['query_ms_p95']:.1f} | {r['bm25s_build_s']:.0f} | "
              f"{r['bm25s_peak_rss_mb'] / 1024:.2f} GB | {r['bm25s_query_ms_median']:.1f} | "
              f"{r['bm25_build_s'] / r['bm25s_build_s']:.2f} | {r['bm25_peak_rss_mb'] / r['bm25s_peak_rss_mb']:.2f} |")


def main() -> int:
    return benchkit.main(__file__, __doc__, phase, ("corpus", "bm25", "query", "bm25s"), [100_000, 500_000, 2_470_000],
                         "/tmp/lexrag-bench", table, prepare)


if __name__ == "__main__":
    raise SystemExit(main())
