"""Cross-validation folds grouped by course.

Exam questions of one course cite the same statutes, so a fold that puts some of a course's
questions in training and others in testing lets whatever is fitted (a k, a weight, a threshold,
the training prior) memorise that course's statutes: leave-one-query-out overstates every gain.
Here a course is never split: with up to ``max_folds`` courses every course is a fold
(leave-one-course-out), with more they are packed into ``max_folds`` folds of similar size.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import Sequence

from lexrag.csvio import FileReport, read_csv_rows

__all__ = ["refits_prior", "read_groups", "grouped_folds", "held_out_artifacts"]

log = logging.getLogger(__name__)


def read_groups(path: str | Path, column: str = "course") -> dict[str, str]:
    """query id -> course (empty when the file has no such column)."""
    report = FileReport(file=str(path), max_examples=3)
    rows = list(read_csv_rows(path, ("query_id",), report))
    if not rows or column not in rows[0][1]:
        return {}
    return {row["query_id"].strip(): (row.get(column) or "").strip() for _, row in rows}


def grouped_folds(query_ids: Sequence[str], groups: dict[str, str], max_folds: int = 30, seed: int = 0) -> list[list[str]]:
    """Test folds over ``query_ids`` that never split a group.  Without groups (no course column)
    the folds are by query (``min(5, n)`` folds), with a warning that this overstates gains."""
    qids = list(query_ids)
    if not groups or len({groups.get(q, "") for q in qids}) < 2:
        log.warning("no course column (or one course): folds by query, which overstates what tuning gains on unseen areas")
        order = qids[:]
        random.Random(seed).shuffle(order)
        k = min(5, len(order))
        return [order[i::k] for i in range(k)] if k else []
    by_group: dict[str, list[str]] = {}
    unlabelled = [q for q in qids if not groups.get(q, "")]
    if unlabelled:
        log.warning("%d queries have no course: each is its own group", len(unlabelled))
    for q in qids:
        by_group.setdefault(groups.get(q, "") or f"(no course) {q}", []).append(q)
    names = sorted(by_group)
    if len(names) <= max_folds:
        return [by_group[g] for g in names]
    folds: list[list[str]] = [[] for _ in range(max_folds)]
    for g in sorted(names, key=lambda g: (-len(by_group[g]), g)):  # largest first into the smallest fold
        min(folds, key=len).extend(by_group[g])
    return folds


def refits_prior(art, cfg) -> bool:
    """Whether :func:`held_out_artifacts` refits anything: ``cfg`` reads a prior and one is loaded.
    Otherwise a held-out ranking is the ranking of the artifacts as they are."""
    return cfg.uses_prior() and art.prior is not None


def held_out_artifacts(art, cfg, gold: dict[str, Sequence[str]], texts: dict[str, str], held_out: set[str]):
    """``art`` with its training prior (and the statute model it holds) refitted on the gold of
    the queries outside ``held_out``, so a fold is ranked by what only the other courses taught;
    ``art`` itself when ``cfg`` reads no prior or none is loaded.  ``texts``: query id -> question."""
    if not refits_prior(art, cfg):
        return art
    from lexrag.index.prior import TrainingPrior

    train = {q: g for q, g in gold.items() if q not in held_out}
    return dataclasses.replace(art, prior=TrainingPrior(train, questions={q: texts[q] for q in train if q in texts}))
