"""Reading CSV inputs row by row: bounded memory, every problem counted and named by line."""

from __future__ import annotations

import csv
import io
import logging
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from lexrag.errors import CsvInputError

log = logging.getLogger(__name__)

__all__ = ["CsvInputError", "FileReport", "read_csv_rows", "check_input_file", "repair_text", "csv_text", "shown_header"]

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class FileReport:
    file: str
    lines: int = 0  # physical lines in the file (header included)
    lines_lost: int = 0  # physical lines inside records that were dropped as broken (unbalanced quotes)
    multiline: int = 0  # well-formed records with a quoted field over several lines (kept)
    suspect: int = 0  # of those, records holding lines that read like rows of their own (kept, named in examples)
    rows_read: int = 0
    written: int = 0
    duplicates: int = 0
    same_key: int = 0  # law rows whose citation an earlier row has, with other text (both kept, named in examples)
    citation_repaired: int = 0  # citations with odd spaces, a line break, a BOM or zero-width character inside (made plain)
    malformed: int = 0
    encoding_repaired: int = 0
    blank: int = 0  # blank lines skipped
    repeated_header: int = 0  # lines that repeat the header (files joined together): skipped, named in examples
    empty_text: int = 0
    examples: list[dict] = field(default_factory=list)
    max_examples: int = 20
    columns: list[str] = field(default_factory=list)  # the header as read (stripped)

    def note(self, kind: str, line: int, reason: str) -> None:
        if len(self.examples) < self.max_examples:
            self.examples.append({"kind": kind, "line": line, "reason": reason})

    def summary(self) -> str:
        return (
            f"{self.file}: {self.rows_read} rows read from {self.lines} lines, {self.written} written, "
            f"{self.duplicates} duplicates dropped, "
            f"{self.malformed} malformed dropped, {self.encoding_repaired} re-decoded from cp1252/latin-1, "
            f"{self.empty_text} with empty text (kept)" + (f", {self.lines_lost} lines inside broken records" if self.lines_lost else "")
            + (f", {self.multiline} records over several lines (kept)" if self.multiline else "")
            + (f", {self.suspect} of them hold lines that read like rows of their own (kept; see examples)" if self.suspect else "")
            + (f", {self.repeated_header} lines repeating the header skipped (see examples)" if self.repeated_header else "")
            + (f", {self.same_key} citations given again with other text (both kept; see examples)" if self.same_key else "")
            + (f", {self.citation_repaired} citations with odd spaces, line breaks or invisible characters made plain (see "
               "examples)" if self.citation_repaired else "")
        )


_SURROGATE = re.compile("[\udc80-\udcff]")


def _has_surrogates(s: str) -> bool:
    return _SURROGATE.search(s) is not None


def check_input_file(path: Path, what: str = "file") -> None:
    """Refuse, naming ``path``, what no reader here can read: a missing file, a folder, and text in
    UTF-16 or UTF-32 (a byte-order mark, or NUL bytes making up a quarter of the first 4 KB), which would otherwise
    surface as a header of stray characters or a decode error; and a first line holding a NUL byte (a binary file,
    or NUL-separated records such as ``/proc/self/environ``), whose content is never quoted."""
    if path.is_dir():
        raise CsvInputError(f"{path}: is a folder; give the {what} itself")
    if not path.exists():
        if path.is_symlink():  # a link whose target is missing, or a loop of links
            raise CsvInputError(f"{path}: a link that leads to no file (its target is missing, or a loop of links); "
                                f"give the {what} itself")
        raise CsvInputError(f"{path}: file not found")
    if not path.is_file():  # read twice (checked, then parsed), so a stream would arrive empty the second time
        raise CsvInputError(f"{path}: not a regular file (a device, pipe or socket, such as /dev/stdin or /dev/null); "
                            f"save the {what} to a file and give its path")
    with open(path, "rb") as f:
        head = f.read(4096)
    for magic, kind in ((b"\x1f\x8b", "gzip"), (b"PK\x03\x04", "zip"), (b"BZh", "bzip2"), (b"\xfd7zXZ", "xz")):
        if head.startswith(magic):
            raise CsvInputError(f"{path}: a {kind}-compressed file, not a UTF-8 CSV; unpack it and give the {what} itself")
    text = head.rstrip(b"\x00")
    if len(text) < len(head) and b"\x00" not in text and text.strip():  # text, then only NULs: a crash-padded or preallocated file
        raise CsvInputError(f"{path}: NUL bytes fill it from byte {len(text):,} on, after the text (a file a crash or a "
                            f"preallocating copy left padded); remove them (tr -d '\\000' < FILE > FIXED) and give the {what} again")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or head.count(b"\x00") > len(head) // 4:  # ASCII in UTF-16: every other byte
        raise CsvInputError(f"{path}: UTF-16/UTF-32 or binary, not UTF-8 text (a byte-order mark or NUL bytes between "
                            "the letters); save it as UTF-8")
    first = head.split(b"\n", 1)[0]
    if b"\x00" in first:  # no text file's header holds one; its content (an environment's variables) is not quoted
        raise CsvInputError(f"{path}: a NUL byte in its first line (byte {first.index(0):,}): a binary file or NUL-separated "
                            f"records, not a UTF-8 CSV; give the {what} itself")


def repair_text(s: str) -> tuple[str, bool]:
    """``s`` read with ``errors="surrogateescape"``: the bytes that were not UTF-8 decoded as
    cp1252 (or latin-1), and whether there were any."""
    return (_redecode(s), True) if _has_surrogates(s) else (s, False)


def _redecode(s: str) -> str:
    raw = s.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _shape(value: str) -> str:
    """The shape of an id-like value: digits -> 9, letters -> a, runs collapsed
    (``lexam_0001`` -> ``a_9``, ``Art. 41 OR`` -> ``a. 9 a``)."""
    s = re.sub(r"[0-9]+", "9", value.strip())
    return re.sub(r"[^\W\d_]+", "a", s)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what the csv module takes as a line end inside a quoted field


def _row_like_lines(fields: list[str], start: int, shapes: set[str], n_fields: int) -> list[int]:
    """Physical line numbers of the lines inside a record's fields that read as a whole further
    record: exactly ``n_fields`` CSV fields (the field's last line: 2 to ``n_fields``, cut where the
    stray quote closed), the first of a shape the well-formed rows' first column has (a
    distinctive shape: not digits alone) and none of them empty.  Such a line is what
    an unmatched quote leaves when it closes again further down; a line of prose that merely starts
    with a number or a citation and a comma does not read as a whole row."""
    out, line = [], start
    for f in fields:
        parts = _LINE_BREAK.split(f)[1:]
        for i, part in enumerate(parts):
            line += 1
            try:
                cells = next(csv.reader([part]))
            except (csv.Error, StopIteration):
                continue
            # the field's last line is cut where the stray quote closed: it may hold fewer fields
            whole = len(cells) == n_fields if i < len(parts) - 1 else 2 <= len(cells) <= n_fields
            if whole and all(c.strip() for c in cells):
                shape = _shape(cells[0])
                if shape in shapes and shape != "9":
                    out.append(line)
    return out


def read_csv_rows(
    path: str | Path, required: tuple[str, ...], report: FileReport, strict: bool = True, exact: tuple[str, ...] = ()
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for every well-formed row of a CSV with a header.

    What Python's CSV parser reads as a record of the header's width is a row, a quoted field over
    several lines included (``multiline``).  Raises :class:`CsvInputError` when the file is missing
    or lacks a required column.  A record the parser cannot close (an unmatched quote: it runs on
    into the following lines) and a record over several lines of the wrong width (an unmatched
    quote that closed again further down) swallow other rows: with ``strict`` (the default) that
    is a :class:`CsvInputError` naming the lines, so no row is lost silently; without it the
    record is dropped and counted with the lines it covered (``lines_lost``).  A well-formed record
    over several lines that holds lines reading like whole further rows is kept as the parser
    reads it, counted (``suspect``), named in the examples and logged, so a quote that swallowed
    rows yet closed at the right width is visible.  A one-line row with the wrong number of fields
    is dropped and counted; text that is not UTF-8 is re-decoded and counted, except in the
    ``exact`` columns (ids copied byte for byte into an output): there it is a :class:`CsvInputError`
    naming the line.  ``report.lines`` counts the file's physical lines.
    """
    path = Path(path)
    check_input_file(path, "CSV file")
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")
        reader = csv.reader(text, strict=True)
        header: list[str] = []
        while not header or header == [""]:  # blank lines before the header are skipped, as pandas does
            try:
                header = next(reader)
            except StopIteration:
                raise CsvInputError(f"{path}: empty file, expected a header with {', '.join(required)}") from None
            except csv.Error as e:
                raise CsvInputError(f"{path}: line {reader.line_num}: the header is not valid CSV ({e})") from None
        header_line = reader.line_num
        header = [h.strip() for h in header]
        report.columns = header
        shown = shown_header(header)
        missing = [c for c in required if c not in header]
        if missing:
            raise CsvInputError(f"{path}: missing column(s) {', '.join(missing)}; header is {shown}")
        counts = Counter(header)  # linear: a header of 200,000 columns is read in milliseconds
        twice = sorted(h for h, n in counts.items() if h and n > 1)
        if twice:  # which of the two is meant? reading either would mix up the columns silently
            raise CsvInputError(f"{path}: line {header_line}: column(s) {_cut(', '.join(twice), 120)} appear more than once in "
                                f"the header {shown}")
        pos = {h: i for i, h in enumerate(header)}
        shapes: set[str] = set()

        def broken(first: int, last: int, reason: str) -> None:
            report.malformed += 1
            report.lines_lost += last - first + 1
            report.note("malformed", first, f"lines {first}-{last}: {reason}")
            if strict:
                raise CsvInputError(f"{path}: lines {first}-{last}: {reason}; fix the quoting of line {first} "
                                    f"(a field that starts with \" must end with \" before the next comma or line end)")

        while True:
            line = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                report.rows_read += 1
                broken(line, max(reader.line_num, line), f"one record that the CSV parser cannot close ({e}): "
                       "probably an unmatched quote, which swallows the rows after it")
                continue
            if not fields or fields == [""]:  # a blank line (e.g. trailing newlines): not a row, not an error
                report.blank += 1
                continue
            report.rows_read += 1
            last = reader.line_num
            rowlike = _row_like_lines(fields, line, shapes, len(header)) if last > line and shapes else []
            seen = f" (line {', '.join(map(str, rowlike[:5]))}{'...' if len(rowlike) > 5 else ''})" if rowlike else ""
            if len(fields) != len(header):
                if last > line:
                    broken(line, last, f"one record of {len(fields)} fields (expected {len(header)}) over {last - line + 1} lines"
                           + (f", {len(rowlike)} of them look like further rows{seen}" if rowlike else "")
                           + ": probably an unmatched quote (or a comma too many or too few in a quoted record)")
                    continue
                report.malformed += 1
                report.note("malformed", line, f"expected {len(header)} fields, got {len(fields)}")
                continue
            if [f.strip().lstrip("\ufeff").strip() for f in fields] == header:  # a second file's header, joined on
                report.repeated_header += 1
                report.note("header", line, f"line {line} repeats the header (files joined together?): skipped")
                continue
            if last > line:
                report.multiline += 1
                if rowlike:
                    report.suspect += 1
                    why = (f"lines {line}-{last}: one record over {last - line + 1} lines holds {len(rowlike)} line(s) that read "
                           f"like further rows{seen}; kept as CSV reads it (if they are rows, a quote on line {line} is unmatched)")
                    report.note("suspect", line, why)
                    if report.suspect <= 5:
                        log.warning("%s: %s", path, why)
            if last == line and fields[0].strip():
                shapes.add(_shape(fields[0]))
            repaired = [repair_text(f) for f in fields]
            bad = next((h for h in exact if h in pos and repaired[pos[h]][1]), None)
            if bad is not None:  # re-decoded, the id would reach the output as other bytes than the file's
                raw_id = fields[pos[bad]].encode("utf-8", "surrogateescape")
                raise CsvInputError(f"{path}: line {line}: {bad} {_cut(repr(raw_id), 80)} holds bytes that are not UTF-8; "
                                    "re-decoded, it would reach the output as other bytes (ids are matched exactly): save "
                                    "the file as UTF-8")
            if any(r for _, r in repaired):
                fields = [f for f, _ in repaired]
                report.encoding_repaired += 1
                report.note("encoding", line, "not valid UTF-8; decoded as cp1252/latin-1")
            yield line, {h: fields[i] for h, i in pos.items()}
        report.lines = reader.line_num


def shown_header(header: list[str]) -> str:
    """A header for an error line: at most 6 columns of at most 24 characters each, control
    characters escaped, never the whole of a file's first line (it may be a secret's line)."""
    cols = [h if len(h) <= 24 else h[:21] + "..." for h in header[:6]]
    return _cut(repr(cols if len(header) <= 6 else [*cols, f"... ({len(header)} columns)"]), 240)


def _cut(text: str, width: int = 400) -> str:
    """``text`` as it is, or its first ``width`` characters and "..." (an error line stays one line)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def csv_text(rows: list[dict], fields: list[str] | None = None) -> str:
    """``rows`` as CSV text with a header (``fields``, or the first row's keys), for a whole-file writer."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields if fields is not None else list(rows[0]) if rows else [])
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
