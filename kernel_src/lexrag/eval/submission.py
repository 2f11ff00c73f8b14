"""Writing and validating ``submission.csv`` (``query_id,predicted_citations``)."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Collection, Mapping, Sequence

from lexrag.io.outputs import replace_text
from lexrag.io.csvio import CsvInputError, FileReport, read_csv_rows, shown_header
from lexrag.queries import listed_with_commas

__all__ = ["MAX_CITATIONS", "MAX_CHARS", "write_submission", "validate_submission", "read_submission"]

log = logging.getLogger(__name__)

HEADER = ["query_id", "predicted_citations"]
MAX_CITATIONS = 200
MAX_CHARS = 10_000


def _fit(cits: Sequence[str]) -> tuple[str, int, int]:
    """Join with ';' keeping the first citations that fit the competition's row limits; with how
    many distinct citations there were and how many were kept."""
    cits = list(dict.fromkeys(x.strip() for x in cits if x.strip()))
    out: list[str] = []
    size = 0
    for c in cits:
        add = len(c) + (1 if out else 0)
        if len(out) >= MAX_CITATIONS or size + add > MAX_CHARS:
            break
        out.append(c)
        size += add
    return ";".join(out), len(cits), len(out)


def write_submission(path: str | Path, predictions: Mapping[str, Sequence[str]], query_ids: Sequence[str]) -> Path:
    """One row per query id in ``query_ids`` order (missing -> empty), within the competition's row
    limits (:data:`MAX_CITATIONS` citations, :data:`MAX_CHARS` characters): a row cut to fit is
    named in a warning with how many citations it had and kept."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(HEADER)
    cut = []
    for qid in query_ids:
        row, total, kept = _fit(predictions.get(qid, []))
        w.writerow([qid, row])
        if kept < total:
            cut.append(f"{qid} {total} -> {kept}")
    replace_text(path, buf.getvalue())  # whole or not at all, the old file's mode kept
    if cut:
        log.warning("%s: %d row(s) cut to the competition's limits of %d citations and %d characters a row, the "
                    "rest of their ranking left out: %s%s", path, len(cut), MAX_CITATIONS, MAX_CHARS,
                    ", ".join(cut[:10]), " ..." if len(cut) > 10 else "")
    return path


def read_submission(path: str | Path) -> dict[str, list[str]]:
    """``query_id -> citations``.  A row that is not a row (wrong field count, broken quoting), a
    query id with spaces around it (Kaggle matches ids exactly) and a query id that appears twice
    are a :class:`CsvInputError` naming the lines: scoring never picks one row silently."""
    report = FileReport(file=str(path), max_examples=20)
    out: dict[str, list[str]] = {}
    first: dict[str, int] = {}
    problems: list[str] = []
    commas: list[int] = []
    for line, row in read_csv_rows(path, tuple(HEADER), report):
        raw = row["query_id"]
        qid = raw.strip()
        if raw != qid:
            problems.append(f"line {line}: query id {raw!r} has spaces around it")
        if qid in first:
            problems.append(f"line {line}: query {qid!r} appears again (first on line {first[qid]})")
            continue
        first[qid] = line
        out[qid] = [c.strip() for c in row["predicted_citations"].split(";") if c.strip()]
        if listed_with_commas(out[qid]):
            commas.append(line)
    problems = [f"line {e['line']}: {e['reason']}" for e in report.examples if e["kind"] == "malformed"] + problems
    if problems:
        raise CsvInputError(f"{path}: {len(problems)} problem(s): " + "; ".join(problems[:10]))
    others = [c for c in report.columns if c not in HEADER]
    if others:  # scored from its two columns; Kaggle's format has only those (validate-submission refuses the file)
        log.warning("%s: column(s) %s besides %s are not read; a submission has only those two (check it with "
                    "validate-submission)", path, ", ".join(repr(c) for c in others[:5]), ",".join(HEADER))
    if commas:  # scored as read: one citation that nothing matches
        log.warning("%s: %d row(s) look like citations listed with commas (lines %s); citations are separated by ';': "
                    "those rows score 0 as written", path, len(commas), ", ".join(map(str, commas[:10])))
    if report.encoding_repaired:  # scored as read, but Kaggle reads UTF-8 and would see other characters
        lines = [e["line"] for e in report.examples if e["kind"] == "encoding"][:5]
        log.warning("%s: %d row(s) are not UTF-8 and were read as cp1252/latin-1 (lines %s); Kaggle reads UTF-8, so "
                    "save the file as UTF-8 before submitting it", path, report.encoding_repaired,
                    ", ".join(map(str, lines)) or "?")
    return out


def corpus_forms(corpus_citations: Collection[str]) -> set[str]:
    """The citation strings a submission may hold: the corpus's keys, and each law paragraph's whole
    article ("Art. 41 OR" for "Art. 41 Abs. 1 OR"), which ``count.whole_articles`` emits."""
    from lexrag.citations import parent

    keys = {" ".join(c.split()) for c in corpus_citations}
    return keys | {parent(c) for c in keys if c.startswith("Art")}


def outside_corpus(corpus, citations) -> list[str]:
    """The ``citations`` no run can emit over ``corpus``: neither a corpus key (``corpus.lacks``) nor a
    law paragraph's whole article (:func:`corpus_forms`)."""
    from lexrag.citations import normalize_key

    children = corpus.index.children  # a law article -> its paragraphs in the corpus
    return [c for c in corpus.lacks(citations) if not (c.startswith("Art") and children.get(normalize_key(c)))]


def validate_submission(
    path: str | Path, query_ids: Sequence[str], corpus_citations: Collection[str] | None = None
) -> list[str]:
    """Every problem with a submission file, each naming the line or query; empty when valid.

    Checks: readable UTF-8 CSV; header exactly ``query_id,predicted_citations``; the right field
    count on every row; every expected query exactly once and no unknown ones; at most 200
    citations and 10,000 characters per row; every citation a corpus string or a law paragraph's
    whole article (when ``corpus_citations`` is given: :func:`corpus_forms`).
    """
    path = Path(path)
    problems: list[str] = []
    if path.is_dir():
        return [f"{path}: is a folder; give the submission file itself (submission.csv)"]
    if not path.exists():
        return [f"{path}: file not found"]
    if not path.is_file():
        return [f"{path}: not a regular file (a device, pipe or socket); give the submission file itself"]
    try:
        with open(path, encoding="utf-8", newline="") as f:
            header = next(csv.reader(f), None)
    except UnicodeDecodeError as e:
        return [f"{path}: not UTF-8 ({e})"]
    if header is None:
        return [f"{path}: empty file, expected header {','.join(HEADER)}"]
    if any("\x00" in h for h in header):  # binary, or NUL-separated records (/proc/self/environ): never quoted
        return [f"{path}: a NUL byte in its first line: a binary file or NUL-separated records, not a CSV; give the "
                "submission file itself"]
    if [h.strip().lstrip("\ufeff") for h in header] != HEADER:
        problems.append(f"{path}: header is {shown_header(header)}, expected {HEADER}")
        return problems
    report = FileReport(file=str(path), max_examples=10_000)
    seen: dict[str, int] = {}
    expected = set(query_ids)
    known = corpus_forms(corpus_citations) if corpus_citations is not None else None
    try:
        rows = list(read_csv_rows(path, tuple(HEADER), report))
    except CsvInputError as e:
        return [str(e)]
    for ex in report.examples:
        problems.append(f"{path}: line {ex['line']}: {ex['reason']}")
    for line, row in rows:
        qid, cell = row["query_id"].strip(), row["predicted_citations"]
        if row["query_id"] != qid:
            problems.append(f"{path}: line {line}: query id {row['query_id']!r} has spaces around it (Kaggle matches ids exactly)")
        if qid in seen:
            problems.append(f"{path}: line {line}: query {qid!r} appears again (first on line {seen[qid]})")
            continue
        seen[qid] = line
        if qid not in expected:
            problems.append(f"{path}: line {line}: query {qid!r} is not in the queries file")
        cits = [c.strip() for c in cell.split(";") if c.strip()]
        odd = [c for c in cits if any(ch.isspace() and ch != " " for ch in c)]
        if odd:  # Kaggle compares exact strings: "Art.\xa041 OR" is not "Art. 41 OR"
            problems.append(f"{path}: line {line}: query {qid!r}: citation {odd[0][:60]!r} holds a no-break space, a tab or a "
                            "line break; the competition's citations hold plain spaces only")
        if listed_with_commas(cits):
            problems.append(f"{path}: line {line}: query {qid!r}: citations listed with commas ({cell[:60]!r}); separate "
                            "them with ';' (Kaggle reads the cell as one citation)")
        if len(cits) > MAX_CITATIONS:
            problems.append(f"{path}: line {line}: query {qid!r} has {len(cits)} citations (max {MAX_CITATIONS})")
        if len(cell) > MAX_CHARS:
            problems.append(f"{path}: line {line}: query {qid!r} has {len(cell)} characters (max {MAX_CHARS})")
        if known is not None:
            unknown = [c for c in cits if " ".join(c.split()) not in known]
            if unknown:
                problems.append(
                    f"{path}: line {line}: query {qid!r} has {len(unknown)} citation(s) not in the corpus, e.g. {unknown[:3]}"
                )
    for qid in query_ids:
        if qid not in seen:
            problems.append(f"{path}: query {qid!r} is missing")
    return problems
