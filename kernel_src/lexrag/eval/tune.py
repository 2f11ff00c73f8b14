"""``lexrag tune``: a grid over config fields, scored by nested cross-validation on held-out legal
areas (and courses).

Every grid point runs the pipeline over the tuning file with one shared :class:`SignalCache`, so
retrieval is computed once and a point costs only what its fields change (fusion, count, the graph
signals when the seeds move).  The score of a point is the Macro F1 over queries.  Each point is
scored in-sample (the artifacts' own prior) and held out (each fold ranked with a prior and
statute model fitted on the other folds only, when the prior is on).  Folds are the legal areas of
the file's courses (:func:`lexrag.eval.cv.legal_areas`), and the courses beside them.  The headline
is nested: for each area the point is picked on inner folds of the other areas (each ranked with a
prior fitted without both), and the area is scored at that point; that estimates what tuning gains
on an area the training questions do not cover.  The tuned config is the point with the best
held-out score over all areas, every field written out, a YAML file ``--config`` accepts; its
header records the scores and the grid.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import warnings
import logging
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import yaml

from lexrag.io.outputs import replace_text
from lexrag.config import Config, with_overrides
from lexrag.eval.cv import fold_groups, read_groups
from lexrag.eval.experiment import GROUPING_KINDS, fold_scores, nested_picks
from lexrag.eval.metrics import per_query_table, prf
from lexrag.eval.submission import outside_corpus
from lexrag.pipeline import Artifacts, SignalCache, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.config.yamlio import UniqueKeyLoader

__all__ = ["parse_grid", "tune"]

log = logging.getLogger(__name__)


def _split_top(raw: str) -> list[str]:
    """Split on the commas that are not inside [...] or {...}."""
    parts, depth, cur = [], 0, ""
    for ch in raw:
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_grid(items: Sequence[str]) -> dict[str, list]:
    """``["fusion.rrf_k=30,60", "count.k=3,5"]`` -> ``{"fusion.rrf_k": [30, 60], "count.k": [3, 5]}``."""
    from lexrag.errors import ConfigError

    grid: dict[str, list] = {}
    first: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--grid {item!r} is not of the form section.field=v1,v2,...")
        path, raw = item.split("=", 1)
        try:  # commas inside brackets belong to a value: lexical.variants=[query],[query,de]
            values = [yaml.load(v, Loader=UniqueKeyLoader) for v in _split_top(raw) if v.strip()]  # aliases bounded
        except yaml.YAMLError as e:
            raise ConfigError(f"--grid {item!r}: a value is not valid YAML ({str(e).splitlines()[0]})") from None
        if not values:
            raise ConfigError(f"--grid {item!r} lists no values")
        again = [str(v) for i, v in enumerate(values) if v in values[:i]]
        if again:  # a point run twice only costs time, and its tie hides what the grid was meant to compare
            raise ConfigError(f"--grid {item[:80]!r} lists {again[0][:40]} more than once; list each value once")
        field = path.strip()
        if field in grid:  # two flags for one field: keeping only the last would drop values silently
            raise ConfigError(f"--grid {field} is given twice ({first[field]!r} and {item!r}); list every value in one "
                              f"flag: --grid {field}={','.join(_split_top(first[field].split('=', 1)[1]) + _split_top(raw))}")
        grid[field] = values
        first[field] = item
    return grid


@contextlib.contextmanager
def said_once(runs: str) -> Iterator[None]:
    """The warnings many runs log alike (a count note for each grid point, the same but for its
    numbers): each said once when the block ends, with how many times the runs said it."""
    seen: dict[str, list] = {}

    class Hold(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if record.levelno != logging.WARNING or not record.name.startswith("lexrag"):
                return True
            text = record.getMessage()
            seen.setdefault(re.sub(r"\d+(?:\.\d+)?", "#", text), [text, 0])[1] += 1
            return False

    hold, handlers = Hold(), [*logging.getLogger().handlers, *logging.getLogger("lexrag").handlers]
    for h in handlers:
        h.addFilter(hold)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(hold)
        for text, n in seen.values():
            log.warning("%s%s", text, f" (said {n} times over {runs}, alike but for their numbers)" if n > 1 else "")


def _scores(cfg: Config, art: Artifacts, queries, gold, cache: SignalCache, paths=None) -> dict[str, float]:
    res = run_pipeline(queries, art, cfg, paths=paths, cache=cache)
    return {r["query_id"]: r["f1"] for r in per_query_table(gold, res.predictions, res.ranked)}


def _prediction_f1(gold, res, qid) -> np.ndarray:
    return np.array([prf(gold, res.predictions.get(qid, []))[2]])


def _refuse_build_time_fields(cfg: Config, configs: list[Config], points: list[dict], art: Artifacts) -> None:
    """A grid over a field an artifact fixes when it is built (BM25's k1, b, analyzer) would score
    the one loaded index under every value, all alike, and write a config that index refuses."""
    if getattr(art, "bm25", None) is None:
        return
    from lexrag.errors import ConfigError
    from lexrag.index.lexical import BM25Index

    built = BM25Index.expected_params(cfg.lexical)
    for c, p in zip(configs, points):
        if BM25Index.expected_params(c.lexical) != built:
            fields = [k for k in p if k.startswith("lexical.")]
            raise ConfigError(f"--grid {', '.join(fields)}: the BM25 index fixes this when it is built, so every value would "
                              "be scored with the one loaded index; build an index per value (python -m lexrag build --set "
                              "...) and compare their runs, or tune fields that act at query time")


def tune(cfg: Config, art: Artifacts, queries_path: str | Path, grid: Mapping[str, list], out: str | Path | None = None,
         paths=None) -> dict:
    """Search ``grid``; returns and (with ``out``) writes the result: the best point (the best
    held-out score over all folds), the nested Macro F1 by area and by course (the headline: each
    fold scored at the point picked on inner folds of the others), its held-out and in-sample
    Macro F1, each point's held-out and in-sample scores, the per-fold picks, and the tuned config."""
    from lexrag.errors import CsvInputError

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = {q: g for q, g in load_gold(queries_path).items() if g}
    if not gold:
        raise CsvInputError(f"{queries_path}: no query has gold citations; tune needs a file with gold")
    if len(gold) < 2:  # each point is scored on questions held out from the ones it is picked on
        raise CsvInputError(f"{queries_path}: {len(gold)} question with gold citations; tune holds questions out "
                            "to score each point, so it needs 2 or more (better: many, from several courses)")
    cited = [c for cs in gold.values() for c in cs]
    missing = len(outside_corpus(art.corpus, cited))
    if 0 < missing < len(cited) and missing > len(cited) / 2:  # as calibrate says: the scores count those as misses
        log.warning("tune: only %d of the %d gold citations of %s are citations of the corpus at %s; every point scores "
                    "the rest as misses", len(cited) - missing, len(cited), queries_path, art.corpus.folder)
    if missing == len(cited):  # every point would score 0: the pick would be noise
        raise CsvInputError(f"{queries_path}: none of its gold citations is a citation of the corpus at {art.corpus.folder}, "
                            "so every point would score 0 (another corpus? give the artifacts the gold was written for); "
                            "nothing was written")
    queries = [q for q in queries if q.query_id in gold]
    qs = {q.query_id: q for q in queries}
    names = list(grid)
    points = [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
    configs = [with_overrides(cfg, p) for p in points]  # every point checked before anything runs
    _refuse_build_time_fields(cfg, configs, points, art)
    courses = read_groups(queries_path)
    named = {courses.get(q, "") for q in gold} - {""}
    if len(named) < 2:  # nothing to hold out by course: said once, here, not once a grid point
        log.warning("%s: %s: folds by query, which overstates what tuning gains on unseen areas", queries_path,
                    "no course column" if not courses else f"all {len(gold)} questions are in one course ({next(iter(named), '')})")
        courses = {}
    areas = fold_groups(queries_path, "area", gold) if courses else {}
    by_area = bool(courses) and any(areas.get(q) != courses.get(q) for q in gold)
    groupings = {"area": areas, "course": courses} if by_area else {"course" if courses else "query": courses}
    if getattr(art, "calibration", None) is None:
        for p, c in zip(points, configs):
            if c.count.method == "adaptive" and c.count.w_cal > 0:
                warnings.warn(f"grid point {p}: count.method=adaptive weighs a calibration (count.w_cal), but none is loaded, "
                              "so this point counts without it (run `python -m lexrag calibrate` into the artifacts first)")
                break
    cache = SignalCache()
    with said_once(f"the {len(points)} grid points"):
        in_sample = [_scores(c, art, queries, gold, cache, paths) for c in configs]  # the artifacts' own prior (if any)
    if len(points) > 1 and all(s == in_sample[0] for s in in_sample[1:]):
        warnings.warn(f"every grid point scored the same on every one of the {len(gold)} questions: the grid over "
                      f"{', '.join(names)} changes nothing this config runs (a field of a stage that is off?); the first point "
                      "is kept")
    means = [float(np.mean(list(s.values()))) for s in in_sample]
    nested: dict[str, float] = {}
    picks: list[dict] = []
    held_means: list[float] = []
    n_folds = {}
    for g, groups in groupings.items():
        with said_once(f"the held-out runs of the {len(points)} grid points"):
            scores = [fold_scores(c, art, qs, gold, groups, cache, nested=True, measure=_prediction_f1, kind=GROUPING_KINDS[g])
                      for c in configs]
        fold_picks = nested_picks(scores)
        chosen = {q: float(scores[v].outer[q][0]) for f, (v, _) in zip(scores[0].folds, fold_picks) for q in f}
        nested[g] = float(np.mean(list(chosen.values())))
        n_folds[g] = len(scores[0].folds)
        if not held_means:  # the headline grouping: its picks and held-out means
            held_means = [float(np.mean([x[0] for x in s.outer.values()])) for s in scores]
            picks = [{"held_out": sorted({groups.get(q, q) for q in f})[:3], "queries": len(f), "point": points[v]}
                     for f, (v, _) in zip(scores[0].folds, fold_picks)]
    head = next(iter(groupings))
    best = int(np.argmax(held_means))
    result = {"grid": {k: list(v) for k, v in grid.items()}, "points": len(points), "queries": len(gold),
              "folds": n_folds[head], "grouped_by": head if head != "query" else "query (fewer than two courses)",
              "best": points[best], "macro_f1_in_sample": round(means[best], 4), "macro_f1_held_out": round(held_means[best], 4),
              "macro_f1_nested": round(nested[head], 4), "macro_f1_nested_by": {g: round(v, 4) for g, v in nested.items()},
              "folds_by": n_folds, "fold_picks": picks,
              "per_point": [{"point": p, "macro_f1": round(m, 4), "macro_f1_held_out": round(h, 4)}
                            for p, m, h in zip(points, means, held_means)],
              "signals_computed": sum(cache.computed.values()) + sum(cache.text_computed.values()), "reused": cache.reused}
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        others = "".join(f", by {g} ({n_folds[g]} folds) {v:.4f}" for g, v in nested.items() if g != head)
        header = (f"# tuned by `lexrag tune` on {queries_path} ({len(gold)} queries, {len(points)} grid points)\n"
                  f"# best point {points[best]}: Macro F1 nested by {result['grouped_by']} ({n_folds[head]} folds) "
                  f"{nested[head]:.4f}{others}; held out {held_means[best]:.4f}, in-sample {means[best]:.4f}\n")
        replace_text(out, header + yaml.safe_dump(configs[best].to_dict(), sort_keys=False, allow_unicode=True))
    log.debug("tune: best %s, nested by %s %.4f, held out %.4f, in-sample %.4f", points[best], head, nested[head],
             held_means[best], means[best])
    return result
