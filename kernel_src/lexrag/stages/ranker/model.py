"""The learned ranker's model: LightGBM's LambdaRank fitted on feature rows of training questions
(:class:`TrainingRows`), the calibration of its scores to relevance probabilities, and its artifact
(folder ``ranker/``): LightGBM's own text model (``model.txt``, no pickle) and its feature list,
signals, parameters, calibration and training source in ``params.json``.  Loading reads the files
through :func:`lexrag.stages.ranker.checks.read_checked`, so LightGBM never sees a damaged model.

LightGBM's thread count is a setting of the run, not of the model: training and prediction use
:func:`lightgbm_threads` (``OMP_NUM_THREADS`` when set, else LightGBM's 0, OpenMP's choice), the
recorded parameters leave it out, and the thread count LightGBM writes into its model text is
written as 0.  With ``deterministic`` and ``force_row_wise`` a fit on 1 and on 2 threads gave the
same model text, byte for byte (tests/test_ranker_checks.py; also on 160,000 synthetic rows with
bagging), so the artifact's files do not depend on the machine's thread count.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lexrag.artifacts import rebuild_hint, write_params
from lexrag.errors import ArtifactError, require
from lexrag.stages.ranker.checks import read_checked
from lexrag.stages.ranker_features import FEATURE_SET, feature_names

__all__ = ["PARAMS", "TrainingRows", "LearnedRanker", "lightgbm_threads"]

# the ranker's LightGBM is the ``ranker`` extra, said missing by errors.require as every extra is; this
# is that wording, for a script that prints it itself (scripts/bench_ranker.py)

# LambdaRank with fixed parameters (the experiments found no setting that does better on unseen areas); the
# thread count is not among them: it follows the run (lightgbm_threads)
PARAMS: dict[str, Any] = {"objective": "lambdarank", "num_iterations": 300, "learning_rate": 0.05, "num_leaves": 15,
                          "min_data_in_leaf": 50, "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8,
                          "lambdarank_truncation_level": 30, "seed": 0, "deterministic": True, "force_row_wise": True,
                          "verbose": -1}
# LightGBM's names for its thread count: never recorded, never taken from an artifact
_THREAD_KEYS = ("num_threads", "num_thread", "nthread", "nthreads", "n_jobs")


def lightgbm_threads() -> int:
    """The thread count LightGBM trains and predicts on in this run: ``OMP_NUM_THREADS`` when the
    user sets it (its first number, as OpenMP reads a list), else 0, LightGBM's default (OpenMP's
    choice).  Read at each call, so a process that sets it before a fit is followed."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else 0


def _lightgbm():
    """LightGBM, or one :class:`ArtifactError` line naming the ``ranker`` extra (errors.require)."""
    require("learned ranker (ranker.enabled)", "ranker", "lightgbm", error=ArtifactError)
    import lightgbm

    return lightgbm


def _without_threads(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in _THREAD_KEYS}


def _model_text(booster) -> str:
    """LightGBM's text of ``booster``, the thread count it wrote into its parameters section
    written as 0 (a setting of the run, not of the model: the trees are the same on any count)."""
    text = booster.model_to_string()
    head, sep, tail = text.partition("\nparameters:\n")
    if not sep:
        return text
    return head + sep + re.sub(r"^\[num_threads: -?\d+\]$", "[num_threads: 0]", tail, count=1, flags=re.M)


def _predict(booster, X: np.ndarray) -> np.ndarray:
    return booster.predict(X, num_threads=lightgbm_threads())


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
    lgb = _lightgbm()
    keep = [i for i, t in enumerate(rows.y) if t.any()]  # a question with no gold among its candidates teaches no order
    if not keep:
        raise ValueError("no training question has a gold citation among its candidates: nothing to learn")
    data = lgb.Dataset(np.vstack([rows.X[i] for i in keep]), np.concatenate([rows.y[i] for i in keep]),
                       group=[len(rows.y[i]) for i in keep], free_raw_data=True)
    return lgb.train({**_without_threads(params), "num_threads": lightgbm_threads()}, data)


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
        lgb = _lightgbm()
        self.model_text = model_text
        self.booster = lgb.Booster(model_str=model_text)
        self.signals = list(signals)
        self.features = feature_names(self.signals)
        self.params = _without_threads(params)  # the thread count follows the run (an older artifact recorded 2)
        self.calibration = [float(x) for x in calibration]
        self.doc = dict(doc or {})
        self.rows = rows
        self.calibrated = True

    @classmethod
    def fit(cls, rows: TrainingRows, signals: Sequence[str], params: Mapping[str, Any] | None = None,
            doc: Mapping[str, Any] | None = None, calibrate: bool = True) -> "LearnedRanker":
        """Fit on ``rows``; the calibration is fitted on the scores each half of the questions gets
        from a model fitted on the other half (``calibrate=False``: not fitted, for an order alone;
        the probabilities are then a plain sigmoid of the scores).  LightGBM runs on
        :func:`lightgbm_threads` threads; the thread count is not recorded."""
        params = _without_threads(PARAMS if params is None else params)
        booster = _train(rows, params)
        if not calibrate:
            model = cls(_model_text(booster), signals, params, [0.0, 1.0, 0.0], doc, rows)
            model.calibrated = False
            return model
        halves = [[q for i, q in enumerate(rows.qids) if i % 2 == h] for h in (0, 1)]
        raw, labels = [], []
        for h in (0, 1):
            train, test = rows.subset(halves[1 - h]), rows.subset(halves[h])
            if not any(t.any() for t in train.y) or not test.qids:
                continue
            half = _train(train, params)
            raw += [_predict(half, x) for x in test.X]
            labels += list(test.y)
        if raw:
            cal = _fit_logistic(_platt_inputs(raw), np.concatenate(labels).astype(np.float64))
        else:  # too few questions to hold half out: probabilities from the in-sample scores
            cal = _fit_logistic(_platt_inputs([_predict(booster, x) for x in rows.X]), np.concatenate(rows.y).astype(np.float64))
        return cls(_model_text(booster), signals, params, cal, doc, rows)

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
        return _predict(self.booster, X) if len(X) else np.zeros(0)

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
        """The ranker artifact in ``folder``, every field of its ``params.json`` and its
        ``model.txt`` checked before LightGBM reads the model (a damaged model would abort the
        process inside LightGBM); any problem is one :class:`ArtifactError` line naming the file,
        the field and the rebuild."""
        _lightgbm()
        folder = Path(folder)
        text, signals, lgb_params, cal, extra = read_checked(folder)
        try:
            return cls(text, signals, lgb_params, cal, extra)
        except Exception as e:  # a last guard: LightGBM's own error for what the parse let through
            why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            raise ArtifactError(f"{folder / 'model.txt'}: not a LightGBM model ({why}); {rebuild_hint('ranker')}") from e
