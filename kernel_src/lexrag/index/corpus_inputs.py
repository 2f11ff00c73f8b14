"""The files a corpus build reads beside the laws and court CSV files (see
:mod:`lexrag.index.corpus_build`): a list of law keys (documents with empty text), the
competition's abbreviations file (the French and Italian names of the law codes) and a headings
file (each law key's article heading and the headings above it).  Each is checked as it is read:
a row that cannot be used is dropped, counted and quoted with its line, a file that is not what
its option asks for is a :class:`CorpusError` naming it."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Iterator

from lexrag import citations as cit
from lexrag.io.hashcache import sha256_file
from lexrag.config import CorpusConfig
from lexrag.io.csvio import CsvInputError as CorpusError
from lexrag.io.csvio import FileReport, check_input_file, read_csv_rows, repair_text

__all__ = ["MAX_ERROR_EXAMPLES", "read_key_rows", "read_abbreviations", "Headings", "read_headings"]

log = logging.getLogger(__name__)

MAX_ERROR_EXAMPLES = 20  # bad rows quoted (line and reason) per input file in the build report
HEADINGS_HEADER = ("citation", "article_heading", "path")  # the headings file's columns


def read_key_rows(path: Path, report: FileReport) -> Iterator[tuple[int, dict[str, str]]]:
    """A list of law keys, one per line, as rows with empty text (a line that is not UTF-8 is
    decoded as cp1252 or latin-1, counted and quoted, as in the CSV files)."""
    check_input_file(path, "file of law keys")
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline=None) as f:
        line = 0
        for line, key in enumerate(f, start=1):
            if key.strip():
                report.rows_read += 1
                key, repaired = repair_text(key.strip("\r\n"))
                if "," in key or '"' in key:  # no law key holds either: a CSV row, not a key
                    report.malformed += 1
                    report.note("malformed", line, f"not a single key (a comma or quote: a CSV row?): {key[:80]!r}")
                    continue
                if repaired:
                    report.encoding_repaired += 1
                    report.note("encoding", line, "not valid UTF-8; decoded as cp1252/latin-1")
                yield line, {"citation": key, "text": ""}
        report.lines = line


def read_abbreviations(path: str | Path) -> list[tuple[str, str]]:
    """(alias, German code) pairs of an abbreviations file shaped like the competition's
    ``abbrev-translations.json``: a list of ``{"id": ..., "abbrev": {"de": "OR", "fr": "CO",
    "it": "CO"}}``.  Entries without a German abbreviation are skipped; anything else that is not
    that shape raises :class:`CorpusError` naming the file and the entry."""
    from lexrag.io.inputfiles import read_text_file

    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found")
    text = read_text_file(path, CorpusError)  # a regular file, bounded, UTF-8
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise CorpusError(f"{path}: JSON nested too deeply to read; give the competition's abbrev-translations.json") from None
    if not isinstance(doc, list):
        raise CorpusError(f"{path}: expected a JSON list of {{\"id\", \"abbrev\": {{\"de\", \"fr\", \"it\"}}}} entries, "
                          f"got {type(doc).__name__}")
    pairs: list[tuple[str, str]] = []
    for i, entry in enumerate(doc, start=1):
        names = entry.get("abbrev") if isinstance(entry, dict) else None
        if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
            raise CorpusError(f"{path}: entry {i} ({str(entry)[:80]}): expected \"abbrev\" to map languages to "
                              "abbreviation strings")
        de = " ".join(names.get("de", "").split())  # as the corpus's codes are written
        if de:
            pairs.extend((alias, de) for lang, alias in names.items() if lang != "de")
    return pairs


@dataclass
class Headings:
    """A headings file read for a build: law key -> (article heading, heading path), with the
    file's report; :meth:`of` finds a document's pair by its own key, else by its article's."""

    path: Path
    by_key: dict[str, tuple[str, str]]
    report: FileReport
    sha256: str
    docs: Counter = dataclass_field(default_factory=Counter)  # law documents by what they got (heading, path only, none)
    used: set = dataclass_field(default_factory=set)  # keys of the file some document took its pair from

    def of(self, citation: str, article: str) -> tuple[str, str]:
        for key in (" ".join(citation.split()), " ".join(article.split())):
            pair = self.by_key.get(key)
            if pair is not None:
                self.used.add(key)
                self.docs["heading" if pair[0] else "path only"] += 1
                return pair
        self.docs["none"] += 1
        return "", ""

    def summary(self) -> dict:
        n = sum(self.docs.values())
        return {"file": self.path.name, "sha256": self.sha256, "rows": len(self.by_key),
                "law_docs": n, "law_docs_with_heading": self.docs["heading"], "law_docs_with_path_only": self.docs["path only"],
                "law_docs_without": self.docs["none"], "rows_matching_no_document": len(self.by_key) - len(self.used),
                "read": {k: v for k, v in self.report.__dict__.items() if k not in ("max_examples", "columns")}}


def read_headings(path: str | Path, cfg: CorpusConfig | None = None) -> Headings:
    """Read a headings file (columns ``citation,article_heading,path``; e.g. ``laws_de_headings.csv``
    or what ``scripts/make_headings.py`` writes).  Whitespace inside the fields is collapsed; a row
    without a law citation is dropped and quoted (line and reason); a key given twice keeps its
    first pair and quotes the other; a row with neither a heading nor a path is skipped and
    counted.  A file without one usable row is refused: it would change nothing."""
    cfg = cfg or CorpusConfig()
    path = Path(path)
    report = FileReport(file=path.name, max_examples=MAX_ERROR_EXAMPLES)
    by_key: dict[str, tuple[str, str]] = {}
    try:
        rows = read_csv_rows(path, HEADINGS_HEADER, report, strict=cfg.strict_quotes)
        for line, row in rows:
            key = " ".join(row["citation"].split())
            heading, above = " ".join(row["article_heading"].split()), " ".join(row["path"].split())
            parsed = cit.try_parse(key) if key else None
            if parsed is None or parsed.kind != "law":
                report.malformed += 1
                report.note("malformed", line, f"not a law citation: {key[:80]!r}")
                continue
            if not heading and not above:
                report.empty_text += 1
                continue
            if key in by_key:
                report.duplicates += 1
                if by_key[key] != (heading, above):
                    report.same_key += 1
                    report.note("same_key", line, f"{key!r} was given before with another heading or path; the first is kept")
                continue
            by_key[key] = (heading, above)
            report.written += 1
    except CorpusError as e:
        raise CorpusError(f"--headings {e} (give a CSV with columns {','.join(HEADINGS_HEADER)}: "
                          "scripts/make_headings.py writes one)") from None
    if not by_key:
        raise CorpusError(f"--headings {path}: no usable row ({report.rows_read} rows read, {report.malformed} without a law "
                          f"citation, {report.empty_text} without heading and path); give a CSV with columns "
                          f"{','.join(HEADINGS_HEADER)} such as 'Art. 505 Abs. 1 ZGB,Eigenhändige Verfügung,...'")
    if report.malformed or report.same_key or report.encoding_repaired or report.lines_lost:
        log.warning("--headings %s: %d rows read, %d used, %d without a law citation dropped, %d keys given again with another "
                    "pair (the first kept), %d re-decoded from cp1252/latin-1; the build report lists them; first: %s", path,
                    report.rows_read, report.written, report.malformed, report.same_key, report.encoding_repaired,
                    "; ".join(f"line {x['line']}: {x['reason']}" for x in report.examples[:3]))
    return Headings(path, by_key, report, sha256_file(path))
