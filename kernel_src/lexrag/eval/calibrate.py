"""``lexrag calibrate``: fit the relative score thresholds of the adaptive count's n_cal.

One pipeline run over a validation file (with gold) gives each query's final order and the stage
that made it (``fused``, ``rerank``, ``verify``, ``agent``).  For each such stage, the threshold t
on score / top score that maximises Macro F1 when every query emits the citations reaching t
(at least one, at most ``count.max_k``) is chosen from a grid; a stage with fewer than
``MIN_QUERIES`` queries uses the threshold fitted on all queries (``default``).  When the file has
a ``course`` column, the fit is also cross-validated with folds grouped by course (each course's
queries scored with the threshold fitted on the other courses) and both numbers are reported:
questions of one course cite the same statutes, so only the grouped number says what the threshold
is worth on an unseen area.  The result is an artifact folder (``params.json``, artifact
``calibration``) that ``run`` reads with ``count.method: adaptive``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from lexrag.artifacts import write_params
from lexrag.config import Config
from lexrag.eval.cv import grouped_folds, read_groups
from lexrag.eval.metrics import prf
from lexrag.artifacts import corpus_id
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.stages.count import curve_cut, unique_citations

__all__ = ["calibrate", "check_calibration_out", "fit_threshold", "GRID", "MIN_QUERIES"]

log = logging.getLogger(__name__)

GRID = tuple(float(x) for x in np.round(np.arange(0.05, 0.9751, 0.025), 3))  # 0.05, 0.075, ..., 0.975
MIN_QUERIES = 5


def _f1_at(t: float, curves: list[tuple[list[str], list[float], list[str]]], max_k: int) -> float:
    if not curves:
        return 0.0
    total = 0.0
    for cits, scores, gold in curves:
        total += prf(gold, curve_cut(cits, scores, t, max_k))[2]
    return total / len(curves)


def fit_threshold(curves: list[tuple[list[str], list[float], list[str]]], max_k: int) -> tuple[float, float]:
    """The grid threshold with the best Macro F1 over ``curves`` (citations, scores, gold) and that
    F1; ties go to the lower threshold (more citations)."""
    best = max(GRID, key=lambda t: (_f1_at(t, curves, max_k), -t))
    return float(best), _f1_at(best, curves, max_k)


def check_calibration_out(out: Path, artifacts_dir: Path) -> None:
    """Refuse, before any work, an ``--out`` that cannot take the calibration: one that cannot be
    made or written, the artifacts folder, another artifact, or a folder inside one (a calibration
    already there is replaced)."""
    from lexrag.artifacts import ParamsEdited, read_params
    from lexrag.errors import ConfigError, LexragError
    from lexrag.io.outputs import check_makeable, check_outside_artifacts

    check_makeable(out, "--out")
    other = None
    if (out / "params.json").is_file():
        try:
            read_params(out, "calibration", verify=False)
        except ParamsEdited:  # a calibration edited by hand is still the calibration this run replaces
            pass
        except LexragError as e:
            other = e
    if out.resolve() == Path(artifacts_dir).resolve() or other is not None:
        raise ConfigError(f"--out {out} holds another artifact; the calibration needs its own folder")
    if out.parent != out:  # out itself may be the calibration being replaced
        check_outside_artifacts(out.parent, f"--out {out}: its folder", "the calibration needs a folder of its own "
                                "(beside the other artifacts: --out ARTIFACTS/calibration)", ConfigError)


def calibrate(cfg: Config, art: Artifacts, queries_path: str | Path, out_dir: str | Path, paths=None) -> dict:
    """Fit, report and write the calibration artifact into ``out_dir``; returns its params."""
    import copy

    from lexrag.errors import CsvInputError

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = {q: g for q, g in load_gold(queries_path).items() if g}  # a blank gold cell is no gold, not "cites nothing"
    if not gold:
        raise CsvInputError(f"{queries_path}: no query has gold citations; calibrate needs a validation file")
    if len(gold) < 2:  # thresholds fitted on one question would fit that question only
        raise CsvInputError(f"{queries_path}: 1 question with gold citations; calibrate fits thresholds over questions, so "
                            "it needs 2 or more (better: many, from several courses); nothing was written")
    cited = {" ".join(c.split()) for g in gold.values() for c in g}
    found = len(cited) - len(art.corpus.lacks(cited))
    if found == 0:  # every answer then scores 0: the fit would be noise, and would replace a calibration that is not
        raise CsvInputError(f"{queries_path}: none of its {len(cited)} gold citations is a citation of the corpus at "
                            f"{art.corpus.folder}, so every F1 would be 0 and the thresholds would carry no information "
                            f"(another corpus? give the artifacts the gold was written for); nothing was written")
    if found < len(cited) / 2:
        log.warning("calibration: only %d of the %d gold citations of %s are citations of the corpus at %s; the fit "
                    "sees the rest as misses", found, len(cited), queries_path, art.corpus.folder)
    cfg = copy.deepcopy(cfg)
    cfg.count.method, cfg.count.calibration = "fixed", ""  # the fit never depends on an earlier calibration
    res = run_pipeline(queries, art, cfg, paths=paths)
    max_k = cfg.count.max_k
    by_source: dict[str, list] = {}
    curves: dict[str, tuple] = {}
    for qid in res.query_ids:
        if qid not in gold:
            continue
        _, cits, scores = unique_citations(res.current.hits.get(qid, []), art.corpus)
        curves[qid] = (cits, scores, gold[qid])
        by_source.setdefault(res.current_by.get(qid, "fused"), []).append(qid)
    if not any(scores for _, scores, _ in curves.values()):
        raise CsvInputError(f"{queries_path}: the pipeline found no candidate for any of the {len(curves)} queries with gold; "
                            "nothing to calibrate (are these the right artifacts?)")
    default, f1_all = fit_threshold(list(curves.values()), max_k)
    if f1_all == 0.0:
        log.warning("calibration: Macro F1 is 0 at every threshold on %s; the thresholds carry no information", queries_path)
    thresholds, per_source = {}, {}
    for source, qids in sorted(by_source.items()):
        if len(qids) >= MIN_QUERIES:
            t, f1 = fit_threshold([curves[q] for q in qids], max_k)
        else:
            t, f1 = default, _f1_at(default, [curves[q] for q in qids], max_k)
        thresholds[source] = t
        per_source[source] = {"queries": len(qids), "threshold": t, "macro_f1_in_sample": round(f1, 4)}
    courses = read_groups(queries_path)
    cv = None
    if courses and len({courses.get(q, "") for q in curves}) >= 2:
        folds = grouped_folds(list(curves), courses)
        scores = []
        for fold in folds:
            test = set(fold)
            t, _ = fit_threshold([curves[q] for q in curves if q not in test], max_k)
            scores.extend(prf(g, curve_cut(cits, sc, t, max_k))[2]
                          for cits, sc, g in (curves[q] for q in fold))
        cv = {"folds": len(folds), "grouped_by": "course", "macro_f1": round(float(np.mean(scores)), 4)}
    elif courses:
        cv = {"folds": 1, "grouped_by": "course", "macro_f1": None, "note": "one course only: no grouped CV"}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    doc = write_params(out, "calibration", "lexrag calibrate", {"grid": [GRID[0], GRID[-1], len(GRID)], "max_k": max_k},
                       thresholds=thresholds, default=default, corpus_id=corpus_id(Path(art.corpus.folder)),
                       fitted_on=str(queries_path), n_queries=len(curves), macro_f1_in_sample=round(f1_all, 4),
                       per_source=per_source, grouped_cv=cv)
    log.debug("calibration written to %s: %s", out, thresholds)  # the CLI prints it with the in-sample F1
    return doc
