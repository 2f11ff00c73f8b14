"""Training the learned ranker (:mod:`lexrag.stages.ranker`): the candidate lists of training
questions from a run of the pipeline without the ranker, their feature rows and gold labels, and
the registry's build step for the ``ranker`` artifact."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from lexrag.io.hashcache import sha256_file
from lexrag.citations import scoring_form
from lexrag.config import Config, with_overrides
from lexrag.errors import ArtifactError, require
from lexrag.queries import load_gold, load_queries
from lexrag.registry import bind_build
from lexrag.stages.ranker import CANDIDATE_OFF, LearnedRanker, TrainingRows
from lexrag.stages.ranker_features import candidate_features

__all__ = ["CANDIDATE_OFF", "candidate_config", "training_rows", "build_ranker_step"]

log = logging.getLogger(__name__)


def candidate_config(cfg: Config) -> Config:
    """``cfg`` as a training run for the ranker uses it (:data:`CANDIDATE_OFF` switched off; what
    it leaves out and why is said in :mod:`lexrag.stages.ranker.training`)."""
    return with_overrides(cfg, CANDIDATE_OFF)


def training_rows(queries: Sequence, gold: Mapping[str, Sequence[str]], art, cfg: Config) -> tuple[TrainingRows, list[str]]:
    """Feature rows and labels of ``queries`` (those with gold) from one pipeline run under ``cfg``
    with the ranker off, and the signals the rows describe (sorted)."""
    from lexrag.pipeline.run import run_pipeline

    run_cfg = with_overrides(cfg, {"ranker.enabled": False, "count.method": "fixed"})
    qs = [q for q in queries if gold.get(q.query_id)]
    res = run_pipeline(qs, art, run_cfg)
    signals = sorted({r.signal for r in res.signals})
    rows = TrainingRows([], [], [])
    for q in qs:
        fused = res.current.hits.get(q.query_id, [])
        hits = {r.signal: r.hits.get(q.query_id, []) for r in res.signals}
        _, cits, X = candidate_features(fused, hits, signals, q.text, art.corpus, run_cfg.ranker.depth)
        gs = {scoring_form(g) for g in gold[q.query_id]}
        rows.qids.append(q.query_id)
        rows.X.append(X)
        rows.y.append(np.array([scoring_form(c) in gs for c in cits], dtype=np.int32))
    return rows, signals


def build_ranker_step(cfg: Config, dest: Path, inputs) -> None:
    """Fit the ranker on the training questions of ``inputs.train`` over the artifacts beside
    ``inputs.corpus_dir`` (the corpus and the BM25 index, built first) and save it in ``dest``."""
    from lexrag.pipeline.artifacts import Artifacts

    require("ranker build (ranker.enabled)", "ranker", "lightgbm", error=ArtifactError)  # before the candidate run
    import lightgbm

    t0 = time.perf_counter()
    run_cfg = candidate_config(cfg)
    art = Artifacts.from_folder(Path(inputs.corpus_dir).parent, run_cfg)
    if art.bm25 is None:
        raise ArtifactError("building the ranker needs the BM25 index: build bm25 first (lexical.enabled)")
    train = Path(inputs.train)
    gold = {q: g for q, g in load_gold(train).items() if g}
    queries = [q for q in load_queries(train, run_cfg.query.max_chars) if q.query_id in gold]
    rows, signals = training_rows(queries, gold, art, run_cfg)
    with_gold = sum(bool(y.any()) for y in rows.y)
    t_rows = time.perf_counter() - t0
    model = LearnedRanker.fit(rows, signals, doc={
        "train": train.name, "train_sha256": sha256_file(train), "questions": len(rows.qids),
        "questions_with_gold_in_candidates": with_gold, "candidates": int(sum(len(y) for y in rows.y)),
        "candidate_config": {k: v for k, v in CANDIDATE_OFF.items() if k not in ("runtime.progress", "count.method")},
        "lightgbm_version": lightgbm.__version__})
    model.rows = None  # the training rows are not part of the artifact
    model.save(dest)
    log.info("ranker: %d training questions (%d with gold among their candidates), %d signals; rows %.1fs, fit %.1fs",
             len(rows.qids), with_gold, len(signals), t_rows, time.perf_counter() - t0 - t_rows)


SPEC = bind_build("ranker", build_ranker_step)
