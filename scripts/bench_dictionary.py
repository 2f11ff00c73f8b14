#!/usr/bin/env python
"""Benchmark (not a test): what the dictionary artifact costs to build and to translate with.

  python scripts/bench_dictionary.py [--dictionary /usr/share/trans/de-en] [--queries ../shared/data/val.csv] [--repeat 20] \
      [--artifacts ARTIFACTS]

Builds the artifact from Ding's file into a temporary folder (timed), loads it (timed), then
translates every English question of ``--queries`` ``--repeat`` times in one thread and prints
questions per second, senses weighted uniformly (what needs no index).  With ``--artifacts`` (a
folder with the BM25 index) the same questions are translated as the `lexical` preset does
(its ``dictionary.weighting`` and ``dictionary.compounds``, which read that index), and a freshly
loaded index and dictionary are timed apart on their first pass: a word's senses and indexed terms
are looked up once and then kept, so the repeats run faster than a run's new questions do.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import benchkit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dictionary", default="/usr/share/trans/de-en")
    ap.add_argument("--queries", default="../shared/data/val.csv")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--artifacts", help="an artifacts folder with bm25/: also time the translation as the lexical preset makes it")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    for opt, path in (("--dictionary", args.dictionary), ("--queries", args.queries)):
        if not Path(path).is_file():
            ap.error(f"{opt} {path}: not a file" + (" (Debian: apt-get install trans-de-en)" if opt == "--dictionary" else ""))
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give 1 or more")
    if args.artifacts:
        benchkit.require(ap, args, within=[("artifacts", "bm25")])
    from lexrag.index.dictionary import Dictionary, build_dictionary
    from lexrag.index.language import is_english
    from lexrag.queries import load_queries

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        build_dictionary(args.dictionary, Path(tmp) / "dictionary")
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        d = Dictionary.load(Path(tmp) / "dictionary")
        t_load = time.perf_counter() - t0
    texts = [q.text for q in load_queries(args.queries) if is_english(q.text)]

    def rate(d, repeat: int, **kw) -> str:
        t0 = time.perf_counter()
        for _ in range(repeat):
            for t in texts:
                d.translate(t, **kw)
        took = time.perf_counter() - t0
        return f"{len(texts) * repeat} questions in {took:.2f} s: {len(texts) * repeat / took:.0f} questions/s on one thread"

    words = sum(len(t.split()) for t in texts) / max(len(texts), 1)
    print(f"build {t_build:.1f} s ({len(d.entries):,} English keys), load {t_load:.1f} s; translate (mean {words:.0f} "
          f"words a question): {rate(d, args.repeat)}")
    if args.artifacts:
        from lexrag.config import load_config
        from lexrag.index.lexical import BM25Index

        cfg = load_config("lexical")
        shipped = {"weighting": cfg.dictionary.weighting, "compounds": cfg.dictionary.compounds}
        index = BM25Index.load(Path(args.artifacts) / "bm25", cfg.lexical)
        d = Dictionary(d.entries, d.doc)  # the same entries, nothing looked up yet
        name = f"weighting {shipped['weighting']}" + (" + compounds" if shipped["compounds"] else "")
        print(f"as the lexical preset ({name}), first pass: {rate(d, 1, index=index, **shipped)}")
        print(f"as the lexical preset ({name}), then: {rate(d, args.repeat, index=index, **shipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
