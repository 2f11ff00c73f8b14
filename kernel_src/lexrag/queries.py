"""Query and gold files: ``query_id,query[,gold_citations]`` CSVs, checked row by row."""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from lexrag.citations import normalize_text
from lexrag.io.csvio import CsvInputError, FileReport, read_csv_rows

__all__ = ["Query", "QueryState", "Variant", "QueryFileError", "load_queries", "load_gold"]

log = logging.getLogger(__name__)


class QueryFileError(CsvInputError):
    """A query or gold file with rows that cannot be used; the message names file and lines."""


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str


@dataclass(frozen=True)
class Variant:
    """One text of a query: the question as written, or what a rewrite made of it."""

    name: str
    text: str
    origin: str  # "input", or the stage/template that wrote it (e.g. "llm:translate@v1")


@dataclass
class QueryState:
    """A query as it moves through the pipeline: the original text plus named variants (each
    with its origin, earlier texts never overwritten), what the LLM extracted (``concepts``),
    citation strings an LLM named (resolved onto the corpus by the seeds stage, never emitted
    as such), per-stage cost, and the agentic loop's trace (one record per round)."""

    query_id: str
    text: str
    variants: dict[str, Variant] = field(default_factory=dict)
    concepts: dict = field(default_factory=dict)
    llm_citations: list[str] = field(default_factory=list)
    cost: dict[str, dict[str, float]] = field(default_factory=dict)
    trace: list[dict] = field(default_factory=list)  # one record per agentic-loop round

    def __post_init__(self) -> None:
        if self.text and "query" not in self.variants:
            self.variants["query"] = Variant("query", self.text, "input")

    @classmethod
    def of(cls, q: "Query | QueryState") -> "QueryState":
        return q if isinstance(q, QueryState) else cls(q.query_id, q.text)

    def add_variant(self, name: str, text: str, origin: str) -> None:
        """Add a variant; an empty text is ignored and an existing variant is kept (the first
        writer wins, so a variant always says truthfully where it came from)."""
        text = (text or "").strip()
        if text and name not in self.variants:
            self.variants[name] = Variant(name, text, origin)

    def variant(self, name: str) -> str | None:
        v = self.variants.get(name)
        return v.text if v else None

    def preferred_text(self, variants) -> str:
        """The first of ``variants`` this query has, else its own text (``query.preference_variants``:
        the German translation before the English question, since German text is found by German words)."""
        for name in variants:
            t = self.variant(name)
            if t:
                return t
        return self.text

    def add_cost(self, stage: str, **amounts: float) -> None:
        acc = self.cost.setdefault(stage, {})
        for k, v in amounts.items():
            acc[k] = acc.get(k, 0.0) + float(v)


_SAID: set[tuple[str, int, int]] = set()  # (file, rows, lines) already logged in this process


def _rows(path: str | Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    report = FileReport(file=str(path), max_examples=10)
    rows = list(read_csv_rows(path, required, report, exact=("query_id",)))  # an id is copied into the submission as is
    if report.malformed:
        bad = "; ".join(f"line {e['line']}: {e['reason']}" for e in report.examples if e["kind"] == "malformed")
        raise QueryFileError(f"{path}: {report.malformed} malformed row(s): {bad}")
    said = (str(path), len(rows), report.lines)
    if said not in _SAID:  # the queries and their gold are read from one file: said once
        _SAID.add(said)
        log.info("%s: %d rows from %d lines", path, len(rows), report.lines)
    if report.repeated_header:
        lines = ", ".join(str(e["line"]) for e in report.examples if e["kind"] == "header")
        warnings.warn(f"{path}: line(s) {lines} repeat the header (files joined together?); skipped, not read as questions")
    if report.encoding_repaired:
        lines = ", ".join(str(e["line"]) for e in report.examples if e["kind"] == "encoding")
        warnings.warn(f"{path}: {report.encoding_repaired} row(s) not UTF-8 (lines {lines}); decoded as cp1252/latin-1")
    seen: dict[str, int] = {}
    for line, row in rows:
        qid = row["query_id"].strip()
        if not qid:
            raise QueryFileError(f"{path}: line {line}: empty query_id")
        if qid != row["query_id"]:  # trimmed, the submission would name another id: Kaggle matches ids exactly
            raise QueryFileError(f"{path}: line {line}: query_id {row['query_id'][:80]!r} has spaces around it; Kaggle "
                                 "matches ids exactly, so a trimmed id would not match: remove the spaces in the file")
        if "\ufeff" in qid:  # a file's byte-order mark inside the rows: two files joined with `cat`
            raise QueryFileError(f"{path}: line {line}: query_id {qid[:60]!r} holds a byte-order mark (U+FEFF; files joined "
                                 "with cat?); the submission would name an id Kaggle does not have: remove it in the file")
        if any(ord(c) < 32 or ord(c) == 127 for c in qid):
            raise QueryFileError(f"{path}: line {line}: query_id {qid!r} holds a control character; it would be copied "
                                 "into the submission")
        if qid in seen:
            raise QueryFileError(f"{path}: line {line}: query_id {qid[:60]!r}{'...' if len(qid) > 60 else ''} repeats line "
                                     f"{seen[qid]}")
        seen[qid] = line
    return rows


def load_queries(path: str | Path, max_chars: int = 20_000) -> list[Query]:
    """Queries in file order.  An empty query is kept (it gets an empty prediction) with a
    warning; a query longer than ``max_chars`` is truncated with a warning naming it."""
    out = []
    rows = _rows(path, ("query_id", "query"))
    if not rows:
        raise QueryFileError(f"{path}: no rows below the header; nothing to answer")
    for line, row in rows:
        qid, text = row["query_id"].strip(), normalize_text(row["query"]).strip()
        if not text:
            warnings.warn(f"{path}: line {line}: query {qid!r} is empty; it will get an empty prediction")
        elif len(text) > max_chars:
            warnings.warn(f"{path}: line {line}: query {qid!r} has {len(text)} characters; truncated to {max_chars}")
            text = text[:max_chars]
        out.append(Query(qid, text))
    return out


# a second citation after a comma inside one gold entry ("Art. 1 OR, Art. 2 OR", "..., BGE 145 II 32")
_LISTED_WITH_COMMA = re.compile(r",\s*(?:Art\.|BGE\s|\d[A-Z]_\d)")


def listed_with_commas(citations: list[str]) -> bool:
    """Whether one of ``citations`` is several listed with commas ("Art. 1 OR, Art. 2 OR"): read as
    one citation, which nothing matches (citations are separated by ``;``)."""
    return any(_LISTED_WITH_COMMA.search(c) for c in citations)


def load_gold(path: str | Path) -> dict[str, list[str]]:
    """``query_id -> gold citations`` (``;``-separated in the file, blanks dropped).  A row whose
    gold cell is empty has no gold: it is left out (with a warning naming its lines), so every
    score, fit and fold counts the same queries."""
    out, blank, commas = {}, [], []
    for line, row in _rows(path, ("query_id", "gold_citations")):
        cits = [c.strip() for c in row["gold_citations"].split(";") if c.strip()]
        if listed_with_commas(cits):
            commas.append(line)
        if cits:
            out[row["query_id"].strip()] = cits
        else:
            blank.append(line)
    if commas:  # "Art. 1 OR, Art. 2 OR" is read as one citation that nothing can match
        warnings.warn(f"{path}: {len(commas)} gold cell(s) look like citations listed with commas (lines "
                      f"{', '.join(map(str, commas[:10]))}); citations are separated by ';': fix the file, or they score 0")
    if blank:
        warnings.warn(f"{path}: {len(blank)} row(s) without gold citations (lines {', '.join(map(str, blank[:10]))}"
                      f"{'...' if len(blank) > 10 else ''}) are left out (not scored, not learned from)")
    return out
