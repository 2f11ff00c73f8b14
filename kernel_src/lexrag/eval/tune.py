"""``lexrag tune``: a grid over config fields, scored by cross-validation grouped by course.

Every grid point runs the pipeline over the tuning file with one shared :class:`SignalCache`, so
retrieval is computed once and a point costs only what its fields change (fusion, count, the graph
signals when the seeds move).  The score of a point is the Macro F1 over queries.  Each point is
scored twice: in-sample (the artifacts' own prior) and held out (each course ranked with a prior
and statute model fitted on the other courses only, when the prior is on; otherwise the two are
the same).  The best point is the one with the best held-out score: the one that transfers to an
area the training questions do not cover.  Grouped CV is the honest estimate of that choice: each
course's questions scored with the point picked on the other courses' held-out scores.  The tuned
config (the best point, every field written out) is a YAML file ``--config`` accepts; its header
records the scores and the grid.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import yaml

from lexrag.config import Config, _UniqueKeyLoader, with_overrides
from lexrag.eval.cv import grouped_folds, held_out_artifacts, read_groups
from lexrag.eval.metrics import per_query_table
from lexrag.pipeline import Artifacts, SignalCache, run_pipeline
from lexrag.queries import load_gold, load_queries

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
            values = [yaml.load(v, Loader=_UniqueKeyLoader) for v in _split_top(raw) if v.strip()]  # aliases bounded
        except yaml.YAMLError as e:
            raise ConfigError(f"--grid {item!r}: a value is not valid YAML ({str(e).splitlines()[0]})") from None
        if not values:
            raise ConfigError(f"--grid {item!r} lists no values")
        field = path.strip()
        if field in grid:  # two flags for one field: keeping only the last would drop values silently
            raise ConfigError(f"--grid {field} is given twice ({first[field]!r} and {item!r}); list every value in one "
                              f"flag: --grid {field}={','.join(_split_top(first[field].split('=', 1)[1]) + _split_top(raw))}")
        grid[field] = values
        first[field] = item
    return grid


def _scores(cfg: Config, art: Artifacts, queries, gold, cache: SignalCache, paths=None) -> dict[str, float]:
    res = run_pipeline(queries, art, cfg, paths=paths, cache=cache)
    return {r["query_id"]: r["f1"] for r in per_query_table(gold, res.predictions, res.ranked)}


def tune(cfg: Config, art: Artifacts, queries_path: str | Path, grid: Mapping[str, list], out: str | Path | None = None,
         paths=None) -> dict:
    """Search ``grid``; returns and (with ``out``) writes the result: the best point (the best
    held-out score), its held-out, in-sample and grouped-CV Macro F1, each point's held-out and
    in-sample scores, the per-fold picks, and the tuned config."""
    from lexrag.errors import CsvInputError

    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = {q: g for q, g in load_gold(queries_path).items() if g}
    if not gold:
        raise CsvInputError(f"{queries_path}: no query has gold citations; tune needs a file with gold")
    queries = [q for q in queries if q.query_id in gold]
    names = list(grid)
    points = [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
    configs = [with_overrides(cfg, p) for p in points]  # every point checked before anything runs
    groups = read_groups(queries_path)
    folds = grouped_folds([q.query_id for q in queries], groups)
    cache = SignalCache()
    in_sample = [_scores(c, art, queries, gold, cache, paths) for c in configs]  # the artifacts' own prior (if any)
    means = [float(np.mean(list(s.values()))) for s in in_sample]
    # every course ranked at every point with a prior (and statute model) fitted on the other
    # courses only: one pass over the queries per point, each fold running just its own queries
    held_out = [dict() for _ in configs]
    texts = {q.query_id: q.text for q in queries}
    for fold in folds:
        test = set(fold)
        fold_art = held_out_artifacts(art, cfg, gold, texts, test)
        fold_queries = [q for q in queries if q.query_id in test]
        for i, c in enumerate(configs):
            s = in_sample[i] if fold_art is art else _scores(c, fold_art, fold_queries, {q: gold[q] for q in test}, cache, paths)
            held_out[i].update({q: s[q] for q in fold})
    # a course's point is picked on the other courses' held-out scores: rankings of the kind it is
    # applied to (picks on rankings whose prior has seen their own course favour the prior)
    held: dict[str, float] = {}
    picks = []
    for fold in folds:
        test = set(fold)
        train_means = [np.mean([v for q, v in s.items() if q not in test]) for s in held_out]
        pick = int(np.argmax(train_means))
        picks.append({"held_out": sorted({groups.get(q, q) for q in fold})[:3], "queries": len(fold), "point": points[pick]})
        held.update({q: held_out[pick][q] for q in fold})
    cv = float(np.mean([held[q] for q in gold if q in held]))
    held_means = [float(np.mean(list(h.values()))) for h in held_out]
    best = int(np.argmax(held_means))
    result = {"grid": {k: list(v) for k, v in grid.items()}, "points": len(points), "queries": len(gold),
              "folds": len(folds), "grouped_by": "course" if groups else "query (no course column)",
              "best": points[best], "macro_f1_in_sample": round(means[best], 4), "macro_f1_held_out": round(held_means[best], 4),
              "macro_f1_grouped_cv": round(cv, 4),
              "fold_picks": picks, "per_point": [{"point": p, "macro_f1": round(m, 4), "macro_f1_held_out": round(h, 4)}
                            for p, m, h in zip(points, means, held_means)],
              "signals_computed": sum(cache.computed.values()) + sum(cache.text_computed.values()), "reused": cache.reused}
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        header = (f"# tuned by `lexrag tune` on {queries_path} ({len(gold)} queries, {len(points)} grid points)\n"
                  f"# best point {points[best]}: Macro F1 held out {held_means[best]:.4f}, in-sample {means[best]:.4f}, grouped CV by "
                  f"{result['grouped_by']} ({len(folds)} folds) {cv:.4f}\n")
        out.write_text(header + yaml.safe_dump(configs[best].to_dict(), sort_keys=False, allow_unicode=True), encoding="utf-8")
    log.info("tune: best %s held out %.4f, in-sample %.4f, grouped CV %.4f", points[best], held_means[best], means[best], cv)
    return result
