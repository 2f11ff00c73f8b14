"""The verbs' handlers: ``cmd_<verb>(args)`` runs one parsed command line and returns its exit
code; :func:`lexrag.cli.build_parser` binds each verb to its handler."""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

__all__ = ["cmd_build", "cmd_run", "cmd_calibrate", "cmd_tune", "cmd_check_scores", "cmd_evaluate", "cmd_validate",
           "cmd_config", "cmd_show_metrics"]


def _config(args: argparse.Namespace):
    from lexrag.config import load_config, parse_overrides

    cfg = load_config(args.config, parse_overrides(args.set))
    if os.environ.get("CI"):
        cfg.runtime.progress = False
    return cfg


def _check_out(out: str, what: str = "--out", inputs: dict | None = None, protected: dict | None = None,
               example: str = "submission.csv") -> Path:
    """Refuse an output path that would overwrite an input or write into an artifacts folder."""
    from lexrag.errors import ConfigError
    from lexrag.io.outputs import check_output_file

    return check_output_file(out, what, inputs, protected, example, ConfigError)


def _artifacts(args: argparse.Namespace, cfg, degrade: bool = False, strict: bool = False):
    """(artifacts, paths) of a run: the ``--artifacts`` folder, or without it the resolver's, as
    the notebooks find them (on Kaggle every attached dataset in either input
    layout, model names such as ``bge-m3`` looked up among the inputs, the LLM cache in the working
    folder; locally ``paths.artifacts_dir`` or ./artifacts).  With ``degrade`` (``run`` without
    ``--strict``, as the inference notebook) an artifact that is not there (other than the corpus)
    switches its stages off and the run's status names it with its fix; a damaged one is an error."""
    from lexrag.errors import ArtifactError
    from lexrag.paths import on_kaggle, paths_for
    from lexrag.pipeline import Artifacts

    paths = paths_for(args.artifacts, cfg.paths)
    try:
        return Artifacts.load(paths, cfg, skip_missing=degrade, strict=strict), paths
    except ArtifactError as e:
        if on_kaggle() or args.artifacts:
            raise
        raise ArtifactError(f"{e}; no --artifacts was given, so {paths.artifacts_dir} was searched: give --artifacts "
                            "ARTIFACTS or set paths.artifacts_dir") from None


def _artifacts_dir(args: argparse.Namespace, cfg) -> tuple[str, Path]:
    """(name, folder) of the artifacts outputs must stay out of: ``--artifacts``, or the resolver's folder."""
    if args.artifacts:
        return "--artifacts", Path(args.artifacts)
    from lexrag.paths import resolve_paths

    return "artifacts (found without --artifacts)", resolve_paths(cfg.paths).artifacts_dir


def cmd_build(args: argparse.Namespace) -> int:
    from lexrag.io.outputs import check_makeable
    from lexrag.errors import ConfigError
    from lexrag.index.build import courts_beside
    from lexrag.pipeline.build import build_artifacts

    cfg = _config(args)
    check_makeable(args.out, "--out")
    if args.no_courts and args.courts:
        raise ConfigError(f"--no-courts and --courts {args.courts} contradict each other: give one of them")
    courts = courts_beside(args.laws, False if args.no_courts else args.courts)
    build_artifacts(cfg, args.laws, args.out, courts=courts, law_keys=args.law_keys, train=args.train,
                    abbreviations=args.abbreviations, dictionary=args.dictionary, headings=args.headings,
                    laws_en=args.laws_en)
    print(f"artifacts written to {args.out}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from lexrag.eval.status import run_status
    from lexrag.eval.submission import read_submission, write_submission
    from lexrag.pipeline import run_pipeline
    from lexrag.pipeline.run import scored_rankings
    from lexrag.queries import load_queries

    cfg = _config(args)
    _check_out(args.out, inputs={"--queries": args.queries, "--config": args.config},
               protected=dict([_artifacts_dir(args, cfg)]))
    if args.run_file:
        _check_out(args.run_file, "--run-file", {"--queries": args.queries, "--config": args.config, "--out": args.out},
                   dict([_artifacts_dir(args, cfg)]), "run.trec")
    if Path(args.out).suffix.lower() in (".gz", ".bz2", ".xz", ".zip", ".zst"):  # pandas would read it as compressed
        from lexrag.errors import ConfigError

        raise ConfigError(f"--out {args.out}: the submission is written as plain CSV (what Kaggle reads), not "
                          f"{Path(args.out).suffix} compressed; give a .csv name")
    art, paths = _artifacts(args, cfg, degrade=not args.strict, strict=args.strict)
    queries = load_queries(args.queries, cfg.query.max_chars)
    result = run_pipeline(queries, art, cfg, paths=paths)
    write_submission(args.out, result.predictions, result.query_ids)
    if args.run_file:
        from lexrag.eval.trec import write_trec_run

        n_lines = write_trec_run(args.run_file, scored_rankings(result, art.corpus, cfg), args.run_tag, result.query_ids)
        print(f"wrote {args.run_file}: a TREC run of {n_lines} lines (the ranking before the count)")
    n = sum(len(v) for v in read_submission(args.out).values())  # as written: a row over the limits is cut (and said)
    totals = result.cost_totals()
    llm = {k: sum(a.get(k, 0.0) for a in totals.values()) for k in ("llm_calls", "prompt_tokens", "gen_tokens")}
    note = (f"; LLM {int(llm['llm_calls'])} calls, {int(llm['prompt_tokens'])} prompt + "
            f"{int(llm['gen_tokens'])} generated tokens" if llm["llm_calls"] else "")
    if result.dropped:
        note += f"; dropped for time: {', '.join(result.dropped)}"
    print(f"wrote {args.out}: {len(result.query_ids)} queries, {n} citations, {result.timings['total']:.2f}s{note}")
    status = run_status(cfg, art, result)
    print(status.table())
    return 1 if status.status == "FAILED" else 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from lexrag.eval.calibrate import calibrate, check_calibration_out

    cfg = _config(args)
    if args.out:
        out = Path(args.out)
    elif args.artifacts:
        out = Path(args.artifacts) / "calibration"
    else:  # beside the resolver's artifacts; on Kaggle the working folder (the inputs are read-only)
        from lexrag.paths import resolve_paths

        out = resolve_paths(cfg.paths).output_dir / "calibration"
    check_calibration_out(out, _artifacts_dir(args, cfg)[1])
    load_cfg = copy.deepcopy(cfg)
    load_cfg.count.method, load_cfg.count.calibration = "fixed", ""  # an old or broken calibration never blocks a new one
    art, paths = _artifacts(args, load_cfg)
    doc = calibrate(cfg, art, args.queries, out, paths=paths)
    cv = doc.get("grouped_cv")
    if cv and cv.get("macro_f1") is not None:
        tail = f", grouped CV by course ({cv['folds']} folds) {cv['macro_f1']:.4f}"
    elif cv:
        tail = " (one course only: no grouped cross-validation)"
    else:
        tail = " (no course column: no grouped cross-validation)"
    print(f"calibration written to {out}: thresholds {doc['thresholds']} (default {doc['default']}); "
          f"Macro F1 of the n_cal cut in-sample {doc['macro_f1_in_sample']:.4f}{tail}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from lexrag.eval.tune import parse_grid, tune

    cfg = _config(args)
    grid = parse_grid(args.grid)
    both = [x.split("=", 1)[0].strip() for x in args.set or [] if x.split("=", 1)[0].strip() in grid]
    if both:  # the grid sets the field at every point: the --set value would be dropped without a word
        from lexrag.errors import ConfigError

        raise ConfigError(f"--set {both[0]} and --grid {both[0]}: the grid sets it at every point; drop one of them")
    if args.out:
        _check_out(args.out, inputs={"--queries": args.queries, "--config": args.config},
                   protected=dict([_artifacts_dir(args, cfg)]), example="tuned.yaml")
    art, paths = _artifacts(args, cfg)
    res = tune(cfg, art, args.queries, grid, args.out, paths=paths)
    print("  held out  in-sample  point")
    for row in sorted(res["per_point"], key=lambda r: -r["macro_f1_held_out"])[:10]:
        print(f"  {row['macro_f1_held_out']:.4f}    {row['macro_f1']:.4f}     {row['point']}")
    picked: dict[str, int] = {}  # how stable the pick is: the point each fold picked on the other folds
    for p in res["fold_picks"]:
        picked[str(p["point"])] = picked.get(str(p["point"]), 0) + 1
    print("picked on the other folds: " + "; ".join(f"{p} in {n} of {res['folds']} folds"
                                                   for p, n in sorted(picked.items(), key=lambda t: -t[1])))
    print(f"best {res['best']}: Macro F1 held out {res['macro_f1_held_out']:.4f}, in-sample {res['macro_f1_in_sample']:.4f}; "
          f"{res['signals_computed']} signals computed, {res['reused']} reused" + (f"; tuned config: {args.out}" if args.out else ""))
    others = "".join(f", by {g} ({res['folds_by'][g]} folds) {v:.4f}" for g, v in res["macro_f1_nested_by"].items()
                     if g != res["grouped_by"])
    print(f"nested Macro F1 (each fold scored at the point picked on inner folds of the others), grouped by "
          f"{res['grouped_by']}, {res['folds']} folds: {res['macro_f1_nested']:.4f}{others}")
    return 0


def cmd_check_scores(args: argparse.Namespace) -> int:
    from lexrag.eval.expect import check_expected, format_checks, read_metrics_file
    from lexrag.eval.status import recorded_state

    rows = check_expected(args.metrics, args.expected)
    print(format_checks(rows))
    state = recorded_state(read_metrics_file(args.metrics))
    if state not in (None, "OK"):  # numbers of a run that did not do what its config asked are not a pass
        print(f"FAIL: the run that wrote {args.metrics} ended {state}, not OK (its status table says which stages did not run)")
        return 1
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from lexrag.eval.metrics import evaluate
    from lexrag.eval.submission import read_submission
    from lexrag.eval.validation import format_metrics
    from lexrag.queries import load_gold

    from lexrag.eval.trec import read_qrels, read_trec_run, trec_kind

    gold = read_qrels(args.gold) if trec_kind(args.gold) == "qrels" else load_gold(args.gold)
    if not gold:
        from lexrag.errors import CsvInputError

        raise CsvInputError(f"{args.gold}: no rows with gold citations (only a header?)")
    ranked = None
    if trec_kind(args.pred) == "run":
        if args.k < 1:
            from lexrag.errors import ConfigError

            raise ConfigError(f"--k {args.k}: give the citations per query to score as the prediction (1 or more)")
        ranked = {q: [c for c, _ in hits] for q, hits in read_trec_run(args.pred).items()}
        pred = {q: r[: args.k] for q, r in ranked.items()}
        print(f"{args.pred}: a TREC run of {len(ranked)} queries; the first {args.k} citations of each are the prediction "
              "(--k), the whole ranking is scored for recall@k and nDCG", file=sys.stderr)
    else:
        pred = read_submission(args.pred)
    missing = [q for q in gold if q not in pred]
    if missing:
        print(f"warning: {len(missing)} gold queries have no row in {args.pred} (scored as empty): {missing[:5]}", file=sys.stderr)
    extra = [q for q in pred if q not in gold]
    if extra:
        print(f"warning: {len(extra)} rows of {args.pred} name no query with gold in {args.gold} (not scored): {extra[:5]}",
              file=sys.stderr)
    metrics = evaluate(gold, pred, ranked, ks=(10, 100)) if ranked is not None else evaluate(gold, pred, ks=(10,))
    if args.json:
        print(json.dumps(metrics, sort_keys=True))
    else:
        print(format_metrics(metrics))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from lexrag.eval.submission import validate_submission
    from lexrag.index.corpus import Corpus
    from lexrag.queries import load_queries

    qids = [q.query_id for q in load_queries(args.queries)]
    citations = Corpus(Path(args.artifacts) / "corpus").citations if args.artifacts else None
    problems = validate_submission(args.submission, qids, citations)
    for p in problems:
        print(p)
    if problems:
        print(f"INVALID: {len(problems)} problem(s)")
        return 1
    print(f"OK: {args.submission} is a valid submission for {len(qids)} queries")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from lexrag.config import config_help

    if args.config or args.set:
        import yaml

        print(yaml.safe_dump(_config(args).to_dict(), sort_keys=False, allow_unicode=True))
    else:
        print(config_help())
    return 0


def cmd_show_metrics(args: argparse.Namespace) -> int:
    from lexrag.eval.expect import read_metrics_file
    from lexrag.eval.summary import run_summary

    print(run_summary(args.metrics, read_metrics_file(args.metrics)))
    return 0
