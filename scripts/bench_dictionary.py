#!/usr/bin/env python
"""Benchmark (not a test): what the dictionary artifact costs to build and to translate with.

  python scripts/bench_dictionary.py [--dictionary /usr/share/trans/de-en] [--queries ../shared/data/val.csv] [--repeat 20]

Builds the artifact from Ding's file into a temporary folder (timed), loads it (timed), then
translates every English question of ``--queries`` ``--repeat`` times in one thread and prints
questions per second.
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
    from lexrag.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    for opt, path in (("--dictionary", args.dictionary), ("--queries", args.queries)):
        if not Path(path).is_file():
            ap.error(f"{opt} {path}: not a file" + (" (Debian: apt-get install trans-de-en)" if opt == "--dictionary" else ""))
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give 1 or more")
    from lexrag.index.dictionary import Dictionary, build_dictionary, is_english
    from lexrag.queries import load_queries

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        build_dictionary(args.dictionary, Path(tmp) / "dictionary")
        t_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        d = Dictionary.load(Path(tmp) / "dictionary")
        t_load = time.perf_counter() - t0
    texts = [q.text for q in load_queries(args.queries) if is_english(q.text)]
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        for t in texts:
            d.translate(t)
    t_tr = time.perf_counter() - t0
    n = len(texts) * args.repeat
    words = sum(len(t.split()) for t in texts) / max(len(texts), 1)
    print(f"build {t_build:.1f} s ({len(d.entries):,} English keys), load {t_load:.1f} s; translate {n} questions "
          f"(mean {words:.0f} words) in {t_tr:.2f} s: {n / t_tr:.0f} questions/s on one thread")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
