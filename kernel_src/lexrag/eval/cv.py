"""Cross-validation folds grouped by course or by legal area.

Exam questions of one course cite the same statutes, so a fold that puts some of a course's
questions in training and others in testing lets whatever is fitted (a k, a weight, a threshold,
the training prior) memorise that course's statutes: leave-one-query-out overstates every gain.
Here a course is never split: with up to ``max_folds`` courses every course is a fold
(leave-one-course-out), with more they are packed into ``max_folds`` folds of similar size.

Courses of one legal area share their statutes too (a tax course and a company tax course both
cite DBG), so leaving one course out still trains on its area.  :func:`legal_areas` clusters the
courses by the law codes their gold cites; folds by area are what predicts a legal area the
training questions do not cover.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import Sequence

import yaml

from lexrag.io.csvio import FileReport, read_csv_rows
from lexrag.errors import short

__all__ = [
    "read_locked_split", "write_locked_split", "LOCKED_SPLIT", "refits_prior", "read_groups", "grouped_folds",
    "held_out_artifacts", "law_code_shares", "code_overlap", "legal_areas", "area_groups", "format_area_map",
    "locked_areas", "fold_groups", "AREA_OVERLAP",
]

log = logging.getLogger(__name__)


def read_groups(path: str | Path, column: str = "course") -> dict[str, str]:
    """query id -> course (empty when the file has no such column)."""
    report = FileReport(file=str(path), max_examples=3)
    rows = list(read_csv_rows(path, ("query_id",), report))
    if not rows or column not in rows[0][1]:
        return {}
    return {row["query_id"].strip(): (row.get(column) or "").strip() for _, row in rows}


def grouped_folds(query_ids: Sequence[str], groups: dict[str, str], max_folds: int = 30, seed: int = 0,
                  kind: str | None = "course") -> list[list[str]]:
    """Test folds over ``query_ids`` that never split a group (a ``kind``: course, legal area).
    Without two groups the folds are by query (``min(5, n)`` folds), with a warning that this
    overstates gains (none when ``kind`` is None: folds by query were asked for)."""
    qids = list(query_ids)
    names = {groups.get(q, "") for q in qids}
    if not groups or len(names) < 2:
        if kind is not None:
            one = short(next(iter(names)), 40)
            why = f"the questions carry no {kind}" if not groups else f"all {len(qids)} questions are in one {kind} ({one})"
            log.warning("%s: folds by query, which overstates what tuning gains on unseen areas", why)
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
    """Whether :func:`held_out_artifacts` refits anything: ``cfg`` reads a prior and one is loaded,
    or it runs a learned ranker that holds its training rows.  Otherwise a held-out ranking is the
    ranking of the artifacts as they are."""
    return (cfg.uses_prior() and art.prior is not None) or _refits_ranker(art, cfg)


def _refits_ranker(art, cfg) -> bool:
    ranker = getattr(art, "ranker", None)
    return bool(cfg.ranker.enabled and ranker is not None and getattr(ranker, "rows", None) is not None)


def held_out_artifacts(art, cfg, gold: dict[str, Sequence[str]], texts: dict[str, str], held_out: set[str]):
    """``art`` with its training prior (and the statute model it holds) and its learned ranker
    refitted on the gold of the queries outside ``held_out``, so a fold is ranked by what only the
    other courses taught; ``art`` itself when ``cfg`` reads no prior and runs no refittable ranker.
    ``texts``: query id -> question."""
    if not refits_prior(art, cfg):
        return art
    train = {q: g for q, g in gold.items() if q not in held_out}
    out = art
    if cfg.uses_prior() and art.prior is not None:
        from lexrag.index.prior import TrainingPrior

        out = dataclasses.replace(out, prior=TrainingPrior(train, questions={q: texts[q] for q in train if q in texts}))
    if _refits_ranker(art, cfg):
        out = dataclasses.replace(out, ranker=art.ranker.refit(train))
    return out


# --- legal areas ------------------------------------------------------------------------------

# Two groups of courses join when, on average over their pairs of courses, the share of gold
# citations they put on the same law codes is at least this (sum over codes of the smaller share).
# At 0.3 lexam_dev's tax courses join (DBG), the property and succession courses (ZGB, GBV), the
# contract and company courses (OR), the financial market courses (FINMAG), while courses that
# share only the ubiquitous OR or ZGB with a few citations stay apart.
AREA_OVERLAP = 0.3


def law_code_shares(gold: dict[str, Sequence[str]], groups: dict[str, str]) -> dict[str, dict[str, float]]:
    """course -> law code -> share of the course's gold law citations that cite it (court
    citations and strings that do not parse are left out)."""
    from lexrag.citations import try_parse

    counts: dict[str, dict[str, int]] = {}
    for q, cits in gold.items():
        g = groups.get(q, "")
        if not g:
            continue
        c = counts.setdefault(g, {})
        for s in cits:
            p = try_parse(s)
            if p is not None and p.kind == "law":
                c[p.code] = c.get(p.code, 0) + 1
    return {g: {k: v / sum(c.values()) for k, v in c.items()} if c else {} for g, c in counts.items()}


def code_overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """The share of citations two code distributions have in common: sum over codes of the
    smaller share (1 for the same distribution, 0 for no code in common)."""
    return sum(min(v, b.get(k, 0.0)) for k, v in a.items())


def legal_areas(gold: dict[str, Sequence[str]], groups: dict[str, str], threshold: float = AREA_OVERLAP) -> dict[str, str]:
    """course -> legal area: courses clustered by the law codes their gold cites (average-linkage
    agglomerative clustering on :func:`code_overlap`, merging the closest pair of clusters while
    their mean overlap is at least ``threshold``; ties by name, so the result is deterministic).
    Average linkage, not single: one small course citing OR and ZGB alike must not chain every
    private-law course into one area.  An area is named by its courses joined with " + "."""
    shares = law_code_shares(gold, groups)
    clusters = [[c] for c in sorted({g for g in groups.values() if g})]
    pair = {(a, b): code_overlap(shares.get(a, {}), shares.get(b, {})) for a in shares for b in shares}

    def link(x: list[str], y: list[str]) -> float:
        return sum(pair.get((a, b), 0.0) for a in x for b in y) / (len(x) * len(y))

    while len(clusters) > 1:
        best = max(((link(x, y), -i, -j) for i, x in enumerate(clusters) for j, y in enumerate(clusters) if i < j))
        if best[0] < threshold:
            break
        i, j = -best[1], -best[2]
        clusters[i] = sorted(clusters[i] + clusters[j])
        del clusters[j]
    return {c: " + ".join(cl) for cl in clusters for c in cl}


def area_groups(groups: dict[str, str], areas: dict[str, str]) -> dict[str, str]:
    """query id -> legal area, from query id -> course and course -> area."""
    return {q: areas.get(c, c) for q, c in groups.items()}


def format_area_map(gold: dict[str, Sequence[str]], groups: dict[str, str], areas: dict[str, str], top: int = 3) -> str:
    """One line per area: its questions, its most cited law codes with their shares, its courses."""
    by_area: dict[str, list[str]] = {}
    for q, c in groups.items():
        if q in gold and c:
            by_area.setdefault(areas.get(c, c), []).append(q)
    shares = law_code_shares(gold, {q: areas.get(c, c) for q, c in groups.items()})
    lines = []
    for i, (area, qs) in enumerate(sorted(by_area.items(), key=lambda t: (-len(t[1]), t[0])), 1):
        codes = ", ".join(f"{k} {v:.2f}" for k, v in sorted(shares.get(area, {}).items(), key=lambda t: (-t[1], t[0]))[:top])
        lines.append(f"area {i:>2} ({len(qs)} questions; {codes or 'no law codes'}): {area}")
    return "\n".join(lines)


def locked_areas(areas: dict[str, str], sizes: dict[str, int], seed: int = 0) -> list[str]:
    """A third of the areas for a final report only: areas sorted by size (questions, then name),
    cut into consecutive triples (the last may be shorter), one area drawn from each with
    ``random.Random(seed)``, so the locked areas span large and small ones."""
    names = sorted(set(areas.values()), key=lambda a: (-sizes.get(a, 0), a))
    rng = random.Random(seed)
    return sorted(rng.choice(names[i:i + 3]) for i in range(0, len(names), 3))


def fold_groups(path: str | Path, by: str, gold: dict[str, Sequence[str]] | None = None,
                threshold: float = AREA_OVERLAP) -> dict[str, str]:
    """query id -> fold group of a query file: ``course`` (its course column), ``area`` (the legal
    area of its course, :func:`legal_areas` over ``gold``; by course when the courses form one
    area) or ``query`` (none: folds by query)."""
    from lexrag.errors import ConfigError

    if by not in ("course", "area", "query"):
        raise ConfigError(f"folds by {by!r}: choose course, area or query")
    if by == "query":
        return {}
    groups = read_groups(path)
    if by == "area" and groups:
        if gold is None:
            from lexrag.queries import load_gold

            gold = {q: g for q, g in load_gold(path).items() if g}
        areas = area_groups(groups, legal_areas(gold, groups, threshold))
        if len({areas[q] for q in gold if q in areas}) >= 2:
            return areas
        log.warning("%s: its courses form one legal area; folds by course instead", path)
    return groups


# where the repository keeps the locked split (a checkout; an installed package has no such file)
LOCKED_SPLIT = Path(__file__).resolve().parents[3] / "repro" / "locked_split.yaml"


# --- the locked split ---------------------------------------------------------------------------

def read_locked_split(path: str | Path = LOCKED_SPLIT) -> dict:
    """``repro/locked_split.yaml``: the locked areas (their courses), the seed and the overlap
    threshold they were drawn with; empty when the file is absent."""
    from lexrag.errors import ConfigError
    from lexrag.config.yamlio import read_yaml_file

    path = Path(path)
    if not path.exists():
        return {}
    doc = read_yaml_file(path) or {}
    areas = doc.get("areas", []) if isinstance(doc, dict) else None
    if not isinstance(areas, list) or not all(isinstance(a, dict) and isinstance(a.get("courses"), list)
                                              and all(isinstance(c, str) for c in a["courses"]) for a in areas):
        raise ConfigError(f"{path}: not a locked split: expected 'areas', a list of {{courses: [COURSE, ...]}} (a course "
                          "written as one string would lock nothing); restore it from git")
    return doc


def write_locked_split(queries_path: str | Path, path: str | Path = LOCKED_SPLIT, seed: int = 0) -> dict:
    """Draw the locked areas of ``queries_path`` (:func:`lexrag.eval.cv.locked_areas`) and record them."""
    from lexrag.queries import load_gold

    gold = {q: g for q, g in load_gold(queries_path).items() if g}
    groups = read_groups(queries_path)
    areas = legal_areas(gold, groups)
    sizes: dict[str, int] = {}
    for q in gold:
        a = areas.get(groups.get(q, ""), "")
        sizes[a] = sizes.get(a, 0) + 1
    locked = locked_areas(areas, sizes, seed)
    doc = {"file": Path(queries_path).name, "seed": seed, "area_overlap": AREA_OVERLAP,
           "areas": [{"area": a, "questions": sizes.get(a, 0), "courses": a.split(" + ")} for a in locked]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("# The locked final split: a third of lexam_dev's legal areas, drawn once (one per size triple,\n"
                          "# random.Random(seed)); left out of every fold, read only by `scripts/quality.py --final`.\n"
                          + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return doc
