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
    from lexrag.io.procmem import process_memory

    return process_memory()["peak"] * 1024


_SET = "LEXRAG_BENCH_SET"


def _refuse(line: str) -> None:
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(2)


def _override(item: str) -> tuple[str, object]:
    import yaml

    key, sep, value = item.partition("=")
    if not sep or not key:
        _refuse(f"--set {item!r}: expected KEY=VALUE, e.g. lexical.decompound=false")
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError as e:
        _refuse(f"--set {item[:80]!r}: the value is not YAML ({str(e).splitlines()[0]})")


def overrides() -> dict:
    """The ``--set`` config overrides of this run (the phases run as subprocesses and read them here)."""
    return json.loads(os.environ.get(_SET, "{}"))


CSV_BYTES_PER_DOC = 3_400  # a synthetic court consideration of 200-300 words with its citation, as CSV


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
    there = next(p for p in Path(os.path.abspath(args.work)).parents if p.is_dir()) if not Path(args.work).is_dir() else \
        Path(args.work)
    free, need = shutil.disk_usage(there).free, max(args.sizes) * CSV_BYTES_PER_DOC
    if need > free:  # before generating anything (the decisions are drawn in memory first, so a huge size would grow for ever)
        ap.error(f"--sizes {max(args.sizes):,}: its generated CSV alone takes about {need / 1e9:,.1f} GB, and --work "
                 f"{args.work} has {free / 1e9:,.1f} GB free; give smaller sizes or a --work with room")
    from lexrag.config import load_config
    from lexrag.errors import ConfigError, LexragError

    if args.json:
        from lexrag.io.outputs import check_output_file

        work = Path(os.path.abspath(args.work))
        if work in Path(os.path.abspath(args.json)).parents:  # also before --work exists: its size folders are removed
            ap.error(f"--json {args.json} lies inside --work {args.work}, whose size folders the run removes; write it "
                     "elsewhere")

        try:
            check_output_file(args.json, "--json", {what: path for what, path in inputs}, {"--work": args.work},
                              "bench.jsonl")
        except LexragError as e:
            ap.error(str(e))

    try:
        load_config(None, dict(_override(o) for o in args.set))
    except ConfigError as e:
        ap.error(f"--set: {e}")


def main(script: str, doc: str, phase: Callable[[str, Path, int], dict], phases: Sequence[str],
         sizes: Sequence[int], work: str, table: Callable[[list[dict]], None],
         prepare: Callable[[Path, int], dict] | None = None, inputs: Sequence[tuple[str, Path]] = ()) -> int:
    """A benchmark run: the options checked, each size's phases run as subprocesses, the table; a
    project error or a disk error is one line, exit 2."""
    return guarded(lambda: _run(script, doc, phase, phases, sizes, work, table, prepare, inputs))


def _run(script: str, doc: str, phase: Callable[[str, Path, int], dict], phases: Sequence[str],
         sizes: Sequence[int], work: str, table: Callable[[list[dict]], None],
         prepare: Callable[[Path, int], dict] | None, inputs: Sequence[tuple[str, Path]]) -> int:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="*", type=int, default=list(sizes))
    ap.add_argument("--work", default=work)
    ap.add_argument("--json", help="append results to this JSON-lines file")
    ap.add_argument("--keep", action="store_true", help="keep the generated files (a size folder that was there before "
                    "the run is always kept)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="config overrides for every phase, e.g. lexical.decompound=false (YAML values)")
    ap.add_argument("--phases", nargs="*", choices=list(phases), default=list(phases),
                    help="run only these phases, in this order (e.g. the builds, leaving the artifacts with --keep)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    from lexrag.io.cliargs import parse_once

    args = parse_once(ap)
    if args.phase:  # a subprocess of the run below: its overrides come through the environment
        def one() -> int:
            print(json.dumps(phase(args.phase, Path(args.work), args.n)))
            return 0

        return guarded(one, f"phase {args.phase}: ", str(args.work))  # its one line is passed on by the run below
    _check(ap, args, inputs)
    os.environ[_SET] = json.dumps(dict(_override(o) for o in args.set))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    import signal

    def stop(signum, frame):  # a SIGTERM (a timeout, a job killed) unwinds: the phase is stopped, the size folder removed
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    for n in args.sizes:
        folder = Path(args.work) / str(n)
        if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
            from lexrag.errors import ConfigError  # the generated files would go through it, out of --work

            raise ConfigError(f"--work {args.work}: {folder} is a link or a file, not a folder; give a --work where the "
                              f"benchmark makes its own {n}/ folder")
        _sweep_killed_size(folder)
        made = not os.path.lexists(folder)  # a folder that was there (kept by --keep, or the user's) is never removed
        if made and not args.keep:  # marked as this run's, so a run killed outright has it removed by the next one
            folder.mkdir(parents=True)
            (folder / f"{MARK}{os.getpid()}").touch()
        try:
            rc = _size(script, phases, args, folder, n, prepare, rows)
        finally:  # what this size generated goes, also when a phase failed (a full disk), unless --keep
            if made and not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        if rc:
            return rc
    if set(args.phases) == set(phases):
        table(rows)
    else:  # the summary compares every phase's numbers; the JSON rows above are this run's result
        print(f"(no summary table: it needs every phase ({', '.join(phases)}); the rows above hold the phases that ran)")
    return 0


MARK = ".lexrag-bench-run-"  # in a size folder a run made and will remove: the pid of that run


def _sweep_killed_size(folder: Path) -> None:
    """Remove a size folder that a benchmark killed outright (SIGKILL) made and marked as its own."""
    from lexrag.io.outputs import owner_gone

    marks = list(folder.glob(f"{MARK}*")) if folder.is_dir() and not folder.is_symlink() else []
    if marks and all(owner_gone(m.name, MARK) for m in marks):
        shutil.rmtree(folder, ignore_errors=True)


def _size(script: str, phases: Sequence[str], args: argparse.Namespace, folder: Path, n: int,
          prepare: Callable[[Path, int], dict] | None, rows: list[dict]) -> int:
    """One size's phases, each in a subprocess; its row appended to ``rows``; the exit code."""
    folder.mkdir(parents=True, exist_ok=True)
    row: dict = {"n": n, **({"set": overrides()} if args.set else {}), **(prepare(folder, n) if prepare else {})}
    for ph in args.phases:
        out = subprocess.run([sys.executable, script, "--phase", ph, "--work", str(folder), "--n", str(n)],
                             capture_output=True, text=True, env={**os.environ, "CI": "true"})
        if out.returncode == 2:  # a project error: its line, and what a phase reads
            print(out.stderr.strip().splitlines()[-1], file=sys.stderr)
            print(f"(each phase reads what the phases before it made ({', '.join(phases)}): give them in one --phases, "
                  f"or keep them with --keep and the same --work{f'; {folder} is kept' if args.keep else ''})",
                  file=sys.stderr)
            return 2
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        row.update(json.loads(out.stdout.strip().splitlines()[-1]))
    rows.append(row)
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    return 0


def require(ap: argparse.ArgumentParser, args: argparse.Namespace, positive: Sequence[str] = (),
            files: Sequence[str] = (), within: Sequence[tuple[str, str]] = (), outputs: Sequence[str] = ()) -> None:
    """One ``ap.error`` line (exit 2) before any work for an option that cannot be: a count in
    ``positive`` below 1, a file in ``files`` that is not one, a folder in ``within`` (option,
    what it must hold) without that entry, an output file in ``outputs`` that cannot be written or
    would land on an input (:func:`lexrag.io.outputs.check_output_file`)."""
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
    from lexrag.errors import LexragError
    from lexrag.io.outputs import check_output_file

    reads = {opt(name): getattr(args, name) for name in files}
    folders = {opt(name): getattr(args, name) for name, _ in within}
    for name in outputs:
        value = getattr(args, name)
        if value is not None:
            try:  # a file name, in a folder that can be made, none of the inputs, in no folder the run reads
                check_output_file(value, opt(name), reads, folders, "bench.json")
            except LexragError as e:
                ap.error(str(e))
            Path(value).parent.mkdir(parents=True, exist_ok=True)


def guarded(main: Callable[[], int], prefix: str = "", where: str = "an output file") -> int:
    """``main()``, with a project error (a bad input the project names) or a disk error (a full disk,
    a path too long; ``where`` when the system names no file) as one ``error:`` line, exit 2, and
    Ctrl-C as one ``interrupted:`` line, exit 130."""
    from lexrag.errors import LexragError, disk_error

    try:
        return main()
    except KeyboardInterrupt:  # every output is written whole or not at all, so what was there stays
        print(f"interrupted: {prefix}{Path(sys.argv[0]).name} stopped; the files that were there are kept", file=sys.stderr)
        return 130
    except LexragError as e:
        print(f"error: {prefix}{e}", file=sys.stderr)
        return 2
    except OSError as e:
        line = disk_error(e, where)
        if line is None:
            raise
        print(f"error: {prefix}{line}", file=sys.stderr)
        return 2
