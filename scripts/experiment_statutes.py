#!/usr/bin/env python
"""Experiment (a script, not a test): how much would knowing a question's statutes be worth?

Runs the kaggle preset's retrieval (statute detection without the agreed-codes signal, prior,
graph, feedback, article ranking) over lexam_dev.csv with grouped cross-validation by course (the
prior and the statute model of each course fitted on the other courses), once with the codes the statute stage predicts and once with
the codes of the question's own gold citations (an oracle no real run has), each at the default
fusion weight of the ``bm25_statute`` signal and at a stronger one with a deeper signal.  The gap
between the two is what better statute detection could still bring; ``scripts/quality.py``
reports how often the predicted codes are right.

  python scripts/experiment_statutes.py --artifacts ARTIFACTS [--data ../shared/data]   (8 min 22 s here, beside another job)
"""

from __future__ import annotations

from pathlib import Path

import lexrag.stages.statutes as statutes
from lexrag.citations import law_codes
from lexrag.config import load_config
from lexrag.eval.cv import grouped_folds, held_out_artifacts, read_groups, refits_prior
from lexrag.eval.experiment import held_out_runs
from lexrag.eval.variants import GPU_STAGES_OFF
from lexrag.eval.experiment_cli import experiment_args
from lexrag.eval.metrics import evaluate
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries

import benchkit  # beside this script


def held_out_rankings(art_dir: Path, tune_file: Path, over: dict, oracle: bool) -> tuple[dict, dict]:
    # without the bm25_statute_agreed signal (statutes.agree 0): the oracle replaces the codes of
    # bm25_statute alone, and the rows stay comparable with those measured before that signal
    cfg = load_config("kaggle", {**GPU_STAGES_OFF, "runtime.progress": False, "count.method": "fixed", "count.k": 300,
                             "statutes.agree": 0.0, **over})
    art = Artifacts.from_folder(art_dir, cfg)
    gold = {q: g for q, g in load_gold(tune_file).items() if g}
    qs = {q.query_id: q for q in load_queries(tune_file, cfg.query.max_chars)}
    groups = read_groups(tune_file)
    ranked: dict = {}
    if not oracle:
        for fold, _, res in held_out_runs(cfg, art, qs, gold, grouped_folds(list(gold), groups)):
            ranked.update({q: res.ranked[q] for q in fold})
        return gold, ranked
    texts = {q: x.text for q, x in qs.items()}
    real = statutes.statute_codes
    try:  # the oracle knows whose gold to read: each fold's queries one at a time over its held-out artifacts
        for fold in grouped_folds(list(gold), groups):
            fart = held_out_artifacts(art, cfg, gold, texts, set(fold)) if refits_prior(art, cfg) else art
            for q in fold:
                statutes.statute_codes = lambda det, text, sc, *a, _q=q, **k: law_codes(gold[_q])[: sc.max_codes]
                ranked[q] = run_pipeline([qs[q]], fart, cfg).ranked[q]
    finally:
        statutes.statute_codes = real
    return gold, ranked


def main() -> int:
    args = experiment_args(__doc__)
    weights = load_config(None).fusion.weights
    strong = {"fusion.weights": {**weights, "bm25_statute": 4.0}, "statutes.top_k": 300}
    print("| statute codes | bm25_statute weight, depth | F1@3 | F1@5 | Recall@100 |")
    print("| --- | --- | --- | --- | --- |")
    for oracle in (False, True):
        for label, over in (("1 (default), 100", {}), ("4, 300", strong)):
            # the oracle may name every gold code; the real stage keeps its default cap of 3
            over = {**over, "statutes.max_codes": 10} if oracle else over
            gold, ranked = held_out_rankings(Path(args.artifacts), Path(args.data) / "lexam_dev.csv", over, oracle)
            m = {k: evaluate(gold, {q: r[:k] for q, r in ranked.items()}, ranked, ks=(100,)) for k in (3, 5)}
            name = "gold codes (oracle)" if oracle else "predicted (the statute stage)"
            print(f"| {name} | {label} | {m[3]['macro_f1']:.3f} | {m[5]['macro_f1']:.3f} | {m[3]['recall@100']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
