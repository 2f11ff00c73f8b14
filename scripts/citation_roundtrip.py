#!/usr/bin/env python
"""Share of citation keys that parse and format back unchanged (a script, not a test).

  python scripts/citation_roundtrip.py ../shared/data/laws_de_citations.txt [more files ...]

A file is either one key per line or a CSV whose first column is the citation (header skipped).
"Unchanged" is exact; "unchanged after whitespace collapse" is the competition's own comparison.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
import csv
from collections import Counter

from lexrag.citations import try_parse


def keys(path: str) -> list[str]:
    """The keys of ``path``; bytes that are not UTF-8 read as U+FFFD, with a warning, as the kit's readers read them."""
    if path.endswith(".csv"):
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            rows = csv.reader(f)
            next(rows, None)
            out = [r[0] for r in rows if r]
    else:
        with open(path, encoding="utf-8", errors="replace") as f:
            out = [line.rstrip("\n") for line in f if line.strip()]
    bad = sum("\ufffd" in k for k in out)
    if bad:
        print(f"warning: {path}: {bad} key(s) hold bytes that are not UTF-8 (read as U+FFFD); save the file as UTF-8",
              file=sys.stderr)
    return out


def main(paths: list[str]) -> int:
    for path in paths:
        ks = keys(path)
        stats: Counter = Counter()
        examples: dict[str, list[str]] = {}
        for k in ks:
            c = try_parse(k)
            if c is None:
                what = "does not parse"
            elif c.format() == k:
                what = "exact"
            elif c.format() == " ".join(k.split()):
                what = "whitespace only"
            else:
                what = "changed"
            stats[what] += 1
            if what != "exact":
                examples.setdefault(what, []).append(k)
        print(f"{path}: {len(ks)} keys")
        for what in ("exact", "whitespace only", "changed", "does not parse"):
            print(f"  {what:<16} {stats[what]:>7} ({stats[what] / max(len(ks), 1):.4%})  {examples.get(what, [])[:3]}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=["../shared/data/laws_de_citations.txt"],
                    help="key files (one key per line) or CSVs whose first column is the citation")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    from lexrag.io.csvio import check_input_file
    from lexrag.errors import CsvInputError

    for f in args.files:
        try:  # missing, a folder or FIFO, compressed, or UTF-16: one line, as everywhere in the kit
            check_input_file(Path(f), "key file or CSV whose first column is the citation")
        except CsvInputError as e:
            ap.error(str(e))
    import benchkit

    raise SystemExit(benchkit.guarded(lambda: main(args.files)))
