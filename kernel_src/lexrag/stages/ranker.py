"""The learned ranker: LightGBM's LambdaRank reordering the top of each query's fused list (the
``ranker`` stage), and the relevance probabilities the ``expected_f1`` count reads.

Per candidate citation (the fused list's first ``ranker.depth`` distinct citations) the features
are those of :mod:`lexrag.stages.ranker_features`: its fused rank and score; for each signal the
model was trained with, its rank in it and its score relative to the signal's best; how many
signals list it; how its article and its law code stand in the list; whether the question names
its code; its kind, paragraph and length.  Nothing names a code or an area, so what the model
learns is how the signals relate to relevance, which can carry over to legal areas the training
questions never touched.

The artifact (folder ``ranker/``) is LightGBM's own text model (``model.txt``, no pickle) and its
feature list, signals, parameters, calibration and training source in ``params.json``.  A model
whose feature list is not the one this code computes is refused with a one-line error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lexrag.artifacts import read_params, write_params
from lexrag.errors import ArtifactError
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage
from lexrag.stages.ranker_features import FEATURE_SET, candidate_features, feature_names

__all__ = ["PARAMS", "LIGHTGBM_HINT", "TrainingRows", "LearnedRanker", "load_ranker_step", "Ranker"]

# the one install hint for the ranker's LightGBM (a run's and a build's)
LIGHTGBM_HINT = ("pip install 'lexrag[ranker]' (or pip install -r requirements.txt; on Kaggle the lexrag-wheels dataset "
                 "carries it)")

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, ...]] = set()  # signal sets the ranker was not trained with, warned about once

# LambdaRank with fixed parameters (the experiments found no setting that does better on unseen areas)
PARAMS: dict[str, Any] = {"objective": "lambdarank", "num_iterations": 300, "learning_rate": 0.05, "num_leaves": 15,
                          "min_data_in_leaf": 50, "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8,
                          "lambdarank_truncation_level": 30, "seed": 0, "deterministic": True, "force_row_wise": True,
                          "num_threads": 2, "verbose": -1}


@dataclass
class TrainingRows:
    """Feature rows of training questions: per question its candidates' rows and 0/1 labels
    (the candidate is a gold citation)."""

    qids: list[str]
    X: list[np.ndarray]
    y: list[np.ndarray]

    def subset(self, keep) -> "TrainingRows":
        keep = set(keep)
        idx = [i for i, q in enumerate(self.qids) if q in keep]
        pick = lambda xs: [xs[i] for i in idx] if xs else []  # noqa: E731
        return TrainingRows(pick(self.qids), pick(self.X), pick(self.y))


def _train(rows: TrainingRows, params: Mapping[str, Any]):
    import lightgbm as lgb

    keep = [i for i, t in enumerate(rows.y) if t.any()]  # a question with no gold among its candidates teaches no order
    if not keep:
        raise ValueError("no training question has a gold citation among its candidates: nothing to learn")
    data = lgb.Dataset(np.vstack([rows.X[i] for i in keep]), np.concatenate([rows.y[i] for i in keep]),
                       group=[len(rows.y[i]) for i in keep], free_raw_data=True)
    return lgb.train(dict(params), data)


def _platt_inputs(raw: Sequence[np.ndarray]) -> np.ndarray:
    """Per candidate: its raw score and its distance below the query's best (so a query whose best
    candidate scores low has low probabilities throughout)."""
    return np.vstack([np.column_stack([r, r - (r.max() if len(r) else 0.0)]) for r in raw]) if raw else np.zeros((0, 2))


def _fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1e-3, iters: int = 50) -> np.ndarray:
    """Logistic regression (intercept first) by Newton's method with a small ridge."""
    A = np.column_stack([np.ones(len(X)), X])
    w = np.zeros(A.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(A @ w, -35, 35)))
        g = A.T @ (p - y) + l2 * w
        H = (A * (p * (1 - p))[:, None]).T @ A + l2 * np.eye(len(w))
        step = np.linalg.solve(H, g)
        w -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return w


class LearnedRanker:
    """A fitted LambdaRank model with the signals and feature list it was trained with and a
    calibration of its scores to relevance probabilities (fitted on out-of-fold scores)."""

    def __init__(self, model_text: str, signals: Sequence[str], params: Mapping[str, Any], calibration: Sequence[float],
                 doc: Mapping[str, Any] | None = None, rows: TrainingRows | None = None):
        import lightgbm as lgb

        self.model_text = model_text
        self.booster = lgb.Booster(model_str=model_text)
        self.signals = list(signals)
        self.features = feature_names(self.signals)
        self.params = dict(params)
        self.calibration = [float(x) for x in calibration]
        self.doc = dict(doc or {})
        self.rows = rows
        self.calibrated = True

    @classmethod
    def fit(cls, rows: TrainingRows, signals: Sequence[str], params: Mapping[str, Any] | None = None,
            doc: Mapping[str, Any] | None = None, calibrate: bool = True) -> "LearnedRanker":
        """Fit on ``rows``; the calibration is fitted on the scores each half of the questions gets
        from a model fitted on the other half (``calibrate=False``: not fitted, for an order alone;
        the probabilities are then a plain sigmoid of the scores)."""
        params = dict(PARAMS if params is None else params)
        booster = _train(rows, params)
        if not calibrate:
            model = cls(booster.model_to_string(), signals, params, [0.0, 1.0, 0.0], doc, rows)
            model.calibrated = False
            return model
        halves = [[q for i, q in enumerate(rows.qids) if i % 2 == h] for h in (0, 1)]
        raw, labels = [], []
        for h in (0, 1):
            train, test = rows.subset(halves[1 - h]), rows.subset(halves[h])
            if not any(t.any() for t in train.y) or not test.qids:
                continue
            half = _train(train, params)
            raw += [half.predict(x) for x in test.X]
            labels += list(test.y)
        if raw:
            cal = _fit_logistic(_platt_inputs(raw), np.concatenate(labels).astype(np.float64))
        else:  # too few questions to hold half out: probabilities from the in-sample scores
            cal = _fit_logistic(_platt_inputs([booster.predict(x) for x in rows.X]), np.concatenate(rows.y).astype(np.float64))
        return cls(booster.model_to_string(), signals, params, cal, doc, rows)

    def refit(self, keep) -> "LearnedRanker":
        """The same model fitted only on the training questions in ``keep`` (an evaluation's
        held-out refit); needs the training rows it was fitted on (kept in memory, not saved)."""
        if self.rows is None:
            raise ValueError("this ranker holds no training rows (a loaded artifact): it cannot be refitted")
        if set(self.rows.qids) <= set(keep):  # the same questions: the fit is deterministic, so it is this model
            return self
        return LearnedRanker.fit(self.rows.subset(keep), self.signals, self.params, self.doc, self.calibrated)

    def scores(self, X: np.ndarray) -> np.ndarray:
        if X.shape[1] != len(self.features):
            raise ValueError(f"feature rows have {X.shape[1]} columns, the ranker expects {len(self.features)}")
        return self.booster.predict(X) if len(X) else np.zeros(0)

    def probabilities(self, raw: np.ndarray) -> np.ndarray:
        if not len(raw):
            return np.zeros(0)
        z = _platt_inputs([raw]) @ np.asarray(self.calibration[1:]) + self.calibration[0]
        return 1.0 / (1.0 + np.exp(-np.clip(z, -35, 35)))

    def save(self, folder: str | Path, builder: str = "lexrag.pipeline.ranker_fit") -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.txt").write_bytes(self.model_text.encode("utf-8"))
        write_params(folder, "ranker", builder, {"feature_set": FEATURE_SET, "features": self.features,
                                                 "signals": self.signals, "lightgbm": self.params,
                                                 "calibration": self.calibration, **self.doc})

    @classmethod
    def load(cls, folder: str | Path) -> "LearnedRanker":
        try:
            import lightgbm  # noqa: F401
        except ImportError as e:
            raise ArtifactError(f"the ranker needs LightGBM: {LIGHTGBM_HINT}") from e
        folder = Path(folder)
        doc = read_params(folder, "ranker")
        p = doc.get("params", {})
        signals = p.get("signals")
        if not isinstance(signals, list) or not all(isinstance(s, str) for s in signals):
            raise ArtifactError(f"{folder / 'params.json'}: 'signals' must be a list of signal names; rebuild the ranker")
        if p.get("feature_set") != FEATURE_SET or p.get("features") != feature_names(signals):
            raise ArtifactError(f"ranker at {folder} was trained on other features (feature set {p.get('feature_set')!r}, "
                                f"this code computes set {FEATURE_SET}); rebuild it with `python -m lexrag build ... "
                                f"--train TRAIN.csv` (or build_datasets.py --only ranker)")
        cal = p.get("calibration")
        if not isinstance(cal, list) or len(cal) != 3 or not all(isinstance(x, (int, float)) for x in cal):
            raise ArtifactError(f"{folder / 'params.json'}: 'calibration' must be three numbers; rebuild the ranker")
        # an earlier build's article-form model (article.txt) is no longer read
        own = ("feature_set", "features", "signals", "lightgbm", "calibration", "article_features", "article_lightgbm")
        extra = {k: v for k, v in p.items() if k not in own}
        try:
            return cls((folder / "model.txt").read_text(encoding="utf-8"), signals, p.get("lightgbm", {}), cal, extra)
        except Exception as e:  # LightGBM's own error for a damaged model file
            why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            raise ArtifactError(f"{folder}: model.txt is not a LightGBM model ({why}); rebuild the ranker") from e


def load_ranker_step(folder: Path, cfg, art) -> LearnedRanker:
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
            log.warning("ranker: signals %s ran but the ranker was trained without them; they reach it only through the "
                        "fused order (rebuild the ranker with this config to use them)", ", ".join(unknown))
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
            order = np.lexsort((np.arange(len(docs)), -prob)) if rc.reorder else np.arange(len(docs))
            if rc.laws_only:
                law = X[:, model.features.index("is_law")] > 0
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
