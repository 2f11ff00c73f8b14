"""Reading CSV inputs row by row: bounded memory, every problem counted and named by line."""

from __future__ import annotations

import csv
import io
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from lexrag.errors import CsvInputError

__all__ = ["CsvInputError", "FileReport", "read_csv_rows"]

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class FileReport:
    file: str
    rows_read: int = 0
    written: int = 0
    duplicates: int = 0
    malformed: int = 0
    encoding_repaired: int = 0
    empty_text: int = 0
    examples: list[dict] = field(default_factory=list)
    max_examples: int = 20

    def note(self, kind: str, line: int, reason: str) -> None:
        if len(self.examples) < self.max_examples:
            self.examples.append({"kind": kind, "line": line, "reason": reason})

    def summary(self) -> str:
        return (
            f"{self.file}: {self.rows_read} rows read, {self.written} written, {self.duplicates} duplicates dropped, "
            f"{self.malformed} malformed dropped, {self.encoding_repaired} re-decoded from cp1252/latin-1, "
            f"{self.empty_text} with empty text (kept)"
        )


_SURROGATE = re.compile("[\udc80-\udcff]")


def _has_surrogates(s: str) -> bool:
    return _SURROGATE.search(s) is not None


def _redecode(s: str) -> str:
    raw = s.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def read_csv_rows(
    path: str | Path, required: tuple[str, ...], report: FileReport
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for every well-formed row of a CSV with a header.

    Raises :class:`CsvInputError` when the file is missing or lacks a required column; every other
    problem is counted in ``report`` and the row skipped (or repaired, for encodings).
    """
    path = Path(path)
    if not path.is_file():
        raise CsvInputError(f"{path}: file not found")
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")
        reader = csv.reader(text)
        try:
            header = next(reader)
        except StopIteration:
            raise CsvInputError(f"{path}: empty file, expected a header with {', '.join(required)}") from None
        header = [h.strip() for h in header]
        missing = [c for c in required if c not in header]
        if missing:
            raise CsvInputError(f"{path}: missing column(s) {', '.join(missing)}; header is {header}")
        pos = {h: i for i, h in enumerate(header)}
        while True:
            line = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                report.rows_read += 1
                report.malformed += 1
                report.note("malformed", line, f"csv error: {e}")
                continue
            report.rows_read += 1
            if len(fields) != len(header):
                report.malformed += 1
                report.note("malformed", line, f"expected {len(header)} fields, got {len(fields)}")
                continue
            if any(_has_surrogates(f) for f in fields):
                fields = [_redecode(f) if _has_surrogates(f) else f for f in fields]
                report.encoding_repaired += 1
                report.note("encoding", line, "not valid UTF-8; decoded as cp1252/latin-1")
            yield line, {h: fields[i] for h, i in pos.items()}
