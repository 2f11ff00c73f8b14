#!/usr/bin/env python
"""Recall@100 of the English index alone (no fusion): English questions searched as written in the
laws' English texts (the ``bm25_en`` artifact), every gold citation counted, and the law gold alone.

  python scripts/english_route.py --artifacts ARTIFACTS --queries ../shared/data/val.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import benchkit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", required=True, help="a folder with corpus/ and bm25_en/ (python -m lexrag build ... --laws-en)")
    ap.add_argument("--queries", default="../shared/data/val.csv", help="questions with gold_citations")
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    for opt, path in (("--artifacts", Path(args.artifacts) / "bm25_en" / "params.json"), ("--queries", Path(args.queries))):
        if not path.is_file():
            ap.error(f"{opt}: {path} is not a file")
    return benchkit.guarded(lambda: _run(args))


def _run(args) -> int:
    import numpy as np

    from lexrag.eval.metrics import recall_at_k
    from lexrag.index.corpus import Corpus
    from lexrag.index.english import EnglishIndex
    from lexrag.queries import load_gold, load_queries

    corpus = Corpus(Path(args.artifacts) / "corpus")
    index = EnglishIndex.load(Path(args.artifacts) / "bm25_en", corpus)
    gold = load_gold(args.queries)
    every, law = [], []
    for q in load_queries(args.queries):
        if not gold.get(q.query_id):
            continue
        ids, _ = index.search(q.text, 100)
        found = list(dict.fromkeys(corpus.citations[int(i)] for i in ids))
        every.append(recall_at_k(gold[q.query_id], found, 100))
        laws = [g for g in gold[q.query_id] if g.startswith("Art")]
        if laws:
            law.append(recall_at_k(laws, found, 100))
    print(f"{len(every)} questions: Recall@100 {np.mean(every):.3f}, law gold {np.mean(law) if law else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
