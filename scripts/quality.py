#!/usr/bin/env python
"""Quality of the pipeline on the real data in ../shared/data (a script, not a test): a thin caller
of :mod:`lexrag.eval.experiment`.

Each variant (default: the presets ``lexical``, the defaults, ``exam`` and the ``kaggle`` preset's
CPU stages) ranks every lexam_dev question held out, by course and by legal area side by side,
with the prior and learned statute model refitted without the question's fold, and its count k
chosen on inner folds (nested); train_dev.csv and val.csv are only scored at the k the areas
chose.  The locked areas (repro/locked_split.yaml) are read only with --final.  Without
--artifacts it builds them from --data, with the statute headings (laws_de_headings.csv) and the
laws' English texts (laws_en.csv: the bm25_en artifact) where --data holds them.

  python scripts/quality.py --data ../shared/data --artifacts ARTIFACTS [--final] [--json OUT] [--expected repro/lexam_dev.yaml]
  python scripts/quality.py ... --ablation exam          # the preset's incremental ablation, one row per stage
  python scripts/quality.py ... --baseline lexical --variants lexical "with English=lexical;english.enabled=true"  # paired
  python scripts/quality.py ... --variants exam "no learned=exam;statutes.learned=false"
  python scripts/quality.py --data ../shared/data --dictionary /usr/share/trans/de-en --by area \
      --variants "lexical - dict_de=lexical;dictionary.enabled=false" lexical   # English questions (val) without and with the dictionary
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from lexrag.config import load_config
from lexrag.eval.experiment_cli import arg_parser, check_args, run_from_args


def main() -> int:
    import benchkit

    return benchkit.guarded(_main)  # a problem the user can fix, a full disk or Ctrl-C: one line, as the CLI gives it


BUILD_PREFIX = "lexrag-quality-"  # the temporary build: lexrag-quality-<pid>-<random>


def _sweep_dead_builds() -> None:
    """Remove the temporary builds of runs that were killed before their build finished (their
    process is gone and no corpus was published there); a finished one was announced as kept."""
    import shutil

    from lexrag.io.outputs import owner_gone

    for d in Path(tempfile.gettempdir()).glob(f"{BUILD_PREFIX}*-*"):
        if d.is_dir() and not d.is_symlink() and owner_gone(d.name, BUILD_PREFIX) and not (d / "corpus" / "params.json").is_file():
            shutil.rmtree(d, ignore_errors=True)


def _main() -> int:
    ap = arg_parser(__doc__)
    ap.add_argument("--courts", help="court considerations CSV for a build (default: DATA/court_considerations_sample.csv)")
    ap.add_argument("--dictionary", help="a dictionary file for a build's dictionary artifact (Debian trans-de-en: "
                    "/usr/share/trans/de-en), which the lexical, exam and kaggle presets use for English questions")
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    for name in ("lexrag.pipeline", "lexrag.index", "lexrag.stages"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import warnings

    warnings.simplefilter("ignore", UserWarning)
    data = Path(args.data)
    _check_build_options(args)
    check_args(args, build=not args.artifacts)  # every option before the build, not after it
    if not args.artifacts:  # build them once into a temporary folder, with the prior from the tuning file
        from lexrag.pipeline.build import build_artifacts

        _sweep_dead_builds()
        args.artifacts = tempfile.mkdtemp(prefix=f"{BUILD_PREFIX}{os.getpid()}-")
        made = args.artifacts
        courts = Path(args.courts) if args.courts else data / "court_considerations_sample.csv"
        keys, abbrev = data / "laws_de_citations.txt", data / "abbrev-translations.json"
        heads, english = data / "laws_de_headings.csv", data / "laws_en.csv"  # the statute headings; the laws in English
        t0 = time.perf_counter()
        try:
            build_artifacts(load_config(None, {"runtime.progress": False, "graph.enabled": True}), data / "laws_de.csv",
                            args.artifacts, courts=courts if args.courts or courts.is_file() else None,
                            law_keys=keys if keys.is_file() else None, train=data / args.tune_on,
                            abbreviations=abbrev if abbrev.is_file() else None, dictionary=args.dictionary,
                            headings=heads if heads.is_file() else None, laws_en=english if english.is_file() else None)
        except BaseException:
            import shutil

            shutil.rmtree(made, ignore_errors=True)  # a failed build leaves nothing behind
            raise
        print(f"built artifacts in {time.perf_counter() - t0:.0f} s -> {made} (kept: pass --artifacts {made} to reuse "
              "them; remove the folder when done)", file=sys.stderr)
    _, text, checks = run_from_args(args)
    print(text)
    return 1 if any(c["status"] == "FAIL" for c in checks) else 0


def _check_build_options(args) -> None:
    """Before any build: ``--dictionary`` and ``--courts`` feed only the build this script makes, and
    a variant that switches the dictionary on needs one there."""
    from lexrag.errors import ConfigError
    from lexrag.eval.experiment_cli import variants_from_args

    for opt, value, what in (("--dictionary", args.dictionary, "the dictionary"), ("--courts", args.courts, "the corpus")):
        if args.artifacts and value:
            raise ConfigError(f"{opt} is read only when this script builds the artifacts (without --artifacts); "
                              f"{args.artifacts} holds {what} it was built with: drop {opt}, or drop --artifacts to "
                              "build afresh")
    if not args.artifacts and not args.dictionary:
        needs = [v.name for v in variants_from_args(args) if v.config(args.config).dictionary.enabled]
        if needs:
            raise ConfigError(f"variant {needs[0]!r} switches the dictionary on (English questions): pass --dictionary "
                              "FILE (Debian trans-de-en: /usr/share/trans/de-en), or switch it off in the variant "
                              "(\"NAME=PRESET;dictionary.enabled=false\")")


if __name__ == "__main__":
    raise SystemExit(main())
