#!/usr/bin/env python
"""LEXam's English open questions whose reference answers cite Swiss federal acts, as a query file
with gold (query_id,query,gold_citations,course) in the competition's citation form, for scoring
English questions beside val.csv.  Never tuned on: only scored.

  python scripts/lexam_english.py LEXAM/data/open_questions_dev.xlsx LEXAM/data/open_questions_test.xlsx \
      --out lexam_en.csv

LEXam (LEXam-Benchmark/LEXam on GitHub, data CC BY 4.0) ships its questions as Excel files;
reading them needs ``openpyxl`` (``pip install openpyxl``; not a lexrag dependency).  An answer's
"Art. 180 para. 1 lit. c PILA" becomes "Art. 180 Abs. 1 IPRG" (the English abbreviations of the
acts below -> their German ones; the competition's keys stop at the paragraph); a citation of
another act is left out, and a question without one Swiss citation is left out.  The gold is
what the reference answer cites, so it is partial.
"""

import argparse
import csv
import re
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import benchkit  # beside this script
from lexrag.errors import CsvInputError

# English abbreviations of Swiss federal acts in LEXam's English answers -> the German ones
ACTS = {"PILA": "IPRG", "CC": "ZGB", "SCC": "StGB", "CO": "OR", "Cst": "BV", "FC": "BV", "BGG": "BGG", "FSCA": "BGG",
        "FMIA": "FinfraG", "FinMIA": "FinfraG", "DEBA": "SchKG", "CPC": "ZPO", "CrimPC": "StPO", "OR": "OR", "ZGB": "ZGB",
        "StGB": "StGB", "IPRG": "IPRG", "BV": "BV"}
# "Art. 180 para. 1 lit. c PILA", "article 29 par. 2 Cst": the act's abbreviation as written, case and all
# ("Art. 29 or Art. 30 Cst": "or" is no act)
_CITE = re.compile(r"\b(?i:Art(?:icle|s?\.))\s*(\d+[a-z]?)(?:\s*(?i:para\.?|par\.|Abs\.|al\.)\s*(\d+))?"
                   r"(?:\s*(?i:lit\.|let\.)\s*[a-z])?\s+(?:of\s+the\s+)?([A-Z][A-Za-z]{1,7})\b")


def read_xlsx(path: str | Path) -> list[dict[str, str]]:
    """The first sheet's rows as dicts keyed by its header (openpyxl)."""
    try:
        import openpyxl
    except ImportError:
        raise CsvInputError("reading LEXam's Excel files needs openpyxl (pip install openpyxl)") from None
    from openpyxl.utils.exceptions import InvalidFileException  # a file named other than .xlsx

    try:
        sheet = openpyxl.load_workbook(path, read_only=True).worksheets[0]
    except (OSError, zipfile.BadZipFile, KeyError, ElementTree.ParseError, InvalidFileException) as e:
        raise CsvInputError(f"{path}: not an Excel workbook ({type(e).__name__}); give LEXam's data/open_questions_*.xlsx") from None
    rows = sheet.iter_rows(values_only=True)
    return as_dicts(path, [str(h) for h in next(rows, ())], rows)


def as_dicts(path, header: list[str], rows) -> list[dict[str, str]]:
    """The rows as dicts keyed by the header, which must name LEXam's columns (one line otherwise)."""
    missing = [c for c in ("id", "question", "answer", "course", "language") if c not in header]
    if missing:
        raise CsvInputError(f"{path}: no column {missing[0]!r} (it has {', '.join(header) or 'none'}); give LEXam's "
                            "data/open_questions_*.xlsx")
    return [{h: "" if v is None else str(v) for h, v in zip(header, row)} for row in rows]


def swiss_citations(answer: str) -> list[str]:
    """The answer's citations of the acts in :data:`ACTS`, in German form, in order, once each."""
    out = []
    for m in _CITE.finditer(answer):
        if m.group(3) in ACTS:
            out.append(f"Art. {m.group(1)}" + (f" Abs. {m.group(2)}" if m.group(2) else "") + f" {ACTS[m.group(3)]}")  # keys stop at Abs.
    return list(dict.fromkeys(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("xlsx", nargs="+", help="LEXam's data/open_questions_dev.xlsx, data/open_questions_test.xlsx")
    ap.add_argument("--out", required=True, help="the query file to write (CSV)")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, outputs=("out",))
    for f in args.xlsx:
        if not Path(f).is_file():
            ap.error(f"{f}: not a file")
    rows, seen, blank = [], set(), []
    for f in args.xlsx:
        for r in read_xlsx(f):
            gold = swiss_citations(r["answer"])
            if r["language"] != "en" or not gold or r["id"] in seen:
                continue
            seen.add(r["id"])
            if not r["question"].strip():  # nothing to search: said, not written as a question
                blank.append(r["id"])
                continue
            rows.append({"query_id": f"lexam_en_{r['id']}", "query": r["question"], "gold_citations": ";".join(gold),
                         "course": r["course"]})
    with open(args.out, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["query_id", "query", "gold_citations", "course"])
        w.writeheader()
        w.writerows(rows)
    if blank:
        print(f"warning: {len(blank)} English question(s) with Swiss citations but no question text left out (id "
              f"{', '.join(blank[:5])})", file=sys.stderr)
    courses = sorted({r["course"] for r in rows})
    print(f"{len(rows)} English questions with Swiss citations ({sum(len(r['gold_citations'].split(';')) for r in rows)} "
          f"gold) from {len(courses)} courses -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
