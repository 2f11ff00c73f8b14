"""Command line: ``python -m lexrag VERB`` with the verbs of :data:`VERBS` and ``fuse`` (``lexrag --help`` lists them)."""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import warnings
from pathlib import Path

from lexrag import __version__
from lexrag.registry import add_input_arguments

_PYTHON_FORMATWARNING = warnings.formatwarning

__all__ = ["main"]


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


def _artifacts(args: argparse.Namespace, cfg, degrade: bool = False):
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
        return Artifacts.load(paths, cfg, skip_missing=degrade), paths
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
    art, paths = _artifacts(args, cfg, degrade=not args.strict)
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


# what each verb does and one example, shown by `lexrag VERB --help` (the one-line help is the list's)
VERBS = {
    "build": ("Build the artifacts a run reads from the competition's CSVs: the corpus and its BM25 index always, "
              "the citation graph from court considerations, the prior (and with ranker.enabled the learned ranker) "
              "from --train, the dictionary from --dictionary, the English index from --laws-en.",
              "lexrag build --laws laws_de.csv --courts court_considerations.csv --train train.csv "
              "--dictionary /usr/share/trans/de-en --headings laws_de_headings.csv --config exam --out ARTIFACTS"),
    "run": ("Answer every question of a queries CSV and write the submission; prints the run's status (OK, "
            "DEGRADED with the fix per stage, FAILED) and a row per stage.",
            "lexrag run --artifacts ARTIFACTS --queries test.csv --out submission.csv --config exam"),
    "calibrate": ("Fit the adaptive count's score thresholds on a file with gold citations, out of fold, and write "
                  "the calibration artifact that count.method=adaptive reads.",
                  "lexrag calibrate --artifacts ARTIFACTS --queries lexam_dev.csv --config kaggle"),
    "tune": ("Try a grid of config values, each scored by nested cross-validation grouped by legal area and by "
             "course, and print (or write with --out) the config the held-out numbers choose.",
             "lexrag tune --artifacts ARTIFACTS --queries lexam_dev.csv --config lexical --grid count.k=3,4,5"),
    "check-scores": ("Compare a validation run's metrics with expected values and tolerances: OK, OKish (within twice "
                     "the tolerance) or FAIL per row; exit 1 on a FAIL.",
                     "lexrag check-scores out/demo/metrics.json --expected demo/expected.yaml"),
    "evaluate": ("Score predictions against gold: the competition's Macro F1 (exact citation strings per question, "
                 "averaged), precision, recall, Recall@k and nDCG.  Gold as a CSV or TREC qrels; predictions as a "
                 "submission CSV or a TREC run.",
                 "lexrag evaluate --gold val.csv --pred submission.csv"),
    "validate-submission": ("Check a submission file against the questions (and with --artifacts against the "
                            "corpus's citation strings) and name every problem; exit 1 if any.",
                            "lexrag validate-submission submission.csv --queries test.csv --artifacts ARTIFACTS"),
    "show-metrics": ("Print a validation run's metrics, status table and count, and the ablation tables and outputs "
                     "beside its metrics.json.",
                     "lexrag show-metrics out/demo/metrics.json"),
    "config": ("Print every config field with its default and help, or with --config/--set the resolved config.",
               "lexrag config --config exam --set count.k=5"),
}


def _verb(sub, name: str, help: str, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    what, example = VERBS[name]
    import textwrap

    return sub.add_parser(name, help=help, description=textwrap.fill(what, 100), epilog=f"example:\n  {example}", parents=[common],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _log_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """-q and -v, before the verb or after it (after it they must not reset what was given before)."""
    default = False if top else argparse.SUPPRESS
    parser.add_argument("-q", "--quiet", action="store_true", default=default, help="only warnings and errors on stderr")
    parser.add_argument("-v", "--verbose", action="store_true", default=default, help="also debug messages on stderr")


def build_parser() -> argparse.ArgumentParser:
    from lexrag.config import presets

    p = argparse.ArgumentParser(prog="lexrag", description="Cross-lingual Swiss legal citation retrieval: build the "
                                "artifacts, answer questions, score and tune.  `lexrag VERB --help` says what a verb does, "
                                "with an example.", epilog="example:\n  lexrag run --artifacts ARTIFACTS --queries test.csv "
                                "--out submission.csv --config lexical", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"lexrag {__version__}")
    _log_options(p, top=True)
    common = argparse.ArgumentParser(add_help=False)
    _log_options(common, top=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB")
    names = ", ".join(presets())

    def cfg_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--config", help=f"a YAML config file or a preset: {names} (default: the defaults; "
                        "`lexrag config` lists every field)")
        sp.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE", help="override a config field (repeatable)")

    b = _verb(sub, "build", "build the artifacts from the competition CSVs: corpus and BM25, the graph with "
                            "court considerations, the prior with --train, the dictionary with --dictionary", common)
    add_input_arguments(b, datasets=False, required=("laws",))
    b.add_argument("--no-courts", action="store_true", help="laws only, even with court_considerations.csv beside --laws")
    b.add_argument("--out", required=True, help="artifacts folder to write")
    cfg_args(b)
    b.set_defaults(func=cmd_build)

    r = _verb(sub, "run", "answer a queries CSV and write submission.csv", common)
    r.add_argument("--artifacts", help="artifacts folder (corpus/, bm25/, ...); default: where the notebooks find "
                                       "them (on Kaggle the attached datasets, else paths.artifacts_dir or "
                                       "./artifacts)")
    r.add_argument("--queries", required=True, help="a CSV with query_id,query (test.csv)")
    r.add_argument("--out", required=True, help="the submission CSV to write (query_id,predicted_citations)")
    r.add_argument("--run-file", help="also write the full ranking before the count as a TREC run (QUERY_ID Q0 DOCNO RANK "
                   "SCORE TAG; DOCNO the citation with spaces as %%20), for trec_eval, ir_measures or ranx")
    r.add_argument("--run-tag", default="lexrag", help="the run file's TAG column (default: lexrag)")
    r.add_argument("--strict", action="store_true", help="refuse to run when an artifact the config asks for is missing "
                   "(default: as on Kaggle, its stages are switched off and the status says DEGRADED with the fix)")
    cfg_args(r)
    r.set_defaults(func=cmd_run)

    k = _verb(sub, "calibrate", "fit the adaptive count's score thresholds on a validation file (writes an artifact)", common)
    k.add_argument("--artifacts", help="artifacts folder (corpus/, bm25/, ...); default: where the notebooks find "
                                       "them (on Kaggle the attached datasets, else paths.artifacts_dir or "
                                       "./artifacts)")
    k.add_argument("--queries", required=True, help="a CSV with gold_citations (and a course column for grouped CV)")
    k.add_argument("--out", help="calibration folder to write (default: <artifacts>/calibration, which run reads; without --artifacts "
                        "the resolver's output folder: on Kaggle the working folder)")
    cfg_args(k)
    k.set_defaults(func=cmd_calibrate)

    t = _verb(sub, "tune", "grid over config fields, scored by nested cross-validation on held-out legal areas and courses",
              common)
    t.add_argument("--artifacts", help="artifacts folder (corpus/, bm25/, ...); default: where the notebooks find "
                                       "them (on Kaggle the attached datasets, else paths.artifacts_dir or "
                                       "./artifacts)")
    t.add_argument("--queries", required=True, help="a CSV with gold_citations (and a course column for grouped CV)")
    t.add_argument("--grid", action="append", required=True, metavar="SECTION.FIELD=V1,V2,...",
                   help="values to try for one field (repeatable), e.g. fusion.weights.bm25_de=1,2,4 or count.k=3,5,10")
    t.add_argument("--out", help="write the tuned config (YAML, every field) here")
    cfg_args(t)
    t.set_defaults(func=cmd_tune)

    x = _verb(sub, "check-scores", "compare a metrics.json with expected scores (OK / OKish / FAIL per row)", common)
    x.add_argument("metrics", help="metrics.json of a validation run")
    x.add_argument("--expected", required=True, help="YAML of expected metrics with tolerances (e.g. demo/expected.yaml)")
    x.set_defaults(func=cmd_check_scores)

    e = _verb(sub, "evaluate", "score a submission (or a TREC run) against gold (competition Macro F1)", common)
    e.add_argument("--gold", required=True, help="a CSV with query_id,gold_citations, or TREC qrels")
    e.add_argument("--pred", required=True, help="a submission CSV, or a TREC run (its ranking scored, the first --k "
                   "citations as the prediction)")
    e.add_argument("--k", type=int, default=3, help="with a TREC run: the citations per query taken as the prediction "
                   "(default 3)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=cmd_evaluate)

    v = _verb(sub, "validate-submission", "check a submission file and name every problem", common)
    v.add_argument("submission", help="the submission CSV (query_id,predicted_citations)")
    v.add_argument("--queries", required=True, help="the questions it answers (query_id,query), e.g. test.csv")
    v.add_argument("--artifacts", help="artifacts folder; checks that every citation is a corpus string")
    v.set_defaults(func=cmd_validate)

    m = _verb(sub, "show-metrics", "print a validation run's metrics, status table and count, and the ablation tables "
                                   "and outputs beside its metrics.json", common)
    m.add_argument("metrics", help="metrics.json of a validation run (the validation notebook writes it in out_dir)")
    m.set_defaults(func=cmd_show_metrics)

    from lexrag.eval.runs import add_fuse_command

    add_fuse_command(sub, common)

    c = _verb(sub, "config", "print every config field with its default and help, or the resolved config", common)
    cfg_args(c)
    c.set_defaults(func=cmd_config)
    return p


def _disk_error(e: OSError, args: argparse.Namespace) -> str | None:
    from lexrag.errors import disk_error

    return disk_error(e, f"--out {args.out}" if getattr(args, "out", None) else "an output file")


def _resource_error(e: BaseException) -> str | None:
    """One line for a command that ran out of memory or threads (a ``ulimit -v`` too low for the
    data, pyarrow unable to start its worker threads); None for anything else."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    exhausted = isinstance(e, MemoryError) or (type(e).__module__.startswith("pyarrow") and any(
        w in first for w in ("Resource temporarily unavailable", "Failed to launch worker thread", "out of memory")))
    if isinstance(e, OSError) and "shared object" in first:  # llvmlite (numba) cannot map its library
        return (f"a compiled library could not be loaded ({first[:120]}): under a memory limit (ulimit -v) raise it; "
                "otherwise reinstall the package named (pip install -r requirements.txt)")
    if not exhausted:
        return None
    return (f"the process ran out of memory or threads ({type(e).__name__}: {first}): raise the limit (ulimit -v, ulimit -u) "
            "or free memory; the files that were there are kept (outputs are written whole or not at all)")


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Our warnings name the file or row already; a user reads them as one line, not a source location."""
    if category is UserWarning:  # library warnings (Deprecation, Runtime ...) keep Python's form
        return f"warning: {message}\n"
    return _PYTHON_FORMATWARNING(message, category, filename, lineno, line)


def main(argv: list[str] | None = None) -> int:
    import logging

    from lexrag.errors import LexragError

    parser = build_parser()
    from lexrag.io.cliargs import MarkedStdout, drop_stdout, parse_once

    args = parse_once(parser, argv)  # an option given twice, or an empty one (an empty shell variable), is refused
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    warnings.formatwarning = _one_line_warning
    real, sys.stdout = sys.stdout, MarkedStdout(sys.stdout)
    try:
        result = args.func(args)  # an exit code, or the report of a command defined outside this module
        if isinstance(result, str):
            print(result)
            result = 0
        rc = int(result or 0)
        sys.stdout.flush()  # a full or closed standard output is said here, not as Python exits
        return rc
    except (LexragError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # pathlib's resolve() on a loop of links (Python < 3.13 raises RuntimeError)
        if not str(e).startswith("Symlink loop"):
            raise
        print(f"error: {str(e).splitlines()[0]}: a loop of links; give a path that leads to a file or folder", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: every writer leaves the files that were there; one line, the shell's code
        print(f"interrupted: {args.command or 'lexrag'} stopped; the files that were there are kept (outputs are written "
              "whole or not at all)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `lexrag evaluate ... | head`: the reader left; not an error of ours
        drop_stdout()
        return 0
    except OSError as e:
        if getattr(e, "stdout", False):  # the report, not a file of the command (those are written whole or not at all)
            drop_stdout()
            print(f"error: standard output cannot be written ({e.strerror or e}): the report is lost; the files the command "
                  "writes were written whole or not at all", file=sys.stderr)
            return 2
        line = _disk_error(e, args) or _resource_error(e)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - only an exhausted memory or thread limit is said here; anything else is raised
        line = _resource_error(e)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = real
