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

Loading checks everything before LightGBM sees it, since LightGBM's own parser aborts the whole
process on a damaged model (``[Fatal]``, exit 134, or a segmentation fault) where no ``except``
runs: every field of ``params.json`` by type and finiteness (:func:`check_ranker_params`), and
``model.txt`` by a parse of LightGBM's text format in Python (:func:`check_model_text`).  A failed
check is one line naming the file, the field and the rebuild.

LightGBM's thread count is a setting of the run, not of the model: training and prediction use
:func:`lightgbm_threads` (``OMP_NUM_THREADS`` when set, else LightGBM's 0, OpenMP's choice), the
recorded parameters leave it out, and the thread count LightGBM writes into its model text is
written as 0.  With ``deterministic`` and ``force_row_wise`` a fit on 1 and on 2 threads gave the
same model text, byte for byte (tests/test_ranker_checks.py; also on 160,000 synthetic rows with
bagging), so the artifact's files do not depend on the machine's thread count.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lexrag.artifacts import read_params, rebuild_hint, write_params
from lexrag.errors import ArtifactError
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage
from lexrag.stages.ranker_features import FEATURE_SET, candidate_features, feature_names

__all__ = ["PARAMS", "LIGHTGBM_HINT", "TrainingRows", "LearnedRanker", "lightgbm_threads", "check_model_text",
           "check_ranker_params", "load_ranker_step", "Ranker"]

# the one install hint for the ranker's LightGBM (a run's and a build's)
LIGHTGBM_HINT = ("pip install 'lexrag[ranker]' (or pip install -r requirements.txt; on Kaggle the lexrag-wheels dataset "
                 "carries it)")

log = logging.getLogger(__name__)
_WARNED: set[tuple[str, ...]] = set()  # signal sets the ranker was not trained with, warned about once


def _not_in_training(signal: str) -> bool:
    """A signal a training run never produces: pipeline.ranker_fit.CANDIDATE_OFF leaves out the prior,
    the dense, reranker and LLM stages (and the LLM's variants); German training questions get no
    dictionary or English variant."""
    from lexrag.signals import TASK_VARIANTS

    llm_variants = {f"bm25_{v}" for v in TASK_VARIANTS.values()}
    return (signal.startswith(("prior_", "dense_", "llm_")) or signal in llm_variants
            or signal in ("bm25_dict_de", "bm25_en", "rerank", "verify", "agent"))

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


def _lightgbm(what: str = "the ranker"):
    """LightGBM, or a one-line error with the one install hint."""
    try:
        import lightgbm
    except ImportError as e:
        raise ArtifactError(f"{what} needs LightGBM: {LIGHTGBM_HINT}") from e
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
        doc = read_params(folder, "ranker")
        signals, lgb_params, cal, extra = check_ranker_params(folder / "params.json", doc.get("params", {}))
        path = folder / "model.txt"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ArtifactError(f"{path}: cannot be read as LightGBM's model text ({str(e)[:120] or type(e).__name__}); "
                                f"{rebuild_hint('ranker')}") from None
        try:
            check_model_text(text, len(feature_names(signals)), lgb_params.get("objective"))
        except _BadModel as e:
            raise ArtifactError(f"{path}: {e}; {rebuild_hint('ranker')}") from None
        except _OtherWidth as e:
            raise ArtifactError(f"{path}: the model takes {e.args[0]} features, but {folder / 'params.json'} (feature set "
                                f"{FEATURE_SET}, {len(signals)} signals: {', '.join(signals) or 'none'}) describes "
                                f"{e.args[1]}: the model and its params.json are from different builds; "
                                f"{rebuild_hint('ranker')}") from None
        try:
            return cls(text, signals, lgb_params, cal, extra)
        except Exception as e:  # a last guard: LightGBM's own error for what the parse let through
            why = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            raise ArtifactError(f"{path}: not a LightGBM model ({why}); {rebuild_hint('ranker')}") from e


# the fields of the ranker's params.json and their types; the training source's fields are
# informational (written by lexrag.pipeline.ranker_fit), an earlier build's article-form fields are
# no longer read
_COUNTS = ("questions", "questions_with_gold_in_candidates", "candidates")
_TEXTS = ("train", "train_sha256", "lightgbm_version")
_OWN = ("feature_set", "features", "signals", "lightgbm", "calibration", "article_features", "article_lightgbm")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _not_finite(value: Any, field: str) -> str | None:
    """The first place in ``value`` (a JSON value) holding NaN or an infinity, as a field path."""
    if isinstance(value, float) and not math.isfinite(value):
        return field
    if isinstance(value, dict):
        return next((w for k, v in value.items() if (w := _not_finite(v, f"{field}.{k}"))), None)
    if isinstance(value, list):
        return next((w for i, v in enumerate(value) if (w := _not_finite(v, f"{field}[{i}]"))), None)
    return None


def check_ranker_params(path: Path, p: Any) -> tuple[list[str], dict[str, Any], list[float], dict[str, Any]]:
    """Check every field of the ranker's ``params.json`` (at ``path``; ``p`` its ``params``) by
    type and finiteness, and that its feature list is the one this code computes for its signals.
    Returns the signals, the LightGBM parameters, the calibration and the other fields."""
    hint = rebuild_hint("ranker")

    def bad(field: str, what: str) -> ArtifactError:
        return ArtifactError(f"{path}: {field!r} {what}; {hint}")

    if not isinstance(p, dict):
        raise ArtifactError(f"{path}: 'params' is not an object; {hint}")
    where = _not_finite(p, "params")
    if where:
        field = where.split(".", 1)[1] if "." in where else where
        raise ArtifactError(f"{path}: {field!r} holds NaN or an infinity (a build that wrote a broken value); {hint}")
    signals = p.get("signals")
    if not isinstance(signals, list) or not all(isinstance(s, str) and s for s in signals):
        raise bad("signals", "must be a list of signal names")
    if len(set(signals)) != len(signals):
        raise bad("signals", f"names a signal twice ({', '.join(sorted({s for s in signals if signals.count(s) > 1}))})")
    fs, features = p.get("feature_set"), p.get("features")
    if not isinstance(fs, int) or isinstance(fs, bool):
        raise bad("feature_set", f"must be a whole number (the feature set, {FEATURE_SET} for this code), not {fs!r}")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise bad("features", "must be a list of feature names")
    if fs != FEATURE_SET or features != feature_names(signals):
        raise ArtifactError(f"ranker at {path.parent} was trained on other features (feature set {fs!r}, {len(features)} "
                            f"features; this code computes set {FEATURE_SET}, {len(feature_names(signals))} features for "
                            f"its {len(signals)} signals); {hint}")
    cal = p.get("calibration")
    if not isinstance(cal, list) or len(cal) != 3 or not all(_is_number(x) for x in cal):
        raise bad("calibration", "must be three numbers")
    lgb_params = p.get("lightgbm")
    if not isinstance(lgb_params, dict):
        raise bad("lightgbm", f"must be an object of LightGBM parameters, not {type(lgb_params).__name__}")
    scalar = lambda v: v is None or isinstance(v, (str, int, float))  # noqa: E731 - bool is an int
    for k, v in lgb_params.items():
        if not (scalar(v) or isinstance(v, list) and all(scalar(x) for x in v)):
            raise bad(f"lightgbm.{k}", f"must be a value or a list of values, not {type(v).__name__}")
    if not isinstance(lgb_params.get("objective", ""), str):
        raise bad("lightgbm.objective", "must be the objective's name")
    for k in _COUNTS:
        if k in p and not (isinstance(p[k], int) and not isinstance(p[k], bool) and p[k] >= 0):
            raise bad(k, f"must be a count (a whole number, 0 or more), not {p[k]!r}"[:200])
    for k in _TEXTS:
        if k in p and not isinstance(p[k], str):
            raise bad(k, f"must be text, not {type(p[k]).__name__}")
    if "candidate_config" in p and not isinstance(p["candidate_config"], dict):
        raise bad("candidate_config", f"must be an object of config fields, not {type(p['candidate_config']).__name__}")
    extra = {k: v for k, v in p.items() if k not in _OWN}
    return list(signals), dict(lgb_params), [float(x) for x in cal], extra


class _BadModel(Exception):
    """What is wrong with a model text (said by the loader with the file and the rebuild)."""


class _OtherWidth(Exception):
    """A model text whose feature count is not the one its params.json describes: (model's, params')."""


_INT = re.compile(r"-?[0-9]+")
_COUNT = re.compile(r"[0-9]+")
_REAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_PARAM_LINE = re.compile(r"\[[A-Za-z0-9_]+: .*\]")
# the fields LightGBM 4 writes in a tree block (a linear tree's too: refused by is_linear)
_TREE_KEYS = {"num_leaves", "num_cat", "split_feature", "split_gain", "threshold", "decision_type", "left_child",
              "right_child", "leaf_value", "leaf_weight", "leaf_count", "internal_value", "internal_weight",
              "internal_count", "cat_boundaries", "cat_threshold", "is_linear", "shrinkage", "leaf_const",
              "num_features", "leaf_features", "leaf_coeff"}
_SPLIT_ARRAYS = ("split_feature", "threshold", "decision_type", "left_child", "right_child")


def _values(where: str, key: str, value: str, n: int, pattern: re.Pattern) -> list[str]:
    items = value.split(" ") if value else []
    if len(items) != n:
        raise _BadModel(f"{where}: {key} has {len(items)} values, {n} expected")
    for x in items:
        if not pattern.fullmatch(x) or (pattern is _REAL and not math.isfinite(float(x))):
            what = "a finite number" if pattern is _REAL else "a whole number"
            raise _BadModel(f"{where}: {key} holds {x[:24]!r}, not {what}")
    return items


def _check_tree(i: int, block: str, n_features: int) -> float:
    """Check tree block ``i`` (``Tree=i`` and its ``key=value`` lines); returns its largest
    absolute leaf value."""
    where = f"tree {i}"
    first, _, rest = block.partition("\n")
    if first != f"Tree={i}":
        raise _BadModel(f"{where}: its block starts with {first[:40]!r}, not 'Tree={i}' (tree_sizes do not match the trees)")
    body, blank, after = rest.partition("\n\n")
    if not blank or after.strip("\n"):
        raise _BadModel(f"{where}: its block does not end with the blank line after its fields (cut short, or tree_sizes "
                        "do not match the trees)")
    kv: dict[str, str] = {}
    for line in body.split("\n"):
        key, eq, value = line.partition("=")
        if not eq or key not in _TREE_KEYS or key in kv:
            raise _BadModel(f"{where}: the line {line[:40]!r} is not one of a tree's fields")
        kv[key] = value
    for key in ("num_leaves", "num_cat", "leaf_value"):
        if key not in kv:
            raise _BadModel(f"{where}: no {key}")
    leaves = int(_values(where, "num_leaves", kv["num_leaves"], 1, _COUNT)[0])
    if leaves < 1:
        raise _BadModel(f"{where}: num_leaves is 0")
    if _values(where, "num_cat", kv["num_cat"], 1, _INT) != ["0"] or "cat_boundaries" in kv or "cat_threshold" in kv:
        raise _BadModel(f"{where}: a categorical split, which the ranker never trains (its features are numbers)")
    if kv.get("is_linear", "0") != "0":
        raise _BadModel(f"{where}: a linear tree (is_linear={kv['is_linear'][:10]}), which the ranker never trains")
    values = [float(x) for x in _values(where, "leaf_value", kv["leaf_value"], leaves, _REAL)]
    for key in ("leaf_weight", "leaf_count"):
        if key in kv:
            _values(where, key, kv[key], leaves, _REAL)
    if "shrinkage" in kv:
        _values(where, "shrinkage", kv["shrinkage"], 1, _REAL)
    inner = leaves - 1
    for key in _SPLIT_ARRAYS:
        if key not in kv and inner:
            raise _BadModel(f"{where}: no {key}")
    for key in ("split_gain", "threshold", "internal_value", "internal_weight", "internal_count"):
        if key in kv:
            _values(where, key, kv[key], inner, _REAL)
    if not inner:
        return abs(values[0])
    feats = [int(x) for x in _values(where, "split_feature", kv["split_feature"], inner, _INT)]
    if any(not 0 <= f < n_features for f in feats):
        raise _BadModel(f"{where}: split_feature names feature {next(f for f in feats if not 0 <= f < n_features)}, "
                        f"past the model's {n_features} features")
    kinds = [int(x) for x in _values(where, "decision_type", kv["decision_type"], inner, _INT)]
    if any(not 0 <= d < 16 or d & 1 or (d >> 2) & 3 == 3 for d in kinds):
        raise _BadModel(f"{where}: decision_type holds a value that is no numerical split")
    left = [int(x) for x in _values(where, "left_child", kv["left_child"], inner, _INT)]
    right = [int(x) for x in _values(where, "right_child", kv["right_child"], inner, _INT)]
    # the nodes from the root: each inner node and each leaf (~k) reached exactly once, so no
    # prediction walks out of the arrays or around a loop
    seen_nodes, seen_leaves, todo = {0}, set(), [0]
    while todo:
        node = todo.pop()
        for child in (left[node], right[node]):
            if child >= 0:
                if child >= inner or child in seen_nodes:
                    raise _BadModel(f"{where}: node {node} has child {child}, which is no node of the tree or is reached "
                                    "twice (left_child/right_child damaged)")
                seen_nodes.add(child)
                todo.append(child)
            else:
                if ~child >= leaves or ~child in seen_leaves:
                    raise _BadModel(f"{where}: node {node} has leaf {~child}, which is no leaf of the tree or is reached "
                                    "twice (left_child/right_child damaged)")
                seen_leaves.add(~child)
    if len(seen_nodes) != inner or len(seen_leaves) != leaves:
        raise _BadModel(f"{where}: left_child/right_child leave nodes or leaves unreached (damaged)")
    return max(abs(v) for v in values)


def check_model_text(text: str, n_features: int, objective: str | None = None) -> int:
    """Check LightGBM's text model ``text`` before LightGBM reads it, by a parse of the text format
    in Python (LightGBM's own parser aborts the process on a damaged model): the header's fields
    (one class, one tree per iteration, ``max_feature_idx`` + 1 = ``n_features``, as many feature
    names and infos, the objective ``objective``), every ``Tree=`` block where ``tree_sizes`` puts
    it, each with its ``num_leaves``, finite ``leaf_value``s and thresholds, split features inside
    the feature count and children that form a tree, the ``end of trees`` marker right after the
    last block, and a parameters section whose lines are ``[name: value]``.  Returns the number of
    trees; raises ``_BadModel`` (what is wrong) or ``_OtherWidth`` (model's and wanted feature count)."""
    if not text.isascii() or "\x00" in text or "\r" in text:
        raise _BadModel("not LightGBM's model text (it holds bytes that are not ASCII, a NUL byte or a carriage return)")
    start = re.search(r"^(Tree=|end of trees$)", text, flags=re.M)
    if not text.startswith("tree\n") or start is None:
        raise _BadModel("not a complete LightGBM model (no 'tree' header line, or no trees and no 'end of trees' line: "
                        "cut short?)")
    head: dict[str, str] = {}
    for line in text[:start.start()].split("\n")[1:]:
        if not line:
            continue
        key, eq, value = line.partition("=")
        if not eq or "=" in value and key not in ("feature_names", "monotone_constraints") or key in head:
            raise _BadModel(f"the header line {line[:40]!r} is not a field LightGBM reads")
        head[key] = value
    for key in ("version", "num_class", "max_feature_idx", "feature_names", "feature_infos", "objective", "tree_sizes"):
        if key not in head:
            raise _BadModel(f"the header has no {key}")
    if head["num_class"] != "1" or head.get("num_tree_per_iteration", "1") != "1":
        raise _BadModel(f"a model of {head['num_class'][:10]} classes, {head.get('num_tree_per_iteration', '1')[:10]} trees "
                        "per iteration: not a ranking model")
    width = int(_values("the header", "max_feature_idx", head["max_feature_idx"], 1, _COUNT)[0]) + 1
    for key in ("feature_names", "feature_infos"):
        got = len(head[key].split(" ")) if head[key] else 0
        if got != width:
            raise _BadModel(f"the header's {key} lists {got} features, its max_feature_idx says {width}")
    if "label_index" in head:
        _values("the header", "label_index", head["label_index"], 1, _INT)
    if objective is not None and head["objective"].split(" ")[0] != objective:
        raise _BadModel(f"a model of objective {head['objective'][:40]!r}, params.json says {objective[:40]!r}")
    if width != n_features:
        raise _OtherWidth(width, n_features)
    sizes = [int(x) for x in _values("the header", "tree_sizes", head["tree_sizes"], len(head["tree_sizes"].split(" "))
                                     if head["tree_sizes"] else 0, _COUNT)]
    pos, total = start.start(), 0.0
    for i, size in enumerate(sizes):
        block = text[pos:pos + size]
        if len(block) < size:
            raise _BadModel(f"tree {i} of {len(sizes)}: the text ends inside it (cut short)")
        total += _check_tree(i, block, width)
        pos += size
    if sum(1 for _ in re.finditer(r"^Tree=", text, flags=re.M)) != len(sizes):
        raise _BadModel(f"the text holds another number of trees than tree_sizes lists ({len(sizes)})")
    if not math.isfinite(total):
        raise _BadModel("leaf values whose sum is not a finite number")
    if not text[pos:].startswith("end of trees\n"):
        raise _BadModel(f"no 'end of trees' line after the {len(sizes)} trees (cut short, or tree_sizes do not match)")
    rest = text[pos:]
    if "\nparameters:\n" in rest:
        params, sep, _ = rest.partition("\nparameters:\n")[2].partition("\nend of parameters\n")
        if not sep:
            raise _BadModel("its parameters section has no 'end of parameters' line (cut short?)")
        for line in params.split("\n"):
            if line and not _PARAM_LINE.fullmatch(line):
                raise _BadModel(f"the parameters line {line[:40]!r} is not '[name: value]'")
            if line.startswith("[linear_tree: ") and line != "[linear_tree: 0]":
                raise _BadModel("a linear-tree model, which the ranker never trains")
    return len(sizes)


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
            expected = all(_not_in_training(s) for s in unknown)
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
