#!/usr/bin/env python
"""How much of real English questions the dictionary translates (no gold needed): per query file,
the words that are no English function word, no number and no citation; how many have an entry
of their own (or the glossary's), how many more are found by their base (a possessive's owner, a
third person's or a plural's base), and the commonest words left without German.

  python scripts/english_coverage.py --dictionary ARTIFACTS/dictionary ../shared/data/test_sample10.csv lexam_en.csv
"""

from __future__ import annotations

import argparse
from collections import Counter

import benchkit  # beside this script


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("queries", nargs="+", help="query CSV files (query_id,query)")
    ap.add_argument("--dictionary", required=True, help="a built dictionary artifact folder (ARTIFACTS/dictionary)")
    ap.add_argument("--top", type=int, default=15, help="how many of the words without German to list")
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("top",))
    from lexrag.index.dictionary import Dictionary, english_words
    from lexrag.queries import load_queries

    d = Dictionary.load(args.dictionary)
    for f in args.queries:
        words = [w for q in load_queries(f) for w in english_words(q.text)]
        own = [w for w in words if d.own_senses(w)]
        by_base = [w for w in words if not d.own_senses(w) and d.senses(w)]
        left = Counter(w for w in words if not d.senses(w))
        n = max(len(words), 1)
        print(f"{f}: {len(words):,} words; {len(own):,} with an entry ({len(own) / n:.1%}), {len(by_base):,} more by their "
              f"base ({len(by_base) / n:.1%}); without German: {', '.join(w for w, _ in left.most_common(args.top))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
