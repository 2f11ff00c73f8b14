"""The ranker artifact's files checked before LightGBM reads them: LightGBM's own parser aborts the
whole process on a damaged model (``[Fatal]``, exit 134, or a segmentation fault) where no
``except`` runs.  Every field of ``params.json`` is checked by type and finiteness
(:func:`check_ranker_params`), and ``model.txt`` by a parse of LightGBM's text format in Python
(:func:`check_model_text`); :func:`read_checked` does both for a folder.  A failed check is one
:class:`ArtifactError` line naming the file, the field and the rebuild.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from lexrag.artifacts import read_params, rebuild_hint
from lexrag.errors import ArtifactError
from lexrag.stages.ranker_features import FEATURE_SET, feature_names

__all__ = ["check_ranker_params", "check_model_text", "read_checked"]

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


def read_checked(folder: Path) -> tuple[str, list[str], dict[str, Any], list[float], dict[str, Any]]:
    """The ranker artifact in ``folder`` with every field of its ``params.json`` and its
    ``model.txt`` checked: the model text, the signals, the LightGBM parameters, the calibration
    and the other fields.  Any problem is one :class:`ArtifactError` line naming the file, the
    field and the rebuild."""
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
    return text, signals, lgb_params, cal, extra
