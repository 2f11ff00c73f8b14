"""The one experiment harness: configurations measured by nested cross-validation on held-out
courses or legal areas.

A *variant* is a preset name plus config overrides (``exam``, ``exam;statutes.learned=false``,
``"no graph=default;graph.enabled=false"``).  Each variant ranks every question of the tuning
file (lexam_dev.csv) held out: the question's fold (its course, its legal area, or a slice of
queries) is ranked with the training prior and the learned statute model refitted on the other
folds' gold only (:func:`held_out_runs`, the one place that does this).  Every choice — the count
``k``, and among variants which one — is made *nested*: for outer fold A it is made on inner
rankings of the other folds B, each ranked with a prior fitted without A and B, and the number
reported is A's at that choice.  Signals are computed once per process (one :class:`SignalCache`:
a grid over fusion weights or the count re-fuses the stored signal runs).

A locked split (``repro/locked_split.yaml``: a third of the legal areas) is left out of every
fold; only ``--final`` reads it, ranking it once with the prior fitted on the other areas and the
``k`` they chose.  Other query files (train_dev.csv, val.csv) are only scored, at that same ``k``.

    python scripts/quality.py --data ../shared/data --artifacts ARTIFACTS [--final] [--json OUT]

writes a metrics JSON whose flat ``metrics`` block ``lexrag check-scores`` compares with
``repro/lexam_dev.yaml``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from lexrag.config import Config, load_config
from lexrag.errors import ConfigError
from lexrag.eval.cv import format_area_map, grouped_folds, held_out_artifacts, refits_prior
from lexrag.eval.experiment_questions import read_questions
from lexrag.eval.experiment_scores import (KS, ceilings, compare, f1_at_ks, flat_metrics, own_count_f1, ranking_f1,
                                           summary_row)
from lexrag.eval.metrics import prf, recall_at_k
from lexrag.eval.variants import RANK, Variant
from lexrag.eval.submission import outside_corpus
from lexrag.pipeline import Artifacts, RunResult, SignalCache, run_pipeline
from lexrag.queries import load_gold, load_queries

__all__ = ["held_out_runs", "held_out_rankings", "harness_ranker", "FoldScores", "GROUPING_KINDS", "fold_scores", "nested_picks",
           "run_experiment"]

log = logging.getLogger(__name__)

# --- held-out rankings: the one place a fold is ranked without its own gold ---------------------

def held_out_runs(cfg: Config, art: Artifacts, queries: Mapping[str, Any], gold: Mapping[str, Sequence[str]],
                  folds: Sequence[Sequence[str]], cache: SignalCache | None = None,
                  also_exclude: Sequence[str] = ()) -> Iterator[tuple[list[str], Artifacts, RunResult]]:
    """Each fold of ``folds`` ranked with the prior and learned statute model refitted on the gold
    of ``gold``'s other queries (minus ``also_exclude``): yields (fold, its artifacts, its run).
    When ``cfg`` reads no prior the artifacts are used as loaded, in one run over every fold.
    ``queries``: query id -> QueryState."""
    texts = {q: x.text for q, x in queries.items()}
    if not refits_prior(art, cfg):
        res = run_pipeline([queries[q] for f in folds for q in f], art, cfg, cache=cache)
        for f in folds:
            yield list(f), art, res
        return
    for fold in folds:
        fart = held_out_artifacts(art, cfg, gold, texts, set(fold) | set(also_exclude))
        res = run_pipeline([queries[q] for q in fold], fart, cfg, cache=cache)
        yield list(fold), fart, res
        if cache is not None and fart is not art:
            cache.store.clear()  # keyed by the refitted prior: never reused, so not kept (the BM25 texts are)


def held_out_rankings(cfg: Config, art: Artifacts, queries: Mapping[str, Any], gold: Mapping[str, Sequence[str]],
                      folds: Sequence[Sequence[str]], cache: SignalCache | None = None,
                      also_exclude: Sequence[str] = ()) -> dict[str, list[str]]:
    """query id -> its held-out ranking (citations, :data:`RANK_DEPTH` deep) for every query of ``folds``."""
    out: dict[str, list[str]] = {}
    for fold, _, res in held_out_runs(cfg, art, queries, gold, folds, cache, also_exclude):
        out.update({q: res.ranked.get(q, []) for q in fold})
    return out


def harness_ranker(cfg: Config, art: Artifacts, queries: Mapping[str, Any], gold: Mapping[str, Sequence[str]]):
    """A learned ranker holding the training rows of every question of ``gold``, from one run of
    ``cfg`` as a build trains it (:func:`lexrag.pipeline.ranker_fit.candidate_config`: without
    the ranker, the prior and learned statutes, whose signals would be fitted on the questions
    they describe), so :func:`held_out_artifacts` refits it on each fold's training questions;
    the ranker ``art`` loaded is not used."""
    from lexrag.pipeline.ranker_fit import candidate_config, training_rows
    from lexrag.stages.ranker import LearnedRanker

    rows, signals = training_rows([queries[q] for q in gold if q in queries], gold, dataclasses.replace(art, ranker=None),
                                  candidate_config(cfg))
    return LearnedRanker.fit(rows, signals, calibrate=cfg.count.method == "expected_f1")


@dataclass
class FoldScores:
    """One variant's held-out scores under one grouping: ``outer[q]`` F1 at each k of :data:`KS`
    (the query ranked without its fold), ``inner[i][q]`` the same for the queries outside fold
    ``i`` ranked also without fold ``i`` (what a choice for fold ``i`` may read), ``recall100[q]``,
    and the outer rankings."""

    folds: list[list[str]]
    outer: dict[str, np.ndarray]
    inner: list[dict[str, np.ndarray]]
    recall100: dict[str, float]
    ranked: dict[str, list[str]]
    predicted: dict[str, list[str]] = field(default_factory=dict)  # what the config's own count emitted


GROUPING_KINDS = {"course": "course", "area": "legal area", "query": None}  # None: folds by query were asked for


def fold_scores(cfg: Config, art: Artifacts, queries: Mapping[str, Any], gold: Mapping[str, Sequence[str]],
                groups: Mapping[str, str], cache: SignalCache | None = None, nested: bool = True,
                measure: Callable[[Sequence[str], RunResult, str], np.ndarray] = ranking_f1,
                kind: str | None = "course") -> FoldScores:
    """Outer and inner held-out scores of one variant over ``gold``'s queries grouped by ``groups``
    (``measure``: a query's scores from its run; default F1 at each k).  Without a prior refit the
    inner scores are the outer ones (nothing fitted depends on the fold); with one, fold j's inner
    ranking for outer fold i uses a prior fitted without i and j."""
    qids = [q for q in gold if q in queries]
    folds = grouped_folds(qids, dict(groups), kind=kind)
    refit = refits_prior(art, cfg)

    predicted: dict[str, list[str]] = {}

    def score(fs, exclude=()):
        out, ranked = {}, {}
        for fold, _, res in held_out_runs(cfg, art, queries, gold, fs, cache, also_exclude=exclude):
            for q in fold:
                out[q] = measure(gold[q], res, q)
                ranked[q] = res.ranked.get(q, [])
                if not exclude:
                    predicted[q] = res.predictions.get(q, [])
        return out, ranked

    outer, ranked = score(folds)
    inner: list[dict[str, np.ndarray]] = []
    for i, fold in enumerate(folds):
        others = [f for j, f in enumerate(folds) if j != i]
        if refit and nested:
            inner.append(score(others, fold)[0])
        else:
            inner.append({q: outer[q] for f in others for q in f})
    return FoldScores(folds, outer, inner, {q: recall_at_k(gold[q], ranked[q], 100) for q in qids}, ranked, predicted)


def nested_picks(scores: Sequence[FoldScores]) -> list[tuple[int, int]]:
    """For each outer fold (the folds of ``scores[0]``): the (variant index, k) with the best mean
    inner F1 over the other folds' queries; ties go to the earlier variant and the smaller k."""
    picks = []
    for i in range(len(scores[0].folds)):
        means = np.array([np.mean(list(s.inner[i].values()), axis=0) for s in scores])  # variants x ks
        v, k = np.unravel_index(int(np.argmax(means)), means.shape)
        picks.append((int(v), KS[int(k)]))
    return picks


# --- an experiment --------------------------------------------------------------------------------

def _bm25_of_variants(variants: Sequence[Variant], config, base_cfg: Config, artifacts, art: Artifacts,
                      bm25: Sequence[str | Path] = ()) -> dict[str, Any]:
    """The BM25 index each variant is scored with: the artifacts' own, or for a variant that changes
    what an index fixes when it is built (its fields, k1, b, the analyzer) the one of ``bm25``
    (further index folders over the same corpus) built with its settings.  A variant no index
    fits is refused: the loaded index would score it as the variant without the change."""
    from lexrag.artifacts import corpus_id, read_params
    from lexrag.index.lexical import BM25Index

    built = BM25Index.expected_params(base_cfg.lexical)
    others = {str(f): read_params(f, "bm25").get("params", {}) for f in bm25}
    loaded: dict[str, Any] = {}
    out: dict[str, Any] = {}
    for v in variants:
        want = BM25Index.expected_params(v.config(config).lexical)
        changed = [k for k, x in want.items() if built.get(k) != x]
        if not changed or not v.config(config).lexical.enabled:
            continue
        folder = next((f for f, p in others.items() if all(p.get(k) == x for k, x in want.items())), None)
        if folder is None:
            raise ConfigError(f"variant {v.name!r} changes {', '.join(changed)} of BM25, which the index in {artifacts} fixes "
                              "when it is built, so it would score as the variant without the change; build an index "
                              "with it over the same corpus (lexrag.pipeline.build.build_index) and pass it with --bm25, "
                              "or build artifacts with it (python -m lexrag build --set ...) and pass them with --artifacts")
        if folder not in loaded:
            loaded[folder] = BM25Index.load(folder, v.config(config).lexical, corpus_id=corpus_id(Path(artifacts) / "corpus"),
                                            n_docs=len(art.corpus))
        out[v.name] = loaded[folder]
    return out


def run_experiment(variants: Sequence[Variant], data: str | Path, artifacts: str | Path, tune_on: str = "lexam_dev.csv",
                   others: Sequence[str] = ("train_dev.csv", "val.csv"), by: Sequence[str] = ("course", "area"),
                   final: bool = False, locked: dict | None = None, dev_areas: int | None = None, nested: bool = True,
                   config: str | Path | None = None, bm25: Sequence[str | Path] = (), baselines: Sequence[str] = ()) -> dict:
    """Measure ``variants``: on ``tune_on`` held out and nested under each grouping of ``by``
    (``course``, ``area``, ``query``), with a nested pick among the variants; ``others`` scored at
    the k the area-grouped outer rankings favour; with ``final`` the locked areas too.  Returns the
    metrics document (``rows``, the flat ``metrics`` that check-scores reads, the area map, picks).
    ``bm25``: further BM25 index folders over the artifacts' corpus, for variants built otherwise
    (other ``lexical.fields``: the statute headings' weights).  ``baselines``: variant names;
    every other variant's per-query differences from each, paired (:func:`compare`)."""
    t_start = time.perf_counter()
    data = Path(data)
    tune_file = data / tune_on
    all_gold, courses, areas, q_area, locked, locked_q, dev = read_questions(data, tune_on, final, locked, dev_areas)
    groupings = {"course": courses, "area": q_area, "query": {}}
    # every part a variant may switch on, loaded once (the dictionary where the artifacts hold one)
    has_dictionary = (Path(artifacts) / "dictionary" / "params.json").is_file()
    has_english = (Path(artifacts) / "bm25_en" / "params.json").is_file()
    base_cfg = load_config(config, {**RANK, "graph.enabled": True, "prior.enabled": True, "dictionary.enabled": has_dictionary,
                                    "english.enabled": has_english})
    base_art = Artifacts.from_folder(artifacts, base_cfg)
    cache = SignalCache()
    rows: dict[str, dict] = {}
    scores: dict[str, dict[str, FoldScores]] = {g: {} for g in by}
    other_gold = {f: {q: g for q, g in load_gold(data / f).items() if g} for f in others}
    outside = {}  # gold no run can find (the laws lack its text, or the artifacts are of another corpus)
    for f, gold in ((tune_on, all_gold), *other_gold.items()):
        cited = [c for cs in gold.values() for c in cs]
        outside[f] = [len(outside_corpus(base_art.corpus, cited)), len(cited)]
    own_bm25 = _bm25_of_variants(variants, config, base_cfg, artifacts, base_art, bm25)
    timings: dict[str, float] = {}
    per_query: dict[str, dict[str, tuple[dict, dict]]] = {v.name: {} for v in variants}  # part -> (F1, Recall@100) per query
    unknown = [b for b in baselines if b not in per_query]
    if unknown:  # before the run, not after it
        raise ConfigError(f"--baseline {unknown[0]!r} is none of the variants ({', '.join(per_query)})")
    for v in variants:
        t0 = time.perf_counter()
        cfg = v.config(config)
        if cfg.dictionary.enabled and base_art.dictionary is None:
            raise ConfigError(f"variant {v.name!r} switches the dictionary on, but {artifacts} holds none: build it with "
                              f"`python -m lexrag build ... --dictionary /usr/share/trans/de-en --out {artifacts}`")
        if cfg.english.enabled and base_art.bm25_en is None:
            raise ConfigError(f"variant {v.name!r} switches the English route on, but {artifacts} holds no bm25_en: build it "
                              f"with `python -m lexrag build ... --laws-en laws_en.csv --out {artifacts}`")
        art = dataclasses.replace(base_art, graph=base_art.graph if cfg.graph.enabled else None,
                                  prior=base_art.prior if cfg.uses_prior() else None,
                                  dictionary=base_art.dictionary if cfg.dictionary.enabled else None,
                                  bm25_en=base_art.bm25_en if cfg.english.enabled else None,
                                  bm25=own_bm25.get(v.name, base_art.bm25))
        qs = {q.query_id: q for q in load_queries(tune_file, cfg.query.max_chars)}
        if cfg.ranker.enabled:  # fitted per fold, on the rows of the training questions only
            art = dataclasses.replace(art, ranker=harness_ranker(cfg, art, qs, dev))
        once = None
        if not refits_prior(art, cfg):  # nothing fitted: every question ranked once, for every grouping
            once = held_out_rankings(cfg, art, qs, dev, [list(dev) + (locked_q if final else [])], cache)
        row: dict[str, Any] = {"preset": v.preset or "default", "overrides": dict(v.overrides)}
        own = cfg.count.method != "fixed"  # the config counts for itself: scored as emitted, no k is chosen
        for g in by:
            fs = fold_scores(cfg, art, qs, dev, groupings[g], cache, nested, own_count_f1 if own else ranking_f1,
                             kind=GROUPING_KINDS[g])
            scores[g][v.name] = fs
            picks = [k for _, k in nested_picks([fs])]
            chosen = {q: float(fs.outer[q][k - 1]) for f, k in zip(fs.folds, picks) for q in f}
            at = {q: f1_at_ks(dev[q], fs.ranked[q], (3, 5)) for q in fs.outer}
            row[g] = {"folds": len(fs.folds), "f1@3": round(float(np.mean([x[0] for x in at.values()])), 4),
                      "f1@5": round(float(np.mean([x[1] for x in at.values()])), 4),
                      "nested": summary_row(chosen, fs.recall100), "k_picks": cfg.count.method if own else picks}
            per_query[v.name][g] = (chosen, fs.recall100)
            if own:
                row[g]["mean_k"] = round(float(np.mean([len(fs.predicted.get(q, [])) for q in fs.outer])), 2)
        # the count for everything outside the folds: the k the area-grouped (else first) outer rankings favour
        ref = scores["area" if "area" in by else by[0]][v.name]
        k_star = KS[int(np.argmax(np.mean(list(ref.outer.values()), axis=0)))]
        row["k"] = cfg.count.method if own else k_star

        def emitted(res, q):
            return res.predictions.get(q, []) if own else res.ranked.get(q, [])[:k_star]

        fit = None
        if others or (final and locked_q):
            fit = held_out_artifacts(art, cfg, dev, {q: x.text for q, x in qs.items()}, set())  # the prior of every dev area
        for f in others:
            fq = {q.query_id: q for q in load_queries(data / f, cfg.query.max_chars) if q.query_id in other_gold[f]}
            res = run_pipeline(list(fq.values()), fit, cfg, cache=cache)
            gold = other_gold[f]
            per_query[v.name][f] = ({q: prf(gold[q], emitted(res, q))[2] for q in gold},
                                    {q: recall_at_k(gold[q], res.ranked.get(q, []), 100) for q in gold})
            row[f] = {**summary_row(*per_query[v.name][f]),
                      "f1@3": round(float(np.mean([prf(gold[q], res.ranked.get(q, [])[:3])[2] for q in gold])), 4)}
        if final and locked_q:
            if once is not None and not own:
                lr, lp = {q: once[q] for q in locked_q}, {q: once[q][:k_star] for q in locked_q}
            else:
                lres = run_pipeline([qs[q] for q in locked_q], fit, cfg, cache=cache)
                lr, lp = lres.ranked, {q: emitted(lres, q) for q in locked_q}
            lg = {q: all_gold[q] for q in locked_q}
            per_query[v.name]["locked"] = ({q: prf(lg[q], lp.get(q, []))[2] for q in lg},
                                           {q: recall_at_k(lg[q], lr.get(q, []), 100) for q in lg})
            row["locked"] = {**summary_row(*per_query[v.name]["locked"]),
                             "f1@3": round(float(np.mean([prf(lg[q], lr.get(q, [])[:3])[2] for q in lg])), 4)}
        ref_ranked = scores["area" if "area" in by else by[0]][v.name].ranked
        row["ceilings"] = {k: round(x, 4) for k, x in ceilings({q: dev[q] for q in ref_ranked}, ref_ranked).items()}
        cache.store.clear()
        timings[v.name] = round(time.perf_counter() - t0, 1)
        rows[v.name] = row
        log.info("%s: %.0f s; %s", v.name, timings[v.name], "; ".join(
            f"{g} nested F1 {row[g]['nested']['macro_f1']:.4f} R@100 {row[g]['nested']['recall@100']:.4f}" for g in by))
    # the nested pick among the variants: which configuration, and its k, chosen on inner folds
    selection: dict[str, dict] = {}
    if len(variants) > 1:
        names = [v.name for v in variants]
        for g in by:
            fs_list = [scores[g][n] for n in names]
            picks = nested_picks(fs_list)
            chosen = {q: float(fs_list[vi].outer[q][k - 1]) for f, (vi, k) in zip(fs_list[0].folds, picks) for q in f}
            r100 = {q: fs_list[vi].recall100[q] for f, (vi, k) in zip(fs_list[0].folds, picks) for q in f}
            own = [rows[n]["k"] if isinstance(rows[n]["k"], str) else None for n in names]  # a count of its own: no k
            selection[g] = {**summary_row(chosen, r100),
                            "picks": [f"{names[vi]} ({own[vi]})" if own[vi] else f"{names[vi]} k={k}" for vi, k in picks]}
    paired = {b: {name: compare(per_query[b], parts) for name, parts in per_query.items() if name != b} for b in baselines}
    metrics = flat_metrics(rows, selection, by, others)
    seconds = round(time.perf_counter() - t_start, 1)
    return {"command": " ".join(sys.argv), "date": _dt.date.today().isoformat(), "seconds": seconds,
            "tune_on": tune_on, "questions": len(dev), "locked_questions": len(locked_q), "final": final,
            "areas": sorted(set(q_area[q] for q in dev)), "locked_areas": [a.get("area") for a in locked.get("areas", [])],
            "area_map": format_area_map(all_gold, courses, areas), "by": list(by), "rows": rows, "selection": selection,
            "metrics": metrics, "seconds_per_variant": timings, "vs_baseline": paired, "gold_outside_corpus": outside,
            "signals_computed": sum(cache.computed.values()) + sum(cache.text_computed.values()), "reused": cache.reused}
