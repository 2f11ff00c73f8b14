"""Shared runner of the phase-per-process benchmarks (bench_bm25.py, bench_graph.py).

Each phase runs in a fresh process (``SCRIPT --phase NAME --work DIR --n N``) and prints one
JSON object, so its peak RSS (``ru_maxrss``) is its own; the rows of all sizes are printed as
JSON lines (appended to ``--json`` when given) and then as a table."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence


def peak_rss_mb() -> float:
    from lexrag.procmem import process_memory

    return process_memory()["peak"] * 1024


_SET = "LEXRAG_BENCH_SET"


def _override(item: str) -> tuple[str, object]:
    import yaml

    key, sep, value = item.partition("=")
    if not sep or not key:
        raise SystemExit(f"--set {item!r}: expected KEY=VALUE, e.g. lexical.decompound=false")
    return key, yaml.safe_load(value)


def overrides() -> dict:
    """The ``--set`` config overrides of this run (the phases run as subprocesses and read them here)."""
    return json.loads(os.environ.get(_SET, "{}"))


def _check(ap: argparse.ArgumentParser, args: argparse.Namespace, inputs: Sequence[tuple[str, Path]]) -> None:
    """The options, before any phase: sizes, the work folder, the JSON file, the overrides, and the
    input files the phases read (``inputs``: what each is and where)."""
    for what, path in inputs:
        if not Path(path).is_file():
            ap.error(f"{what} {path}: not a file")
    bad = [n for n in args.sizes if n < 1]
    if bad or not args.sizes:
        ap.error(f"--sizes {' '.join(map(str, args.sizes))}: give document counts of 1 or more")
    if Path(args.work).exists() and not Path(args.work).is_dir():
        ap.error(f"--work {args.work}: not a folder (the generated files go there)")
    if args.json and os.path.lexists(args.json) and not Path(args.json).is_file():
        ap.error(f"--json {args.json}: not a plain file (a folder, link target missing, FIFO or device); give a file to append to")
    from lexrag.config import load_config
    from lexrag.errors import ConfigError

    try:
        load_config(None, dict(_override(o) for o in args.set))
    except ConfigError as e:
        ap.error(f"--set: {e}")


def main(script: str, doc: str, phase: Callable[[str, Path, int], dict], phases: Sequence[str],
         sizes: Sequence[int], work: str, table: Callable[[list[dict]], None],
         prepare: Callable[[Path, int], dict] | None = None, inputs: Sequence[tuple[str, Path]] = ()) -> int:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=int, default=list(sizes))
    ap.add_argument("--work", default=work)
    ap.add_argument("--json", help="append results to this JSON-lines file")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="config overrides for every phase, e.g. lexical.decompound=false (YAML values)")
    ap.add_argument("--phases", nargs="*", choices=list(phases), default=list(phases),
                    help="run only these phases, in this order (e.g. the builds, leaving the artifacts with --keep)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:  # a subprocess of the run below: its overrides come through the environment
        print(json.dumps(phase(args.phase, Path(args.work), args.n)))
        return 0
    _check(ap, args, inputs)
    os.environ[_SET] = json.dumps(dict(_override(o) for o in args.set))
    rows = []
    for n in args.sizes:
        folder = Path(args.work) / str(n)
        folder.mkdir(parents=True, exist_ok=True)
        row: dict = {"n": n, **({"set": overrides()} if args.set else {}), **(prepare(folder, n) if prepare else {})}
        for ph in args.phases:
            out = subprocess.run([sys.executable, script, "--phase", ph, "--work", str(folder), "--n", str(n)],
                                 capture_output=True, text=True, env={**os.environ, "CI": "true"})
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            row.update(json.loads(out.stdout.strip().splitlines()[-1]))
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        if not args.keep:
            shutil.rmtree(folder)
    table(rows)
    return 0


def require(ap: argparse.ArgumentParser, args: argparse.Namespace, positive: Sequence[str] = (),
            files: Sequence[str] = (), within: Sequence[tuple[str, str]] = (), outputs: Sequence[str] = ()) -> None:
    """One ``ap.error`` line (exit 2) before any work for an option that cannot be: a count in
    ``positive`` below 1, a file in ``files`` that is not one, a folder in ``within`` (option,
    what it must hold) without that entry, an output file in ``outputs`` that is a folder, a link,
    a FIFO or a device."""
    def opt(name: str) -> str:
        return "--" + name.replace("_", "-")

    for name in positive:
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"{opt(name)} {value}: give 1 or more")
    for name in files:
        value = getattr(args, name)
        if value is not None and not Path(value).is_file():
            ap.error(f"{opt(name)} {value}: not a file")
    for name, entry in within:
        value = getattr(args, name)
        if value is not None and not (Path(value) / entry).exists():
            ap.error(f"{opt(name)} {value}: no {entry} there")
    for name in outputs:
        value = getattr(args, name)
        if value is not None and (os.path.islink(value) or (os.path.lexists(value) and not Path(value).is_file())):
            ap.error(f"{opt(name)} {value}: not a plain file (a folder, link, FIFO or device); give a file name")


def guarded(main: Callable[[], int]) -> int:
    """``main()``, with a project error (a bad input the project names) as one ``error:`` line, exit 2."""
    from lexrag.errors import LexragError

    try:
        return main()
    except LexragError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
