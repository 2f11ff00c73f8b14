#!/usr/bin/env python
"""Benchmark (not a test): citation-graph build and graph-signal latency on synthetic court
considerations (lexrag.testing.synthetic: several considerations per decision, 3-5 references each,
power-law popularity of the cited authorities, ~250 words).

Phases run in their own processes so each peak RSS (ru_maxrss) is its own:
  1. write laws (synthetic paragraphs) and N court considerations as CSV;
  2. build the corpus artifact;
  3. build the graph (reference extraction + Leiden at three resolutions);
  4. load corpus and graph, then time all graph signals together for 200 queries, each seeded
     by 20 random documents with decreasing scores (BM25 preferences not used).

  python scripts/bench_graph.py --sizes 100000 2470000 --work /tmp/lexrag-graph-bench
"""

from __future__ import annotations

import time
from pathlib import Path

import benchkit
import numpy as np


def phase(name: str, work: Path, n: int) -> dict:
    from lexrag.config import load_config

    cfg = load_config(None, {"runtime.progress": False, **benchkit.overrides()})
    if name == "generate":
        from lexrag.testing.synthetic import write_court_csv, write_laws_csv

        t0 = time.perf_counter()
        laws = write_laws_csv(work / "laws.csv", n_articles=max(n // 50, 500))
        write_court_csv(work / "courts.csv", n, laws=laws)
        return {"generate_s": time.perf_counter() - t0, "law_paragraphs": len(laws)}
    if name == "corpus":
        from lexrag.index.corpus import build_corpus

        t0 = time.perf_counter()
        build_corpus(work / "art" / "corpus", work / "laws.csv", work / "courts.csv", cfg.corpus)
        return {"corpus_build_s": time.perf_counter() - t0, "corpus_peak_rss_mb": benchkit.peak_rss_mb()}
    if name == "graph":
        from lexrag.pipeline.build import build_index

        t0 = time.perf_counter()
        g = build_index("graph", cfg, work / "art" / "corpus", work / "art" / "graph")
        return {"graph_build_s": time.perf_counter() - t0, "graph_peak_rss_mb": benchkit.peak_rss_mb(), "nodes": g.n,
                "edges": int(g.adj.nnz), "references": g.params["n_references"], "communities": g.params["communities"],
                "graph_build_parts_s": g.build_seconds}
    if name == "signals":
        from lexrag.artifacts import corpus_id
        from lexrag.index.corpus import Corpus
        from lexrag.index.graph import CitationGraph
        from lexrag.pipeline import Artifacts
        from lexrag.queries import QueryState
        from lexrag.stages.base import Context
        from lexrag.stages.graph import GraphSignals

        t0 = time.perf_counter()
        corpus = Corpus(work / "art" / "corpus")
        g = CitationGraph.load(work / "art" / "graph", len(corpus), corpus_id(work / "art" / "corpus"))
        load_s = time.perf_counter() - t0
        art = Artifacts(corpus=corpus, bm25=None, graph=g, prior=None)
        ctx = Context(cfg, art)
        rng = np.random.default_rng(0)
        court = np.flatnonzero(np.asarray([s != "law" for s in corpus.sources]))
        lat = []
        for i in range(201):
            docs = rng.choice(court, size=20, replace=False)
            seeds = [(int(d), 1.0 / (r + 60)) for r, d in enumerate(docs)]
            t1 = time.perf_counter()
            rankings = list(GraphSignals.query_signals(QueryState(f"q{i}", "x"), seeds, ctx))
            if i:  # the first query warms caches (row-normalised matrix, community member lists)
                lat.append(time.perf_counter() - t1)
        lat_ms = np.array(lat) * 1000
        return {"graph_load_s": load_s, "signals_ms_median": float(np.median(lat_ms)), "signals_ms_p95": float(np.percentile(lat_ms, 95)),
                "signals_peak_rss_mb": benchkit.peak_rss_mb(), "signals": sorted(name for name, _ in rankings)}
    raise ValueError(name)


def table(rows: list[dict]) -> None:
    print("| considerations | nodes | edges | graph build s (refs + Leiden) | graph build peak RSS | signals median ms | signals p95 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        parts = r["graph_build_parts_s"]
        print(f"| {r['n']:,} | {r['nodes']:,} | {r['edges']:,} | "
              f"{r['graph_build_s']:.0f} ({parts['references']:.0f} + {parts['leiden']:.0f}) | "
              f"{r['graph_peak_rss_mb'] / 1024:.2f} GB | {r['signals_ms_median']:.1f} | {r['signals_ms_p95']:.1f} |")


def main() -> int:
    return benchkit.main(__file__, __doc__, phase, ("generate", "corpus", "graph", "signals"), [100_000, 2_470_000],
                         "/tmp/lexrag-graph-bench", table)


if __name__ == "__main__":
    raise SystemExit(main())
