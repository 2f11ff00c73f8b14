"""The experiment harness's command line and report: the arguments ``scripts/quality.py`` takes,
and the text report of a :func:`lexrag.eval.experiment.run_experiment` document."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from lexrag.io.outputs import replace_text
from lexrag.config import load_config
from lexrag.eval.experiment import run_experiment
from lexrag.eval.experiment_scores import CEILINGS
from lexrag.eval.variants import GPU_STAGES_OFF, PRESET_VARIANTS, RANKER_VARIANTS, Variant, parse_variant

__all__ = ["format_report", "arg_parser", "variants_from_args", "check_args", "run_from_args", "experiment_args"]

log = logging.getLogger(__name__)


def format_report(doc: dict) -> str:
    """The results table: per variant, Macro F1 at k = 3 and nested (k chosen on inner folds, with
    its 95% bootstrap interval) and Recall@100 under each grouping side by side, then the files
    only scored (and the locked areas) at the k the development areas chose."""
    by = doc["by"]
    others = [k for k in next(iter(doc["rows"].values()), {}) if k.endswith(".csv")]
    head = [x for g in by for x in (f"{g} F1@3", f"{g} F1 nested [95% CI]", f"{g} R@100")] + ["k"]
    head += [x for f in others for x in (f"{Path(f).stem} F1@k", "R@100")]
    final = any("locked" in r for r in doc["rows"].values())
    if final:
        head += ["locked F1@k [95% CI]", "locked R@100"]
    lines = ["| variant | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(head)]
    for name, r in doc["rows"].items():
        cells = []
        for g in by:
            n = r[g]["nested"]
            cells += [f"{r[g]['f1@3']:.3f}", f"{n['macro_f1']:.3f} [{n['ci'][0]:.3f}, {n['ci'][1]:.3f}]", f"{n['recall@100']:.3f}"]
        cells.append(str(r["k"]))
        for f in others:
            cells += [f"{r[f]['macro_f1']:.3f}", f"{r[f]['recall@100']:.3f}"]
        if final:
            lo = r.get("locked")
            cells += [f"{lo['macro_f1']:.3f} [{lo['ci'][0]:.3f}, {lo['ci'][1]:.3f}]", f"{lo['recall@100']:.3f}"] if lo else ["–", "–"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if doc.get("selection"):
        cells = []
        for g in by:
            s = doc["selection"][g]
            cells += ["–", f"{s['macro_f1']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}]", f"{s['recall@100']:.3f}"]
        cells += ["–"] * (len(head) - len(cells))
        lines.append("| nested pick among the variants | " + " | ".join(cells) + " |")
    picks = []
    for name, r in doc["rows"].items():
        picks.append(f"  {name}: k per fold " + "; ".join(f"{g} {r[g]['k_picks']}" for g in by))
    for g, s in doc.get("selection", {}).items():
        picks.append(f"  nested pick ({g}): " + ", ".join(s["picks"]))
    g = "area" if "area" in by else by[0]
    ceil = [f"| {name} | " + " | ".join(f"{r['ceilings'][c]:.3f}" for c in CEILINGS) + " |" for name, r in doc["rows"].items()]
    vs = []
    for base, others in doc.get("vs_baseline", {}).items():
        vs += ["", f"paired differences from {base} (Macro F1 [95% CI] p, Recall@100):"]
        for name, parts in others.items():
            vs.append(f"  {name}: " + "; ".join(f"{part} {d['f1_delta']:+.4f} [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}] "
                                                f"p={d['p']:.3f}, R@100 {d['recall@100_delta']:+.4f}"
                                                for part, d in sorted(parts.items())))
    return "\n".join(lines + vs + ["", "choices made on the inner folds:"] + picks
                     + ["", f"where F1@3 is lost ({g}-grouped held-out rankings; each column changes one thing, as an oracle)",
                        "| variant | " + " | ".join(CEILINGS) + " |", "| --- |" + " --- |" * len(CEILINGS)] + ceil)


def arg_parser(description: str = __doc__) -> argparse.ArgumentParser:
    """The options of ``scripts/quality.py`` (:func:`run_from_args` runs them)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", help="built with --train lexam_dev.csv (docs/experiments.md); without it they are built "
                    "into a temporary folder")
    ap.add_argument("--variants", nargs="*", help="PRESET, PRESET;section.field=value;... or NAME=PRESET;... "
                    "(default: lexical, default, exam, kaggle (CPU stages))")
    ap.add_argument("--ablation", metavar="PRESET", help="the preset's incremental ablation as the variants (one row per stage); "
                    "'ranker': the learned ranker's steps (its candidates, order, count)")
    ap.add_argument("--by", nargs="*", default=["course", "area"], choices=["course", "area", "query"])
    ap.add_argument("--tune-on", default="lexam_dev.csv")
    ap.add_argument("--queries", nargs="*", default=["train_dev.csv", "val.csv"], help="files only scored")
    ap.add_argument("--final", action="store_true", help="also score the locked areas (the final report only)")
    ap.add_argument("--dev-areas", type=int, help="fold over only this many of the development areas (a quick run)")
    ap.add_argument("--not-nested", action="store_true", help="inner rankings = the outer ones (faster, optimistic)")
    ap.add_argument("--config", help="base config under variants without a preset")
    ap.add_argument("--bm25", nargs="*", default=[], metavar="FOLDER", help="further BM25 index folders over the "
                    "artifacts' corpus, each built with other lexical.fields (or k1, b, analyzer): a variant that sets "
                    "those is scored with the one built with them")
    ap.add_argument("--baseline", nargs="*", default=[], metavar="VARIANT", help="variant names: every other variant's "
                    "paired difference from each (Macro F1 with a 95%% bootstrap interval and a permutation p-value, "
                    "Recall@100), per grouping, scored file and the locked areas")
    ap.add_argument("--json", help="write the metrics document here")
    ap.add_argument("--expected", help="check the metrics against this reproduction file (e.g. repro/lexam_dev.yaml)")
    return ap


def variants_from_args(args: argparse.Namespace) -> list[Variant]:
    """The variants the options ask for, each config checked (an error names its variant)."""
    from lexrag.errors import ConfigError

    if args.ablation and args.variants:
        raise ConfigError("--ablation and --variants both name the variants: give one of them")
    if args.ablation == "ranker":
        return list(RANKER_VARIANTS)
    if args.ablation:
        from lexrag.eval.validation import incremental_steps

        preset = None if args.ablation == "default" else args.ablation
        cpu = GPU_STAGES_OFF if preset == "kaggle" else {}  # what this harness can run
        steps = incremental_steps(load_config(preset, cpu))
        # the adaptive count reads the LLM's estimate and a calibration this harness fits for no fold
        return [Variant(s["run"], preset, {**cpu, **s["overrides"]}) for s in steps
                if s["overrides"].get("count.method") != "adaptive"]
    blank = next((i for i, s in enumerate(args.variants or [], start=1) if not s.strip()), None)
    if blank is not None:  # an empty shell variable: never the defaults under a blank name
        raise ConfigError(f"--variants: value {blank} is empty; give NAME=PRESET[;KEY=VALUE...] (or leave --variants out "
                          "for the preset variants)")
    variants = [parse_variant(s) for s in args.variants] if args.variants else list(PRESET_VARIANTS)
    names = [v.name for v in variants]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:  # the table keys rows by name: one would silently replace the other
        raise ConfigError(f"--variants: the name {twice!r} is given twice; name each variant once (NAME=PRESET;...)")
    for v in variants:  # an unknown field or a bad value, named with its variant before the run
        try:
            v.config(getattr(args, "config", None))
        except ConfigError as e:
            raise ConfigError(f"variant {v.name!r}: {e}") from None
    return variants


def check_args(args: argparse.Namespace, build: bool = False) -> list[Variant]:
    """Every option checked before any work (a build, a run): the data files named, the variants
    and their configs, ``--json`` and ``--expected``; with ``build`` also what a build would read
    (``--courts``).  Returns the variants.  Any problem is one :class:`ConfigError` naming the option."""
    from lexrag.errors import ConfigError

    if Path(args.tune_on).name == "val.csv":
        raise ConfigError("never tune on val.csv")
    if not args.by:  # the CLI refuses --by without values; an args object made in code may still hold none
        raise ConfigError("by: name at least one of course, area or query")
    twice = sorted({b for b in args.by if args.by.count(b) > 1})
    if twice:  # each would be computed and printed twice
        raise ConfigError(f"--by names {', '.join(twice)} twice; give each once")
    if args.dev_areas is not None and args.dev_areas < 1:
        raise ConfigError(f"--dev-areas {args.dev_areas}: give the number of development areas to fold over (1 or more)")
    if args.config and not Path(args.config).is_file():
        load_config(args.config)  # a preset name is allowed; anything else is named by the loader
    variants = variants_from_args(args)
    if args.json:
        _check_json_apart(args)
    if args.expected:
        from lexrag.eval.expect import check_expected

        check_expected({}, args.expected)  # a missing, empty or malformed expectations file is refused before the run
    data = Path(args.data)
    if not data.is_dir():
        raise ConfigError(f"--data {args.data}: not a folder (the competition data: lexam_dev.csv, laws_de.csv, ...)")
    for opt, names in (("--tune-on", [args.tune_on]), ("--queries", args.queries)):
        for name in names:
            if not (data / name).is_file():
                raise ConfigError(f"{opt} {name}: {data / name} is not a file (names are read inside --data {args.data})")
    from lexrag.eval.experiment_questions import read_tuning_file

    read_tuning_file(data / args.tune_on)
    if build and not (data / "laws_de.csv").is_file():
        raise ConfigError(f"--data {args.data}: no laws_de.csv to build the artifacts from (or give --artifacts)")
    if build and getattr(args, "courts", None) and not Path(args.courts).is_file():
        raise ConfigError(f"--courts {args.courts}: not a file (a court considerations CSV; leave --courts out for "
                          "the sample beside the data)")
    return variants


def _check_json_apart(args: argparse.Namespace) -> None:
    """``--json`` is written after the run: a file name that is none of the inputs (the questions
    read inside ``--data``, the expectations, the config, the courts, the dictionary) and lies in
    neither ``--data`` nor ``--artifacts`` nor any artifact folder."""
    from lexrag.errors import ConfigError
    from lexrag.io.outputs import check_output_file

    data = Path(args.data)
    inputs = {"--tune-on": data / args.tune_on, **{f"--queries {q}": data / q for q in args.queries or ()},
              **{opt: getattr(args, name, None) for opt, name in (("--expected", "expected"), ("--config", "config"),
                                                                 ("--courts", "courts"), ("--dictionary", "dictionary"))}}
    check_output_file(args.json, "--json", inputs, {"--data": args.data, "--artifacts": args.artifacts},
                      "quality.json", ConfigError)


def run_from_args(args: argparse.Namespace) -> tuple[dict, str, list[dict]]:
    """Run the experiment the options ask for (checked first: :func:`check_args`): (metrics
    document, report text, reproduction checks; empty without ``--expected``); writes ``--json``."""
    variants = check_args(args)
    doc = run_experiment(variants, args.data, args.artifacts, args.tune_on, args.queries, args.by,
                         args.final, dev_areas=args.dev_areas, nested=not args.not_nested, config=args.config,
                         bm25=getattr(args, "bm25", ()), baselines=getattr(args, "baseline", ()))
    text = (f"legal areas of {doc['tune_on']}:\n{doc['area_map']}\n\n" + format_report(doc)
            + f"\n\n{doc['date']}, {doc['seconds']:.0f} s ({doc['seconds'] / 60:.1f} min); {doc['questions']} questions in the "
            f"folds" + (f", {doc['locked_questions']} locked (scored)" if doc["final"] else ", the locked areas not read"))
    for f, (n, total) in doc["gold_outside_corpus"].items():  # misses whatever a variant does, said beside the numbers
        if n:
            text += (f"\nnote: {n} of {total} gold citations of {f} are not in the corpus of {args.artifacts}: they count as "
                     "misses" + ("; most are missing: are these artifacts built from the laws of --data?"
                                 if n > total / 2 else ""))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        replace_text(args.json, json.dumps(doc, indent=2, ensure_ascii=False))
    checks: list[dict] = []
    if args.expected:
        from lexrag.eval.expect import check_expected, format_checks

        checks = check_expected(doc["metrics"], args.expected)
        text += "\n\nreproduction check against " + str(args.expected) + ":\n" + format_checks(checks)
    return doc, text, checks


def experiment_args(doc: str) -> argparse.Namespace:
    """``--data`` and ``--artifacts`` (built with ``--train lexam_dev.csv``, docs/experiments.md); library warnings silenced."""
    import warnings

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--artifacts", required=True, help="artifacts built with --train lexam_dev.csv (docs/experiments.md)")
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    warnings.simplefilter("ignore", UserWarning)
    return args
