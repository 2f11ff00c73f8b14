#!/usr/bin/env python
"""Experiment (not a test): English questions searched with and without the dictionary variant
(dict_de), on val.csv (10 English questions; only scored, never tuned on).

  python scripts/experiment_dictionary.py --data ../shared/data --artifacts ARTIFACTS

ARTIFACTS holds the corpus, BM25, graph and prior of docs/experiments.md and a dictionary artifact
(`python -m lexrag build ... --dictionary /usr/share/trans/de-en`).  Prints, per preset, Recall@100
over all gold and over the law gold, and Macro F1 at k = 3, 5, 8 of the ranking.
"""

import argparse
import logging
import warnings

import numpy as np

from lexrag.citations import try_parse
from lexrag.config import load_config
from lexrag.eval.metrics import prf, recall_at_k
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

import benchkit  # beside this script


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True)
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.ERROR)
    val = f"{args.data}/val.csv"
    gold = {q: g for q, g in load_gold(val).items() if g}
    law = {q: [c for c in g if (p := try_parse(c)) is not None and p.kind == "law"] for q, g in gold.items()}
    print("| preset | dict_de | R@100 | law R@100 | F1@3 | F1@5 | F1@8 |\n| --- | --- | --- | --- | --- | --- | --- |")
    for preset in ("lexical", "exam"):
        for on in (False, True):
            cfg = load_config(preset, {"runtime.progress": False, "count.method": "fixed", "count.k": 300,
                                       "dictionary.enabled": on})
            res = run_pipeline(load_queries(val), Artifacts.from_folder(args.artifacts, cfg), cfg)
            r100 = np.mean([recall_at_k(gold[q], res.ranked[q], 100) for q in gold])
            r100l = np.mean([recall_at_k(law[q], res.ranked[q], 100) for q in gold if law[q]])
            f = [np.mean([prf(gold[q], res.ranked[q][:k])[2] for q in gold]) for k in (3, 5, 8)]
            print(f"| {preset} | {'on' if on else 'off'} | {r100:.3f} | {r100l:.3f} | " + " | ".join(f"{x:.3f}" for x in f) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
