#!/usr/bin/env python
"""Benchmark (not a test): what the statute headings cost to build and to search.

  python scripts/bench_headings.py --laws ../shared/data/laws_de.csv --headings ../shared/data/laws_de_headings.csv \
      --queries ../shared/data/lexam_dev.csv [--law-keys ../shared/data/laws_de_citations.txt] [--repeat 3]

Builds the corpus and the BM25 index twice in this process, into a temporary folder: without the
headings file and the BM25 fields of the earlier default (citation, title, text), and with it and
this version's default fields (the heading twice, the path once), alternating ``--repeat`` times
so both meet the same machine load; prints each build's median seconds (corpus, BM25, together)
and their ratio.  Then searches every question of ``--queries`` on each index as the lexical
stage does (the `lexical` preset's query settings, one thread, no score cache), alternating the
two indexes question by question, and prints the median and 90th-percentile milliseconds per
question and their ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import benchkit

BEFORE = ["citation", "title", "text"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laws", default="../shared/data/laws_de.csv")
    ap.add_argument("--headings", default="../shared/data/laws_de_headings.csv")
    ap.add_argument("--law-keys", help="law keys without text (laws_de_citations.txt), as a full build adds them")
    ap.add_argument("--queries", default="../shared/data/lexam_dev.csv")
    ap.add_argument("--repeat", type=int, default=3)
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    for opt, path in (("--laws", args.laws), ("--headings", args.headings), ("--queries", args.queries),
                      ("--law-keys", args.law_keys)):
        if path is not None and not Path(path).is_file():
            ap.error(f"{opt} {path}: not a file")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give 1 or more")
    return benchkit.guarded(lambda: _run(args))


def _run(args) -> int:
    import numpy as np

    from lexrag.config import load_config
    from lexrag.index.corpus import Corpus, build_corpus
    from lexrag.index.lexical import QUERY_DEDUP
    from lexrag.pipeline.build import build_index
    from lexrag.queries import load_queries

    setups = {"without headings": (None, BEFORE), "with headings": (args.headings, load_config("lexical").lexical.fields)}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in setups}
    indexes = {}
    with tempfile.TemporaryDirectory(prefix="lexrag-bench-headings-") as tmp:
        for r in range(args.repeat):
            for name, (heads, fields) in setups.items():
                out = Path(tmp) / f"{name.replace(' ', '_')}-{r}"
                t0 = time.perf_counter()
                build_corpus(out / "corpus", args.laws, law_keys=args.law_keys, headings=heads)
                t1 = time.perf_counter()
                cfg = load_config("lexical", {"lexical.fields": fields, "runtime.progress": False})
                index = build_index("bm25", cfg, out / "corpus", out / "bm25", corpus=Corpus(out / "corpus", lookups=False))
                times[name].append((t1 - t0, time.perf_counter() - t1))
                indexes[name] = (index, cfg.lexical)
        print(f"build over {args.laws} ({len(Corpus(out / 'corpus', lookups=False))} documents), median of {args.repeat}:")
        print("| build | corpus s | BM25 s | together s |\n| --- | --- | --- | --- |")
        total = {}
        for name, ts in times.items():
            c, b = statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)
            total[name] = statistics.median(t[0] + t[1] for t in ts)
            print(f"| {name} | {c:.1f} | {b:.1f} | {total[name]:.1f} |")
        print(f"with / without: {total['with headings'] / total['without headings']:.2f}x")

        texts = [q.text for q in load_queries(args.queries)]
        ms: dict[str, list[float]] = {k: [] for k in indexes}
        for text in texts:
            for name, (index, lc) in indexes.items():
                t0 = time.perf_counter()
                index.search(text, lc.top_k, QUERY_DEDUP, lc.question_weight, cache=False)
                ms[name].append(1000 * (time.perf_counter() - t0))
        print(f"\nBM25 search of the {len(texts)} questions of {args.queries} (one thread, no cache):")
        print("| index | median ms | p90 ms |\n| --- | --- | --- |")
        for name, v in ms.items():
            print(f"| {name} | {np.median(v):.2f} | {np.percentile(v, 90):.2f} |")
        w, wo = ms["with headings"], ms["without headings"]
        print(f"with / without: median {np.median(w) / np.median(wo):.2f}x, p90 {np.percentile(w, 90) / np.percentile(wo, 90):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
