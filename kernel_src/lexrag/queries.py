"""Query and gold files: ``query_id,query[,gold_citations]`` CSVs, checked row by row."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from lexrag.csvio import CsvInputError, FileReport, read_csv_rows

__all__ = ["Query", "QueryFileError", "load_queries", "load_gold"]


class QueryFileError(CsvInputError):
    """A query or gold file with rows that cannot be used; the message names file and lines."""


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str


def _rows(path: str | Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    report = FileReport(file=str(path), max_examples=10)
    rows = list(read_csv_rows(path, required, report))
    if report.malformed:
        bad = "; ".join(f"line {e['line']}: {e['reason']}" for e in report.examples if e["kind"] == "malformed")
        raise QueryFileError(f"{path}: {report.malformed} malformed row(s): {bad}")
    if report.encoding_repaired:
        lines = ", ".join(str(e["line"]) for e in report.examples if e["kind"] == "encoding")
        warnings.warn(f"{path}: {report.encoding_repaired} row(s) not UTF-8 (lines {lines}); decoded as cp1252/latin-1")
    seen: dict[str, int] = {}
    for line, row in rows:
        qid = row["query_id"].strip()
        if not qid:
            raise QueryFileError(f"{path}: line {line}: empty query_id")
        if qid in seen:
            raise QueryFileError(f"{path}: line {line}: query_id {qid!r} repeats line {seen[qid]}")
        seen[qid] = line
    return rows


def load_queries(path: str | Path, max_chars: int = 20_000) -> list[Query]:
    """Queries in file order.  An empty query is kept (it gets an empty prediction) with a
    warning; a query longer than ``max_chars`` is truncated with a warning naming it."""
    out = []
    for line, row in _rows(path, ("query_id", "query")):
        qid, text = row["query_id"].strip(), row["query"].strip()
        if not text:
            warnings.warn(f"{path}: line {line}: query {qid!r} is empty; it will get an empty prediction")
        elif len(text) > max_chars:
            warnings.warn(f"{path}: line {line}: query {qid!r} has {len(text)} characters; truncated to {max_chars}")
            text = text[:max_chars]
        out.append(Query(qid, text))
    return out


def load_gold(path: str | Path) -> dict[str, list[str]]:
    """``query_id -> gold citations`` (``;``-separated in the file, blanks dropped)."""
    return {
        row["query_id"].strip(): [c.strip() for c in row["gold_citations"].split(";") if c.strip()]
        for _, row in _rows(path, ("query_id", "gold_citations"))
    }
