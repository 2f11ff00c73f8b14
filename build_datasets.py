#!/usr/bin/env python
"""Rebuild the artifacts listed in artifacts_manifest.yaml as Kaggle dataset folders.

  python build_datasets.py --laws laws_de.csv [--courts court_considerations.csv | --no-courts] [--train train.csv] --out datasets/
  python build_datasets.py --check --out datasets/          # every mismatch with the manifest, exit 1 if any
  python build_datasets.py --check --upload --out datasets/ # check, then kaggle datasets create/version per folder

A build checks what it built (an artifact it skips, such as the prior without --train, keeps its
manifest entry and is named in a warning); --check checks everything --only selects.

Each folder gets its files, params.json and dataset-metadata.json; the manifest records
sha256, size, doc count and version of every file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


COMMITTED = ROOT / "artifacts_manifest.yaml"


def _stage_manifest(manifest: str, record: bool, out: str) -> tuple[str, Path | None]:
    """The manifest a build records into: for the committed manifest (unless --record) a hidden copy
    in ``out``, so that a build of other data (the demo slice) never rewrites it; returns the path
    to record into and the copy (None when the build records into ``manifest`` itself).  A copy a
    killed build left there is removed by the next build (its process is gone)."""
    if record or not Path(manifest).is_file() or Path(manifest).resolve() != COMMITTED.resolve():
        return manifest, None
    import shutil
    import tempfile

    from lexrag.io.outputs import sweep_leftovers

    Path(out).mkdir(parents=True, exist_ok=True)
    sweep_leftovers(Path(out) / "lexrag-manifest", ".yaml")
    fd, copy = tempfile.mkstemp(prefix=f".lexrag-manifest.{os.getpid()}-", suffix=".yaml", dir=out)
    os.close(fd)
    shutil.copyfile(manifest, copy)
    return copy, Path(copy)


def _settle_manifest(manifest: str, staged: Path | None, out: str, built: list[str]) -> str:
    """Where the build's manifest goes: into the committed manifest when it records the same data
    there (the same document counts and sources: a rebuild, a new wheel), else beside the datasets as
    ``<out>/artifacts_manifest.yaml`` with a warning (the committed one stays; --record writes it)."""
    if staged is None:
        return manifest
    import shutil

    import yaml

    old = {a.get("name"): a for a in (yaml.safe_load(Path(manifest).read_text(encoding="utf-8")) or {}).get("artifacts", [])}
    new = {a.get("name"): a for a in (yaml.safe_load(staged.read_text(encoding="utf-8")) or {}).get("artifacts", [])}
    differ = [_differs(n, new[n], old[n]) for n in built if n in new and n in old
              and (new[n].get("doc_count"), new[n].get("sources")) != (old[n].get("doc_count"), old[n].get("sources"))]
    if not differ:
        shutil.copyfile(staged, manifest)
        staged.unlink()
        return manifest
    target = Path(out) / "artifacts_manifest.yaml"
    if target.is_file():  # a build in parts: this part's entries join those the earlier parts recorded there
        from lexrag.kaggle.manifest import load_manifest, save_manifest

        doc, mine = load_manifest(target), load_manifest(staged)
        fresh = {a.get("name"): a for a in mine.get("artifacts", []) if a.get("name") in built}
        doc["artifacts"] = [fresh.pop(a.get("name"), a) for a in doc.get("artifacts", [])] + list(fresh.values())
        save_manifest(target, doc)
        staged.unlink()
    else:
        shutil.move(str(staged), target)
    print(f"warning: this build is of other data than the committed manifest records ({'; '.join(differ)}); it is "
          f"recorded in {target} and {manifest} is unchanged (--record records it there)", file=sys.stderr)
    return str(target)


def _check_own_manifest(own: Path) -> None:
    """Refuse, before anything is built, an ``OUT/artifacts_manifest.yaml`` that a build of other data
    could not record into (a link, a folder, not a manifest): else the datasets would be replaced
    and their record lost."""
    if not os.path.lexists(own):
        return
    from lexrag.errors import ConfigError, LexragError
    from lexrag.io.outputs import check_plain_output
    from lexrag.kaggle.manifest import load_manifest

    try:
        if own.is_dir():
            raise ConfigError(f"{own} is a folder")
        check_plain_output(own)
        load_manifest(own)
    except LexragError as e:
        raise ConfigError(f"{str(e).rstrip('.')}; a build of other data records its datasets in {own}: repair it or move it "
                          "away first (nothing was built)") from None


def _differs(name: str, new: dict, old: dict) -> str:
    """How a built artifact differs from the committed manifest's entry, in words (an artifact without
    a document count, the prior, differs by its sources)."""
    n, o = new.get("doc_count"), old.get("doc_count")
    if n == o or n is None or o is None:  # an artifact without a count (the prior, an LLM cache export) differs by its sources
        return f"{name}: built from other sources than the committed manifest records"
    return f"{name}: {n} documents, the committed manifest records {o}"


def parser() -> argparse.ArgumentParser:
    """The command line (also what the manifest's ``builder`` lines are read with, in the tests)."""
    from lexrag.registry import add_input_arguments

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--manifest", help="the manifest to record into and check against (default: the committed "
                   "artifacts_manifest.yaml; --check: OUT/artifacts_manifest.yaml where a build of other data wrote one)")
    p.add_argument("--out", required=True, help="folder holding one dataset folder per artifact")
    add_input_arguments(p, datasets=True)  # the build inputs the artifacts' specs read, as `lexrag build` takes them
    p.add_argument("--no-courts", action="store_true", help="laws only, even with court_considerations.csv beside --laws "
                   "(the graph then has no court edges and runs leave it off)")
    p.add_argument("--only", help="comma-separated artifact names (default: all)")
    p.add_argument("--owner", help="Kaggle user or organisation owning the datasets (default: manifest owner)")
    p.add_argument("--config", help="YAML config")
    p.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE")
    p.add_argument("--check", action="store_true", help="only verify existing folders against the manifest")
    p.add_argument("--record", action="store_true", help="record a build of other data (another corpus, such as the demo "
                   "slice) in the committed manifest; without it such a build is recorded in OUT/artifacts_manifest.yaml "
                   "(a manifest of your own given with --manifest is always recorded in place)")
    p.add_argument("--upload", action="store_true", help="push the folders with the kaggle CLI after building/checking")
    p.add_argument("--message", default="", help="version message for --upload")
    return p


def main(argv: list[str] | None = None) -> int:
    from lexrag.io.cliargs import parse_once
    from lexrag.config import load_config, parse_overrides
    from lexrag.errors import ConfigError, LexragError
    from lexrag.index.build import courts_beside
    from lexrag.kaggle.datasets import rebuild
    from lexrag.kaggle.manifest import check
    from lexrag.kaggle.upload import upload

    args = parse_once(parser(), argv)
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.owner is not None:  # checked before any build: it becomes every dataset's id
        from lexrag.errors import LexragError
        from lexrag.kaggle.datasets import check_owner

        try:
            check_owner(args.owner)
        except LexragError as e:
            print(f"error: --owner: {e}", file=sys.stderr)
            return 2
    if args.manifest is None:  # a build of your own data records OUT/artifacts_manifest.yaml: --check reads that one
        own = Path(args.out) / "artifacts_manifest.yaml"
        args.manifest = str(own if args.check and own.is_file() else COMMITTED)
        if args.check and own.is_file():
            print(f"checking against {own}, which the build of these datasets wrote (--manifest picks another)",
                  file=sys.stderr)
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    if only is not None and "" in only and any(only):  # "corpus,,bm25": a slip of the comma, read as the names given
        print(f"warning: --only {args.only!r} has an empty name between its commas; read as {','.join(filter(None, only))}",
              file=sys.stderr)
        only = [n for n in only if n]
    try:
        checked, stray = only, []
        if args.check:
            from lexrag.registry import INPUTS

            given = [i.flag for i in INPUTS if getattr(args, i.field)]  # the build inputs, as the specs read them
            given += [f for f, v in (("--owner", args.owner if not args.upload else None),
                                     ("--no-courts", args.no_courts), ("--set", args.set), ("--record", args.record),
                                     ("--config", args.config)) if v]
            if given:
                print(f"warning: {', '.join(given)} not read: --check builds nothing", file=sys.stderr)
            if os.path.lexists(args.out) and not Path(args.out).is_dir():
                raise ConfigError(f"--out {args.out} is a file, not a folder: give the folder the datasets were built in")
            if only is None:  # what was built: artifacts with no folder in --out are named, not mismatches
                from lexrag.kaggle.manifest import load_manifest

                entries = load_manifest(args.manifest)["artifacts"]
                checked = [a["name"] for a in entries if (Path(args.out) / a["name"]).is_dir()]
                absent = [a["name"] for a in entries if a["name"] not in checked]
                from lexrag.kaggle.manifest import unlisted

                stray = unlisted(args.manifest, args.out)  # a folder the manifest lacks: an upload would skip it
                for line in stray:
                    print(f"MISMATCH {line}")
                if stray and not checked:
                    return 1
                if not checked:
                    print(f"MISMATCH nothing is built in {args.out}: build the datasets first (README, Kaggle quickstart)")
                    return 1
                if absent:
                    print(f"warning: not built in {args.out}, so not checked: {', '.join(absent)} "
                          f"(--only {','.join(absent)} checks them)", file=sys.stderr)
        else:
            from lexrag.io.outputs import check_plain_output

            check_plain_output(args.manifest, "--manifest")  # it is rewritten: a link would become a copy, its target stale
            if args.record or Path(args.manifest).resolve() != COMMITTED.resolve():  # recorded in place: writable now
                from lexrag.io.outputs import check_output_file

                check_output_file(args.manifest, "--manifest", example="artifacts_manifest.yaml", error=ConfigError)
            from lexrag.io.outputs import check_outside_artifacts

            check_outside_artifacts(args.out, "--out", "give a folder of its own for the datasets", ConfigError)
            cfg = load_config(args.config, parse_overrides(args.set))
            from lexrag.io.outputs import check_makeable

            check_makeable(args.out, "--out")
            made = not os.path.lexists(args.out)
            committed, (args.manifest, staged) = args.manifest, _stage_manifest(args.manifest, args.record, args.out)
            try:
                if staged is not None:  # a build of other data records into OUT's manifest: it must be readable first
                    _check_own_manifest(Path(args.out) / "artifacts_manifest.yaml")
                courts = courts_beside(args.laws, False if args.no_courts else args.courts) if args.laws else args.courts
                doc = rebuild(args.manifest, args.out, cfg, laws=args.laws, courts=courts, only=only, owner=args.owner,
                              law_keys=args.law_keys, train=args.train, llm_cache=args.llm_cache,
                              abbreviations=args.abbreviations, dictionary=args.dictionary, headings=args.headings,
                              laws_en=args.laws_en)
            except BaseException:  # the copy recorded into goes with the failed build (and a folder it alone made)
                if staged is not None:
                    staged.unlink(missing_ok=True)
                    if made and Path(args.out).is_dir() and not any(Path(args.out).iterdir()):
                        Path(args.out).rmdir()
                raise
            checked = doc["built"]
            args.manifest = _settle_manifest(committed, staged, args.out, checked)
            if staged is None and checked:  # the manifest given was rewritten: said, as a record into OUT's is
                print(f"recorded in {args.manifest} (rewritten in place)", file=sys.stderr)
        if args.message and not args.upload:
            print("warning: --message is read only with --upload", file=sys.stderr)
        problems = check(args.manifest, args.out, checked) if checked != [] else []
        for line in problems:
            print(f"MISMATCH {line}")
        if problems or stray:
            own = Path(args.out) / "artifacts_manifest.yaml"  # where a build of other data records its manifest
            hint = (f"; {own} is there (a build of other data records its own): --check --manifest {own}"
                    if args.check and own.is_file() and own.resolve() != Path(args.manifest).resolve() else "")
            print(f"compared with {args.manifest}{hint}", file=sys.stderr)
            return 1
        what = "" if checked is None else f" ({', '.join(checked) or 'nothing'} checked)"
        print(f"OK: {args.out} matches {args.manifest}{what}")
        if args.upload and checked == []:
            print("warning: nothing was built, so nothing is uploaded", file=sys.stderr)
        elif args.upload:
            upload(args.manifest, args.out, checked, args.message, owner=args.owner)
    except LexragError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the datasets that were there are kept (a build publishes its set whole)
        print("interrupted: build_datasets.py stopped; the datasets that were there are kept", file=sys.stderr)
        return 130
    except OSError as e:  # a full or read-only disk: one line naming the file, the datasets already there kept
        from lexrag.errors import disk_error

        if getattr(e, "filename2", None) is not None:  # a copy (shutil names its source first, then the file written):
            e.filename, e.filename2 = e.filename2, None  # the file written is the one the disk refused
        line = disk_error(e, f"a file under --out {args.out}")
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        import lexrag  # noqa: F401
    except ModuleNotFoundError:  # run with a Python that lacks the package: one line, not a traceback
        print(f"error: {sys.executable} cannot import lexrag: run .venv/bin/python build_datasets.py ... (make venv makes "
              "the venv; or activate it with . .venv/bin/activate)", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main())
