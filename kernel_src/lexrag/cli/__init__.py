"""Command line: ``python -m lexrag VERB`` with the verbs of :data:`VERBS` and ``fuse`` (``lexrag --help`` lists them).

This module holds the parser and :func:`main` (one line per error, the exit codes); the verbs'
handlers are in :mod:`lexrag.cli.commands`."""

from __future__ import annotations

import argparse
import sys
import warnings

from lexrag import __version__
from lexrag.cli import commands
from lexrag.registry import add_input_arguments

_PYTHON_FORMATWARNING = warnings.formatwarning

__all__ = ["main"]


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
    b.set_defaults(func=commands.cmd_build)

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
    r.set_defaults(func=commands.cmd_run)

    k = _verb(sub, "calibrate", "fit the adaptive count's score thresholds on a validation file (writes an artifact)", common)
    k.add_argument("--artifacts", help="artifacts folder (corpus/, bm25/, ...); default: where the notebooks find "
                                       "them (on Kaggle the attached datasets, else paths.artifacts_dir or "
                                       "./artifacts)")
    k.add_argument("--queries", required=True, help="a CSV with gold_citations (and a course column for grouped CV)")
    k.add_argument("--out", help="calibration folder to write (default: <artifacts>/calibration, which run reads; without --artifacts "
                        "the resolver's output folder: on Kaggle the working folder)")
    cfg_args(k)
    k.set_defaults(func=commands.cmd_calibrate)

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
    t.set_defaults(func=commands.cmd_tune)

    x = _verb(sub, "check-scores", "compare a metrics.json with expected scores (OK / OKish / FAIL per row)", common)
    x.add_argument("metrics", help="metrics.json of a validation run")
    x.add_argument("--expected", required=True, help="YAML of expected metrics with tolerances (e.g. demo/expected.yaml)")
    x.set_defaults(func=commands.cmd_check_scores)

    e = _verb(sub, "evaluate", "score a submission (or a TREC run) against gold (competition Macro F1)", common)
    e.add_argument("--gold", required=True, help="a CSV with query_id,gold_citations, or TREC qrels")
    e.add_argument("--pred", required=True, help="a submission CSV, or a TREC run (its ranking scored, the first --k "
                   "citations as the prediction)")
    e.add_argument("--k", type=int, default=3, help="with a TREC run: the citations per query taken as the prediction "
                   "(default 3)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=commands.cmd_evaluate)

    v = _verb(sub, "validate-submission", "check a submission file and name every problem", common)
    v.add_argument("submission", help="the submission CSV (query_id,predicted_citations)")
    v.add_argument("--queries", required=True, help="the questions it answers (query_id,query), e.g. test.csv")
    v.add_argument("--artifacts", help="artifacts folder; checks that every citation is a corpus string")
    v.set_defaults(func=commands.cmd_validate)

    m = _verb(sub, "show-metrics", "print a validation run's metrics, status table and count, and the ablation tables "
                                   "and outputs beside its metrics.json", common)
    m.add_argument("metrics", help="metrics.json of a validation run (the validation notebook writes it in out_dir)")
    m.set_defaults(func=commands.cmd_show_metrics)

    from lexrag.eval.runs import add_fuse_command

    add_fuse_command(sub, common)

    c = _verb(sub, "config", "print every config field with its default and help, or the resolved config", common)
    cfg_args(c)
    c.set_defaults(func=commands.cmd_config)
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
