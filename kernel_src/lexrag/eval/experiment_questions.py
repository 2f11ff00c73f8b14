"""The questions an experiment (:mod:`lexrag.eval.experiment`) measures on: those of the tuning file
with gold, their courses and legal areas, the locked split held out of every fold, and the
development questions the folds are made of."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from lexrag.errors import ConfigError
from lexrag.eval.cv import AREA_OVERLAP, LOCKED_SPLIT, area_groups, format_area_map, legal_areas, read_groups, read_locked_split
from lexrag.queries import load_gold

__all__ = ["read_tuning_file", "Questions", "read_questions"]

log = logging.getLogger(__name__)


def read_tuning_file(path: str | Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The questions with gold (query id -> gold) and the courses (query id -> course) of a tuning file;
    one with fewer than two such questions or without a course column (the folds' groups) is refused."""
    gold = {q: g for q, g in load_gold(path).items() if g}
    if len(gold) < 2:  # each question is scored at the k picked on the others
        raise ConfigError(f"--tune-on {path}: {len(gold) or 'no'} question with gold citations; the nested folds hold "
                          "questions out, so it needs 2 or more (lexam_dev.csv: many, from several courses)")
    courses = read_groups(path)
    if not courses:
        raise ConfigError(f"--tune-on {path}: no course column, so the questions cannot be grouped by legal area; "
                          "tune on a file with query_id, course and gold_citations columns (lexam_dev.csv)")
    return gold, courses


class Questions(NamedTuple):
    """An experiment's questions: ``gold`` (query id -> gold) of every tuning question with gold,
    ``courses`` and ``area`` (query id -> its course, its legal area; ``areas``: course -> legal
    area), the ``locked`` split as read and ``locked_q`` its questions, and ``dev`` (query id ->
    gold) the questions the folds hold."""

    gold: dict[str, list[str]]
    courses: dict[str, str]
    areas: dict[str, str]
    area: dict[str, str]
    locked: dict
    locked_q: list[str]
    dev: dict[str, list[str]]


def read_questions(data: Path, tune_on: str, final: bool = False, locked: dict | None = None,
                   dev_areas: int | None = None) -> Questions:
    """The questions of the tuning file ``data / tune_on`` (:func:`read_tuning_file`) split for an
    experiment: the locked split's courses held out (``locked``: the split, else
    ``repro/locked_split.yaml``; ``final`` needs it to name some of them), and with ``dev_areas``
    the development questions cut to that many legal areas (every n-th by size, a smaller run)."""
    all_gold, courses = read_tuning_file(data / tune_on)
    areas = legal_areas(all_gold, courses)
    q_area = area_groups(courses, areas)
    source = str(LOCKED_SPLIT) if locked is None else "the locked split given"
    locked = read_locked_split() if locked is None else locked
    locked_courses = {c for a in locked.get("areas", []) for c in a.get("courses", [])}
    locked_q = [q for q in all_gold if courses.get(q, "") in locked_courses]
    if final and not locked_q:  # else the "final" report would tune on the areas it claims to hold out
        raise ConfigError(f"--final needs the locked split ({source}) to name "
                          f"courses of {tune_on}; it names none (missing, emptied, or another tuning file): restore "
                          "repro/locked_split.yaml, or leave --final out")
    dev = {q: g for q, g in all_gold.items() if q not in set(locked_q)}
    if dev_areas:  # a smaller development run: every n-th area by size
        names = sorted({q_area[q] for q in dev}, key=lambda a: (-sum(q_area[q] == a for q in dev), a))
        keep = set(names[:: max(1, len(names) // dev_areas)][:dev_areas])
        dev = {q: g for q, g in dev.items() if q_area[q] in keep}
    log.info("legal areas of %s (courses joined where their gold's law codes overlap >= %s):\n%s", tune_on, AREA_OVERLAP,
             format_area_map(all_gold, courses, areas))
    log.info("locked: %d questions of %s; folds over %d questions of %d areas", len(locked_q),
             sorted({q_area[q] for q in locked_q}), len(dev), len({q_area[q] for q in dev}))
    return Questions(all_gold, courses, areas, q_area, locked, locked_q, dev)
