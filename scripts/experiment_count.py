#!/usr/bin/env python
"""Experiment (a script, not a test): a count from the score curve against the fixed count, both
picked nested on lexam_dev's held-out rankings.

The curve count emits the citations whose final score reaches t times the first one's, at least
one and at most K (:func:`lexrag.stages.count.relative_count`).  It was ``count.method: relative``
(with ``count.threshold`` and ``count.relative_min_k``) until it left the product config: on the
fused RRF scores it never paid (docs/results.md, "A count from the score curve").  Each question
of ``--preset`` is ranked once per fold (the prior and learned statute model refitted without the
fold, as ``scripts/quality.py`` ranks it); every setting of the grid ``--thresholds`` x ``--max-k``
cuts that same ranking, whole articles placed as the preset emits them, and the fixed count's
k = 1..30 cuts it too.  For each fold the setting (or k) with the best mean F1 on the other folds
is scored on it (nested), by course and by legal area.  The locked areas are never read.

  python scripts/experiment_count.py --artifacts ARTIFACTS [--data ../shared/data] [--preset lexical] \
      [--thresholds 0.5,0.7,0.8,0.9,0.95,0.97,0.98,0.985] [--max-k 3,5,8,10]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Sequence

import numpy as np

from lexrag.eval.metrics import prf
from lexrag.stages.count import emitted_order, relative_count, unique_citations

KS = tuple(range(1, 31))  # the fixed counts a nested pick chooses from (as the harness's)


def curve_cut(res, corpus, qid: str, cc, threshold: float, max_k: int) -> list[str]:
    """What the curve count emits for ``qid`` of the run ``res``: the distinct citations of the
    order the count cuts whose score reaches ``threshold`` times the first, at least one and at
    most ``max_k``, in the form the count section ``cc`` asks (whole articles beside their
    paragraphs), as the count stage emitted them when it was ``count.method: relative``."""
    _, cits, scores = unique_citations(res.current.hits.get(qid, []), corpus)
    k = relative_count(scores, threshold, 1, max_k)
    return emitted_order(cits[:k], scores[:k], cc)[0][:k]


def measure(corpus, cc, settings: Sequence[tuple[float, int]]):
    """A held-out run's scores of a query: F1 of its ranking at each k of :data:`KS`, then F1 of
    the curve count at each (threshold, max_k) of ``settings``."""

    def scores(gold, res, qid):
        fixed = [prf(gold, res.ranked.get(qid, [])[:k])[2] for k in KS]
        return np.array(fixed + [prf(gold, curve_cut(res, corpus, qid, cc, t, m))[2] for t, m in settings])

    return scores


def nested(fs, columns: Sequence[int]) -> tuple[float, list[int]]:
    """Mean F1 over the queries of ``fs`` (:class:`lexrag.eval.experiment.FoldScores`) when each
    outer fold is scored at the column of ``columns`` with the best mean inner F1 (ties: the
    first), and the column picked per fold."""
    f1, picks = [], []
    for i, fold in enumerate(fs.folds):
        inner = np.mean([v[list(columns)] for v in fs.inner[i].values()], axis=0)
        c = columns[int(np.argmax(inner))]
        picks.append(c)
        f1 += [float(fs.outer[q][c]) for q in fold]
    return float(np.mean(f1)), picks


def _numbers(text: str, kind: type) -> list:
    try:
        out = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one number")
    return out


def main() -> int:
    import logging
    import warnings

    from lexrag.io.cliargs import parse_once
    from lexrag.config import load_config
    from lexrag.eval.cv import area_groups, legal_areas, read_locked_split
    from lexrag.eval.experiment import GROUPING_KINDS, fold_scores, harness_ranker
    from lexrag.eval.experiment_questions import read_tuning_file
    from lexrag.eval.variants import RANK
    from lexrag.errors import ConfigError
    from lexrag.pipeline import Artifacts, SignalCache
    from lexrag.queries import load_queries

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data", help="folder of lexam_dev.csv")
    ap.add_argument("--artifacts", required=True, help="artifacts built with --train lexam_dev.csv (docs/experiments.md)")
    ap.add_argument("--preset", default="lexical", help="the preset whose rankings are cut (default: lexical; 'default': the defaults)")
    ap.add_argument("--thresholds", type=lambda s: _numbers(s, float), default=[0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.985],
                    help="shares of the first score, comma-separated")
    ap.add_argument("--max-k", type=lambda s: _numbers(s, int), default=[3, 5, 8, 10], help="upper clips, comma-separated")
    args = parse_once(ap)
    warnings.simplefilter("ignore", UserWarning)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not all(0 <= t <= 1 for t in args.thresholds) or not all(k >= 1 for k in args.max_k):
        raise ConfigError("--thresholds must lie in [0, 1] and --max-k be 1 or more")

    tune_file = Path(args.data) / "lexam_dev.csv"
    all_gold, courses = read_tuning_file(tune_file)
    locked = {c for a in read_locked_split().get("areas", []) for c in a.get("courses", [])}
    dev = {q: g for q, g in all_gold.items() if courses.get(q, "") not in locked}
    groupings = {"course": courses, "area": area_groups(courses, legal_areas(all_gold, courses))}
    preset = None if args.preset == "default" else args.preset
    cfg = load_config(preset, {**RANK, "count.method": "fixed"})  # ranked deep; the cuts are made here
    art = Artifacts.from_folder(args.artifacts, cfg)
    qs = {q.query_id: q for q in load_queries(tune_file, cfg.query.max_chars)}
    if cfg.ranker.enabled:  # fitted per fold, on the rows of the training questions only
        art = dataclasses.replace(art, ranker=harness_ranker(cfg, art, qs, dev))
    settings = [(t, k) for t in args.thresholds for k in args.max_k]
    fixed_cols, curve_cols = list(range(len(KS))), list(range(len(KS), len(KS) + len(settings)))
    cache = SignalCache()
    print(f"{args.preset}: {len(dev)} questions of lexam_dev (locked areas left out), {len(settings)} curve settings")
    print("| folds by | fixed k, nested | curve count, nested | curve settings picked (t / K) |")
    print("| --- | --- | --- | --- |")
    for by, groups in groupings.items():
        fs = fold_scores(cfg, art, qs, dev, groups, cache, True, measure(art.corpus, cfg.count, settings), kind=GROUPING_KINDS[by])
        fixed, _ = nested(fs, fixed_cols)
        curve, picks = nested(fs, curve_cols)
        picked = sorted({f"{settings[c - len(KS)][0]:g} / {settings[c - len(KS)][1]}" for c in picks})
        print(f"| {by} ({len(fs.folds)}) | {fixed:.3f} | {curve:.3f} | {', '.join(picked)} |")
    return 0


if __name__ == "__main__":
    import benchkit  # beside this script

    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
