"""The ``ranker`` stage: the learned ranker reordering the top of each query's fused list, and the
relevance probabilities the ``expected_f1`` count reads (``batch.relevance``)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from lexrag.ranking import Ranking, best_first_order
from lexrag.registry import ArtifactSpec, declare
from lexrag.stages.base import Phase, register_stage
from lexrag.stages.ranker.model import LearnedRanker
from lexrag.stages.ranker.training import not_in_training
from lexrag.stages.ranker_features import candidate_features, feature_column

__all__ = ["Ranker", "load_ranker_step"]

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, ...]] = set()  # signal sets the ranker was not trained with, warned about once


def load_ranker_step(folder: Path, cfg, art) -> LearnedRanker:
    """The artifact registry's load step for ``ranker/``: the checked model (config and other parts unused)."""
    return LearnedRanker.load(folder)


class Ranker:
    """Reorder the first ``ranker.depth`` citations of each query's fused list by the learned
    ranker (``ranker.reorder`` false keeps the fused order: only the count reads the ranker); with
    ``ranker.laws_only`` only the law candidates move (court decisions keep their slots: the exam
    gold it learns from is almost all law).  The output scores are the relevance probabilities
    sorted down the slots (the rest of the list follows at score 0); each candidate's own
    probability, in the output order, goes to ``batch.relevance`` for the expected-F1 count."""

    name = "ranker"
    family = "rerank"
    needs = ("ranker",)
    phase = Phase.RERANK
    essential = False
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.ranker.enabled and getattr(art, "ranker", None) is not None

    def run(self, batch, ctx):
        model: LearnedRanker = ctx.art.ranker
        rc, corpus = ctx.cfg.ranker, ctx.art.corpus
        unknown = tuple(sorted(set(batch.signals) - set(model.signals)))
        if unknown and unknown not in _WARNED:
            _WARNED.add(unknown)
            expected = all(not_in_training(s) for s in unknown)
            (log.info if expected else log.warning)(
                "ranker: signals %s ran but the ranker was trained without them; they reach it only through the fused "
                "order (%s)", ", ".join(unknown),
                "a training run leaves out the prior, the GPU and LLM stages, and a variant its training questions did "
                "not have, such as the dictionary's for English questions" if expected else
                "rebuild the ranker with this config to use them")
        absent = tuple(sorted(set(model.signals) - set(batch.signals)))
        if absent and ("absent",) + absent not in _WARNED:
            _WARNED.add(("absent",) + absent)
            log.warning("ranker: it was trained with signals %s, which did not run here (switched off or dropped): every "
                        "candidate reads as unlisted by them, so its order and probabilities shift; run the config it was "
                        "trained with, or rebuild it with this one", ", ".join(absent))
        out = Ranking("ranker", "rerank")
        for q in batch.queries:
            fused = batch.current.get(q.query_id, [])
            if not fused:
                continue
            signal_hits = {s: r.hits.get(q.query_id, []) for s, r in batch.signals.items() if s in model.signals}
            docs, cits, X = candidate_features(fused, signal_hits, model.signals, q.text, corpus, rc.depth)
            prob = model.probabilities(model.scores(X))
            # the learned order (ties keep the fused order), or the fused order kept
            order = best_first_order(np.arange(len(docs)), prob) if rc.reorder else np.arange(len(docs))
            if rc.laws_only:
                law = feature_column(X, model.features, "is_law") > 0
                slots = np.flatnonzero(law)
                moved = np.arange(len(docs))
                moved[slots] = [i for i in order if law[i]]
                order = moved
            curve = np.sort(prob)[::-1]
            hits = [(int(docs[i]), float(s)) for i, s in zip(order, curve)]
            placed = set(cits)  # a citation's other documents stay out: the count keeps its first
            hits += [(d, 0.0) for d, _ in fused if corpus.citations[d] not in placed]
            out.hits[q.query_id] = hits
            batch.relevance[q.query_id] = [float(prob[i]) for i in order] + [0.0] * (len(hits) - len(order))
        return out


register_stage(Ranker())


SPEC = declare(ArtifactSpec(
    "ranker", ("corpus", "bm25"), switch="ranker.enabled", needs_input="train", reads=("train",), only_when_wanted=True,
    dataset="lexrag-ranker", title="lexrag learned ranker (LambdaRank)",
    description="the exam preset's learned count, a LightGBM LambdaRank model over features that name no law code "
                "or legal area and the calibration of its scores to relevance probabilities, trained on the training "
                "questions' gold under the exam preset (a LightGBM text model, no pickle)",
    builder="python build_datasets.py --only ranker --train TRAIN --config exam --out OUT", attr="ranker",
    build_in="lexrag.pipeline.ranker_fit", load=load_ranker_step,
    rebuild="python -m lexrag build ... --train TRAIN.csv --config CONFIG --out ARTIFACTS, CONFIG the one that runs it "
            "(exam) (or build_datasets.py --only ranker --train TRAIN.csv --config CONFIG)"))
