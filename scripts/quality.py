#!/usr/bin/env python
"""Quality of the pipeline on the real data in ../shared/data (a script, not a test).

Builds the artifacts from laws_de.csv (plus court considerations when given), runs the pipeline
over each query file and prints Macro F1 (with a 95% bootstrap interval over queries), precision,
recall and Recall@100 for: the core (BM25 + the citations a question names), each retrieval
addition alone on top of it, what the defaults keep, and everything together.  Counts: k = 3,
k = 5, the k picked by grouped cross-validation and a per-query count from the score curve (the
relative-score threshold of ``lexrag calibrate``).  On the tuning set (lexam_dev.csv) every number
is grouped cross-validation by course: each course's questions are ranked with a training prior
(and learned statute model) fitted on the other courses only and cut with the k or threshold
picked on the other courses' rankings of that same kind (each ranked without its own course).  The median picks are then applied to train_dev.csv and val.csv,
which are only ever scored.  Then, fold by fold: does the score curve or the fixed k win?  Last,
statute detection fold by fold: precision and recall of the law codes each predictor gives.

  python scripts/quality.py --data ../shared/data [--courts FILE] [--artifacts DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml
from lexrag.config import load_config
from lexrag.eval.calibrate import fit_threshold
from lexrag.eval.cv import grouped_folds, held_out_artifacts, read_groups, refits_prior
from lexrag.eval.metrics import evaluate, per_query_table, prf
from lexrag.eval.stats import bootstrap_ci
from lexrag.index.build import build_artifacts
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.stages.count import curve_cut, unique_citations, with_whole_articles

KS = list(range(1, 31))
# the retrieval stages of the kaggle preset (which also has dense, rerank and LLM stages); also
# what experiment_statutes.py runs
KAGGLE_RETRIEVAL = {"graph.enabled": True, "prior.enabled": True, "statutes.enabled": True, "statutes.learned": True,
                    "feedback.enabled": True, "articles.enabled": True, "fusion.head": 30}
# whole articles for exam-style gold: the first five slots as ranked, then each article after its
# first paragraph (README "Whole articles")
WHOLE_ARTICLES = {"count.whole_articles": 1, "count.whole_articles_from": 5}


def experiment_args(doc: str) -> argparse.Namespace:
    """``--data`` and ``--artifacts`` of the issue-12 experiment scripts, whose artifacts are built
    with ``--train lexam_dev.csv`` (README "Quality on real data"); library warnings silenced."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True, help="artifacts built with --train lexam_dev.csv (see the README)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    return args


def emit_curve(citations: list[str], scores: list[float], threshold: float, max_k: int, cfg) -> list[str]:
    """What the pipeline emits with a score-curve count: the cut on the fused order, then whole
    articles inserted (``count.whole_articles``) inside the same number of slots."""
    out = curve_cut(citations, scores, threshold, max_k)
    return with_whole_articles(out, scores[: len(out)], cfg.count.whole_articles, cfg.count.whole_articles_from)[0][: len(out)]


def cut(ranked: dict[str, list[str]], k: int) -> dict[str, list[str]]:
    return {q: r[:k] for q, r in ranked.items()}


def _row(gold: dict, pred: dict, ranked: dict) -> dict:
    """Macro F1 with its 95% bootstrap interval, precision, recall and Recall@100 over ``gold``."""
    m = evaluate(gold, {q: pred.get(q, []) for q in gold}, ranked, ks=(100,))
    return {**m, "ci": bootstrap_ci([r["f1"] for r in per_query_table(gold, {q: pred.get(q, []) for q in gold})])}


CEILINGS = ("as ranked", "oracle citation form", "k = gold count", "best k per question")


def ceilings(gold: dict, ranked: dict, k: int = 3) -> dict[str, float]:
    """Where Macro F1 at ``k`` is lost, on the same rankings: as they are; with each paragraph
    written as its whole article where that is the form the gold cites and the paragraph is not
    ("Art. 41 OR" for "Art. 41 Abs. 1 OR"); cut at each question's own gold count; cut at each
    question's best k (1..30).  Upper bounds for a citation-form rule, a count rule and the count
    together with nothing else changed."""
    from lexrag.citations import parent, scoring_form

    out = dict.fromkeys(CEILINGS, 0.0)
    for q, g in gold.items():
        r = ranked.get(q, [])
        gs = {scoring_form(x) for x in g}
        formed: list[str] = []
        for c in r:
            whole = parent(c) if c.startswith("Art") else c
            c = whole if scoring_form(c) not in gs and scoring_form(whole) in gs else c
            if c not in formed:
                formed.append(c)
        out["as ranked"] += prf(g, r[:k])[2]
        out["oracle citation form"] += prf(g, formed[:k])[2]
        out["k = gold count"] += prf(g, r[: len(gs)])[2]
        out["best k per question"] += max(prf(g, r[:kk])[2] for kk in KS)
    return {name: v / max(len(gold), 1) for name, v in out.items()}


def summary_table(results: dict, names: list[str], tune_on: str, queries: list[str]) -> str:
    """One line per configuration: the numbers the README table shows."""
    others = [f for f in queries if f != tune_on]
    head = (["lexam F1@3", "F1@5", "F1 CV k", "F1 curve", "R@100"] if tune_on in queries else []) + \
        [x for f in others for x in (f"{Path(f).stem} F1@3", "F1 curve", "R@100")]
    lines = ["", "| signals | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(head)]
    for name in names:
        rows = {(f, c): m for (n, f, c), m in results.items() if n == name}
        cells = []
        if tune_on in queries:
            tune = {c.split(": ", 1)[1]: m for (f, c), m in rows.items() if f == tune_on}
            pick = next(m for c, m in tune.items() if c.startswith("k picked"))
            curve = next(m for c, m in tune.items() if c.startswith("score-curve"))
            cells += [f"{tune['k=3']['macro_f1']:.3f}", f"{tune['k=5']['macro_f1']:.3f}", f"{pick['macro_f1']:.3f}",
                      f"{curve['macro_f1']:.3f}", f"{pick['recall@100']:.3f}"]
        for f in others:
            k3 = rows[(f, "k=3")]
            curve = next(m for (ff, c), m in rows.items() if ff == f and c.startswith("score curve"))
            cells += [f"{k3['macro_f1']:.3f}", f"{curve['macro_f1']:.3f}", f"{k3['recall@100']:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PREDICTORS = ("named", "learned", "vote", "named + learned", "agreed")


def code_report(data: Path, tune_on: str, others: list[str], art_dir: Path, config: str | None) -> dict:
    """Statute detection, fold by fold: precision and recall of the law codes each predictor gives
    a question against the codes of its gold citations (``eval.metrics.code_prediction``).  On the
    tuning file each course is a fold and the learned model is fitted on the other courses; the
    other files use the model of the prior artifact (built from --train).  Predictors: the codes the question names,
    the learned model's best ``statutes.learned_codes``, the one code the statute vote favours, and
    the codes of the statute stage's two signals: named then learned (``statute_codes``, the
    ``bm25_statute`` signal) and the agreed ones (``agreed_codes``, ``bm25_statute_agreed``)."""
    from lexrag.eval.metrics import code_prediction
    from lexrag.stages.statutes import agreed_codes, detector_for, predicted_codes, statute_codes

    cfg = load_config(config, {"runtime.progress": False, "statutes.enabled": True, "statutes.learned": True})
    art = Artifacts.load(art_dir, cfg)
    det = detector_for(art.corpus)
    sc, lc = cfg.statutes, cfg.lexical

    def predict(queries, prior, own: bool) -> dict:
        out: dict = {p: {} for p in PREDICTORS}
        for q in queries:
            predicted = predicted_codes(det, q.text, sc, prior, q.query_id if own else None)
            scores = art.bm25.query_scores(q.text, lc)  # as the lexical stage scores it
            out["named"][q.query_id] = predicted[0]
            out["learned"][q.query_id] = [c for c, _ in predicted[1][: sc.learned_codes]]
            out["vote"][q.query_id] = det.voted(scores, lc.code_vote_depth, 1) if scores is not None else []
            out["named + learned"][q.query_id] = statute_codes(det, q.text, sc, predicted=predicted)
            out["agreed"][q.query_id] = agreed_codes(det, q.text, sc, prior, scores=scores, predicted=predicted) if scores is not None else []
        return out

    numbers: dict = {}
    tune_file = data / tune_on
    gold = {q: g for q, g in load_gold(tune_file).items() if g}
    qs = {q.query_id: q for q in load_queries(tune_file, cfg.query.max_chars)}
    groups = read_groups(tune_file)
    pooled: dict = {p: {} for p in PREDICTORS}
    texts = {q: x.text for q, x in qs.items()}
    for i, fold in enumerate(grouped_folds(list(gold), groups), 1):
        prior = held_out_artifacts(art, cfg, gold, texts, set(fold)).prior
        pred = predict([qs[q] for q in fold if q in qs], prior, own=False)
        fg = {q: gold[q] for q in fold}
        courses = sorted({groups[q] for q in fold if q in groups})  # folds may merge courses; no course column: numbered
        label = " + ".join(courses) if courses else f"fold {i}"
        numbers[f"{tune_on} / {label}"] = {p: code_prediction(fg, pred[p]) for p in PREDICTORS}
        for p in PREDICTORS:
            pooled[p].update(pred[p])
    numbers[f"{tune_on} / all courses (held out)"] = {p: code_prediction(gold, pooled[p]) for p in PREDICTORS}
    for f in others:
        g = {q: x for q, x in load_gold(data / f).items() if x}
        pred = predict([q for q in load_queries(data / f, cfg.query.max_chars) if q.query_id in g], art.prior, own=False)
        numbers[f] = {p: code_prediction(g, pred[p]) for p in PREDICTORS}
    head = "| fold | questions | " + " | ".join(f"{p} P / R" for p in PREDICTORS) + " | codes/question (named + learned, agreed) |"
    lines = ["", "statute detection by fold (law codes of each question's gold; learned model fitted without the fold's course)",
             head, "| --- |" + " --- |" * (len(PREDICTORS) + 2)]
    for name, m in numbers.items():
        cells = [f"{m[p]['precision']:.2f} / {m[p]['recall']:.2f}" for p in PREDICTORS]
        lines.append(f"| {name} | {m['named']['n']} | " + " | ".join(cells) + f" | {m['named + learned']['per_query']:.2f}, {m['agreed']['per_query']:.2f} |")
    return {"numbers": numbers, "table": "\n".join(lines)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--laws", help="default: DATA/laws_de.csv")
    ap.add_argument("--courts", help="court considerations CSV (optional)")
    ap.add_argument("--queries", nargs="*", default=["lexam_dev.csv", "train_dev.csv", "val.csv"])
    ap.add_argument("--tune-on", default="lexam_dev.csv", help="query file whose CV picks k")
    ap.add_argument("--artifacts", help="reuse (or write) artifacts here instead of a temp folder")
    ap.add_argument("--config")
    ap.add_argument("--train", help="query file (under --data) the training prior is built from; never val.csv")
    ap.add_argument("--variants", nargs="*", help="extra variants 'NAME:section.field=value;...' on top of bm25 + seeds")
    ap.add_argument("--only", nargs="*", help="run only these variant names")
    ap.add_argument("--no-keys", action="store_true", help="do not add laws_de_citations.txt keys without text")
    ap.add_argument("--json", help="write all numbers to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    data = Path(args.data)
    laws = Path(args.laws) if args.laws else data / "laws_de.csv"
    cfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, "graph.enabled": True})
    art_dir = Path(args.artifacts) if args.artifacts else Path(tempfile.mkdtemp(prefix="lexrag-quality-"))
    if args.train and Path(args.train).name == "val.csv":
        ap.error("the prior is never built from val.csv")
    if not (art_dir / "bm25" / "params.json").is_file():
        t0 = time.perf_counter()
        keys = data / "laws_de_citations.txt"
        abbrev = data / "abbrev-translations.json"
        build_artifacts(cfg, laws, art_dir, courts=args.courts, law_keys=keys if keys.is_file() and not args.no_keys else None,
                        train=data / args.train if args.train else None, abbreviations=abbrev if abbrev.is_file() else None)
        print(f"built artifacts in {time.perf_counter() - t0:.1f}s -> {art_dir}", file=sys.stderr)

    # the core before issue 12 (BM25 + the citations the question names), each addition alone on
    # top of it, what the defaults keep, and everything together
    base = {"graph.enabled": False, "prior.enabled": False}
    core = {**base, "lexical.code_vote": 0.0, "lexical.numbered_code_weight": 1.0}
    variants = {
        "bm25 only": {**core, "seeds.enabled": False},
        "core: bm25 + citation seeds": core,
        "+ statute vote": {**core, "lexical.code_vote": 1.0, "lexical.numbered_code_weight": 0.5},
        "+ named statutes": {**core, "statutes.enabled": True},
        "+ article ranking": {**core, "articles.enabled": True},
        "+ feedback (PRF)": {**core, "feedback.enabled": True},
        "+ graph": {**core, "graph.enabled": True},
        "+ whole articles": {**core, **WHOLE_ARTICLES},
        "+ question sentences x2": {**core, "lexical.question_weight": 2},
    }
    everything = {"statutes.enabled": True, "articles.enabled": True, "feedback.enabled": True, "graph.enabled": True,
                  "fusion.head": 30, **WHOLE_ARTICLES}
    if args.train:
        variants["+ learned statutes"] = {**core, "statutes.enabled": True, "statutes.learned": True}
        variants["+ prior"] = {**core, "prior.enabled": True}
        everything.update({"statutes.learned": True, "prior.enabled": True})
    variants["kept (the defaults)"] = base
    if args.train:
        variants["kaggle retrieval"] = dict(KAGGLE_RETRIEVAL)
        variants["kaggle retrieval + whole articles"] = {**variants["kaggle retrieval"], **WHOLE_ARTICLES}
        variants["kaggle retrieval, no head reorder"] = {**variants["kaggle retrieval"], "fusion.head": 0}
        variants["kaggle retrieval, no article ranking"] = {**variants["kaggle retrieval"], "articles.enabled": False}
        variants["kaggle retrieval, no agreed codes"] = {**variants["kaggle retrieval"], "statutes.agree": 0.0}
    variants["all together"] = {**base, **everything}
    for v in args.variants or []:
        name, _, over = v.partition(":")
        variants[name] = {**base, **{k: yaml.safe_load(x) for k, x in (o.split("=", 1) for o in over.split(";") if o)}}
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only}
    results: dict = {}
    ranked_by: dict = {}
    curves_by: dict = {}
    max_k = KS[-1]
    same_as: dict = {}  # variant -> the earlier variant with the same configuration (its runs are reused)
    seen: dict = {}
    for name, over in variants.items():
        vcfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, **over})
        key = json.dumps(vcfg.to_dict(), sort_keys=True, default=str)
        if key in seen:  # its rows are copied from the first variant with this configuration below
            same_as[name] = seen[key]
            print(f"{name!r} is the same configuration as {seen[key]!r}: its numbers are reused", file=sys.stderr)
            continue
        seen[key] = name
        art = Artifacts.load(art_dir, vcfg)
        for qfile in args.queries:
            gold = {q: g for q, g in load_gold(data / qfile).items() if g}
            if qfile == args.tune_on and refits_prior(art, vcfg):  # ranked only held out, course by course, below
                ranked_by[(name, qfile)] = (gold, None)
                continue
            qs = load_queries(data / qfile, vcfg.query.max_chars)
            t0 = time.perf_counter()
            res = run_pipeline(qs, art, vcfg)
            dt = (time.perf_counter() - t0) / max(len(qs), 1)
            ranked_by[(name, qfile)] = (gold, res.ranked)
            curves_by[(name, qfile)] = {q: unique_citations(res.current.hits.get(q, []), art.corpus)[1:] for q in gold}
            if qfile != args.tune_on:  # the tuning file's rows come from the held-out rankings below
                for k in (3, 5):
                    results[(name, qfile, f"k={k}")] = _row(gold, cut(res.ranked, k), res.ranked) | {"s_per_query": dt}

    # grouped cross-validation by course on the tuning set: each course is ranked with a prior (and
    # statute model) fitted on the other courses only, and cut at the k (and, separately, the
    # score-curve threshold) picked on the other courses' held-out rankings, so the picks see
    # rankings of the kind they are applied to; the median pick is then applied to the other
    # files, which are only scored

    tune_file = data / args.tune_on
    groups = read_groups(tune_file)
    by_fold: dict = {}
    fold_f1: dict = {}  # variant -> held-out Macro F1 of each course at its CV-picked k
    held_by: dict = {}  # variant -> (gold, held-out rankings) on the tuning file
    for name, over in variants.items():
        if name in same_as:  # the same configuration: the same held-out rankings and picks
            orig = same_as[name]
            results.update({(name, *key[1:]): m for key, m in list(results.items()) if key[0] == orig})
            by_fold[name], fold_f1[name] = dict(by_fold[orig]), fold_f1[orig]
            held_by[name] = held_by[orig]
            continue
        gold, ranked = ranked_by[(name, args.tune_on)]
        qids = list(gold)
        folds = grouped_folds(qids, groups)
        vcfg = load_config(args.config, {"runtime.progress": False, "count.method": "fixed", "count.k": 300, **over})
        art = Artifacts.load(art_dir, vcfg)
        qs = {q.query_id: q for q in load_queries(tune_file, vcfg.query.max_chars)}
        texts = {q: x.text for q, x in qs.items()}
        held_pred, held_curve, held_ranked, held_curves, ks, ts, wins = {}, {}, {}, {}, [], [], [0, 0, 0]
        for fold in folds:  # each course ranked with a prior and statute model that never saw it
            fart = held_out_artifacts(art, vcfg, gold, texts, set(fold))
            if fart is art:
                held_ranked.update({q: ranked[q] for q in fold})
                held_curves.update({q: curves_by[(name, args.tune_on)][q] for q in fold})
                continue
            fres = run_pipeline([qs[q] for q in fold], fart, vcfg)
            held_ranked.update({q: fres.ranked[q] for q in fold})
            held_curves.update({q: unique_citations(fres.current.hits.get(q, []), art.corpus)[1:] for q in fold})
        for fold in folds:  # the count of a course is picked on the other courses' held-out rankings
            test = set(fold)
            train_gold = {q: gold[q] for q in qids if q not in test}
            k = max(KS, key=lambda kk: evaluate(train_gold, cut(held_ranked, kk), ks=(100,))["macro_f1"])
            t, _ = fit_threshold([(*held_curves[q], train_gold[q]) for q in train_gold], max_k)
            ks.append(k)
            ts.append(t)
            for q in fold:
                held_pred[q] = held_ranked[q][:k]
                held_curve[q] = emit_curve(*held_curves[q], t, max_k, vcfg)
            fk = evaluate({q: gold[q] for q in fold}, {q: held_pred[q] for q in fold})["macro_f1"]
            fc = evaluate({q: gold[q] for q in fold}, {q: held_curve[q] for q in fold})["macro_f1"]
            wins[0 if fc > fk + 1e-12 else 1 if fk > fc + 1e-12 else 2] += 1
            fold_f1.setdefault(name, []).append(fk)
        held_by[name] = (gold, held_ranked)
        k_star, t_star = sorted(ks)[len(ks) // 2], sorted(ts)[len(ts) // 2]
        cv = f"grouped CV ({len(folds)} folds)"
        for k in (3, 5):
            results[(name, args.tune_on, f"{cv}: k={k}")] = _row(gold, cut(held_ranked, k), held_ranked)
        results[(name, args.tune_on, f"{cv}: k picked per fold (median {k_star})")] = _row(gold, held_pred, held_ranked)
        results[(name, args.tune_on, f"{cv}: score-curve count, t per fold (median {t_star})")] = _row(gold, held_curve, held_ranked)
        by_fold[name] = {"curve_wins": wins[0], "k_wins": wins[1], "ties": wins[2], "folds": len(folds)}
        for qfile in args.queries:
            if qfile == args.tune_on:
                continue
            g, r = ranked_by[(name, qfile)]
            results[(name, qfile, f"k={k_star} (CV on {args.tune_on})")] = _row(g, cut(r, k_star), r)
            curves = curves_by[(name, qfile)]
            curve = {q: emit_curve(*curves[q], t_star, max_k, vcfg) for q in g}
            results[(name, qfile, f"score curve t={t_star} (CV on {args.tune_on})")] = _row(g, curve, r)

    codes_by_fold = code_report(data, args.tune_on, [f for f in args.queries if f != args.tune_on], art_dir, args.config)

    print("| signals | queries | count | Macro F1 [95% CI] | precision | recall | Recall@100 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, qfile, count), m in results.items():
        f1 = f"{m['macro_f1']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]"
        cells = [f"{m[k]:.3f}" for k in ("precision", "recall", "recall@100")]
        print(f"| {name} | {qfile} | {count} | {f1} | " + " | ".join(cells) + " |")
    print(summary_table(results, list(variants), args.tune_on, args.queries))
    print(f"\ncount by fold on {args.tune_on} (held-out Macro F1 of each course: score curve vs fixed k, both picked on the other courses)")
    for name, w in by_fold.items():
        print(f"  {name}: curve better in {w['curve_wins']}, k better in {w['k_wins']}, equal in {w['ties']} of {w['folds']} folds")
    baselines = [b for b in ("core: bm25 + citation seeds", "kaggle retrieval") if b in fold_f1]
    if baselines:
        print(f"\nvariants against {' and '.join(repr(b) for b in baselines)}, course by course "
              "(held-out Macro F1 at the k picked on the other courses): better / worse / equal")
    for name, f1s in fold_f1.items():
        cells = []
        for b in baselines:
            if b != name:
                d = [a - c for a, c in zip(f1s, fold_f1[b])]
                cells.append(f"vs {b}: {sum(x > 1e-12 for x in d)} / {sum(x < -1e-12 for x in d)} / "
                             f"{sum(abs(x) <= 1e-12 for x in d)}")
                by_fold[name][f"vs {b}"] = cells[-1].split(": ", 1)[1]
        if cells:
            print(f"  {name}: " + "; ".join(cells))
    print(f"\nwhere Macro F1@3 is lost on {args.tune_on} (held-out rankings; each column changes one thing, as an oracle)")
    print("| signals | " + " | ".join(CEILINGS) + " |\n|" + " --- |" * (len(CEILINGS) + 1))
    ceiling_rows = {name: ceilings(*held_by[name]) for name in variants}
    for name, row in ceiling_rows.items():
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in CEILINGS) + " |")
    print(codes_by_fold["table"])
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": {" / ".join(k): v for k, v in results.items()}, "count_by_fold": by_fold,
                                               "codes": codes_by_fold["numbers"], "ceilings": ceiling_rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
