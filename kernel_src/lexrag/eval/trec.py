"""TREC run and qrels files, so trec_eval, ir_measures or ranx can score a lexrag ranking and
lexrag can score or fuse rankings made elsewhere.

A run line is ``QUERY_ID Q0 DOCNO RANK SCORE TAG``, a qrels line ``QUERY_ID 0 DOCNO RELEVANCE``,
fields separated by whitespace.  A citation holds spaces (``Art. 11 Abs. 2 OR``), so its DOCNO is
the citation with ``%``, whitespace and control characters percent-encoded (``Art.%2011%20Abs.%202%20OR``):
:func:`decode_docno` (``urllib.parse.unquote``) gives the citation back.  Scores are written
strictly falling, so a tool that sorts by score (as trec_eval does) keeps lexrag's order."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Mapping, Sequence
from urllib.parse import unquote

from lexrag.errors import CsvInputError

__all__ = ["encode_docno", "decode_docno", "write_trec_run", "read_trec_run", "read_qrels", "trec_kind", "rrf_fuse"]

_ENCODE = re.compile(r"[%\s\x00-\x1f\x7f]")


def encode_docno(citation: str) -> str:
    """A citation as one whitespace-free field (percent-encoding ``%``, whitespace and controls)."""
    return _ENCODE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), citation)


def decode_docno(docno: str) -> str:
    """The citation a DOCNO of :func:`encode_docno` encodes."""
    return unquote(docno)


def write_trec_run(path: str | Path, rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str = "lexrag",
                   query_ids: Sequence[str] | None = None) -> int:
    """Write ``rankings`` (query id -> (citation, score) best first) as a TREC run; returns the
    lines written.  A score not below the one before is lowered just under it, so the written
    scores fall strictly and rank and score tell the same order."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r}: one word without whitespace")
    lines = []
    for qid in query_ids if query_ids is not None else list(rankings):
        if any(c.isspace() for c in qid):
            raise CsvInputError(f"query id {qid!r} holds whitespace, which a TREC run cannot carry: rename it")
        prev = math.inf
        for rank, (cit, score) in enumerate(rankings.get(qid, []), start=1):
            s = float(score)
            if not math.isfinite(s) or s >= prev:
                s = math.nextafter(prev, -math.inf) if math.isfinite(prev) else (s if math.isfinite(s) else 0.0)
            prev = s
            lines.append(f"{qid} Q0 {encode_docno(cit)} {rank} {s!r} {tag}\n")
    Path(path).write_text("".join(lines), encoding="utf-8")
    return len(lines)


def _lines(path: str | Path):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CsvInputError(f"{path}: not UTF-8 text (byte {e.start}); a TREC file is plain text") from None
    except OSError as e:
        raise CsvInputError(f"{path}: cannot be read ({e.strerror or e})") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield n, line.split()


def trec_kind(path: str | Path) -> str | None:
    """``"run"`` or ``"qrels"`` when the first line of ``path`` has a TREC file's shape, else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = next((ln.split() for ln in f if ln.strip()), [])
    except OSError:
        return None
    if len(first) == 6 and first[1] == "Q0":
        return "run"
    if len(first) == 4 and re.fullmatch(r"-?\d+", first[3]):
        return "qrels"
    return None


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """Query id -> (citation, score), best first: by score falling, ties by rank (a citation listed
    twice for a query keeps its first line).  A line of another shape is one error naming it."""
    rows: dict[str, list[tuple[float, int, str]]] = {}
    for n, f in _lines(path):
        if len(f) != 6:
            raise CsvInputError(f"{path}: line {n}: {len(f)} fields; a TREC run line is QUERY_ID Q0 DOCNO RANK SCORE TAG")
        try:
            rank, score = int(f[3]), float(f[4])
        except ValueError:
            raise CsvInputError(f"{path}: line {n}: rank {f[3]!r} or score {f[4]!r} is not a number") from None
        if not math.isfinite(score):
            raise CsvInputError(f"{path}: line {n}: score {f[4]} is not finite")
        rows.setdefault(f[0], []).append((-score, rank, decode_docno(f[2])))
    out = {}
    for qid, r in rows.items():
        seen: dict[str, float] = {}
        for neg, _, cit in sorted(r):
            seen.setdefault(cit, -neg)
        out[qid] = list(seen.items())
    return out


def read_qrels(path: str | Path) -> dict[str, list[str]]:
    """Query id -> its relevant citations (relevance above 0), in file order."""
    out: dict[str, list[str]] = {}
    for n, f in _lines(path):
        if len(f) != 4:
            raise CsvInputError(f"{path}: line {n}: {len(f)} fields; a qrels line is QUERY_ID 0 DOCNO RELEVANCE")
        try:
            rel = int(f[3])
        except ValueError:
            raise CsvInputError(f"{path}: line {n}: relevance {f[3]!r} is not a whole number") from None
        gold = out.setdefault(f[0], [])
        cit = decode_docno(f[2])
        if rel > 0 and cit not in gold:
            gold.append(cit)
    return out


def rrf_fuse(runs: Sequence[Mapping[str, Sequence[tuple[str, float]]]], weights: Sequence[float] | None = None,
             rrf_k: int = 60, depth: int | None = None) -> dict[str, list[tuple[str, float]]]:
    """Weighted reciprocal rank fusion of runs by the pipeline's own fusion
    (:func:`lexrag.stages.fusion.reciprocal_rank_fusion`, no boost): a citation scores the sum of
    ``weight / (rrf_k + rank)`` over the runs that hold it; best first."""
    from lexrag.ranking import Ranking
    from lexrag.stages.fusion import reciprocal_rank_fusion

    weights = list(weights) if weights is not None else [1.0] * len(runs)
    if len(weights) != len(runs):
        raise ValueError(f"{len(weights)} weights for {len(runs)} runs")
    ids: dict[str, int] = {}
    rankings = [Ranking(f"run{i}", f"run{i}", {q: [(ids.setdefault(c, len(ids)), s) for c, s in hits] for q, hits in r.items()})
                for i, r in enumerate(runs)]
    fused = reciprocal_rank_fusion(rankings, rrf_k=rrf_k, weights={r.signal: w for r, w in zip(rankings, weights)},
                                   depth=depth)
    names = list(ids)
    return {q: [(names[d], s) for d, s in hits] for q, hits in fused.hits.items()}
