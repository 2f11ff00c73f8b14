"""The references the citation graph (:mod:`lexrag.index.graph`) is built from, found in the court
texts of the corpus by worker processes, one parquet row group at a time.  Each row group's
references come back as arrays of local ids plus the strings they stand for, in order of first
mention, so the caller numbers the nodes exactly as one pass in document order would."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import warnings
from array import array
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lexrag import citations as cit

__all__ = ["row_group_references"]

# the state of the process that searches, set by _init_worker before its first row group
_codes: frozenset[str] | None = None
_aliases: dict[str, str] = {}
_folder: Path | None = None
_memo: dict = {}  # citation -> (parent name, kind, lookup key or None): authorities are cited again and again


def _init_worker(folder: Path, codes: frozenset[str] | None, aliases: dict[str, str]) -> None:
    global _folder, _codes, _aliases
    _folder, _codes, _aliases = Path(folder), codes, aliases
    _memo.clear()


def _group_references(task: tuple[int, int]) -> tuple:
    """References of the court documents of one row group of the corpus: ``(docs, targets,
    keys, target_names, key_strings, n)``.  ``docs``: the citing document of each reference;
    ``targets``: its cited parent, an index into ``target_names`` ((name, kind) pairs in order of
    first mention); ``keys``: the lookup key of a cited law paragraph or consideration, an index
    into ``key_strings``, -1 for a decision cited as a whole."""
    from lexrag.index.corpus import CORPUS_FILE

    group, first = task
    table = pq.ParquetFile(_folder / CORPUS_FILE).read_row_group(group, columns=["text", "source"])
    texts, sources = table.column(0).to_pylist(), table.column(1).to_pylist()
    del table
    pa.default_memory_pool().release_unused()
    target_id: dict[tuple[str, str], int] = {}
    key_id: dict[str, int] = {}
    docs, targets, keys = array("i"), array("i"), array("i")
    memo, aliases = _memo, _aliases
    if len(memo) > 2_000_000:
        memo.clear()
    for j, (text, source) in enumerate(zip(texts, sources)):
        if source == "law" or not text:
            continue
        for e in cit.extract(text, _codes):
            got = memo.get(e.citation)
            if got is None:
                c = e.citation
                if isinstance(c, cit.LawCitation) and c.code in aliases:  # CitationIndex.canonical
                    c = cit.LawCitation(c.article, aliases[c.code], c.paragraph)
                got = memo[e.citation] = (c.parent().format(), c.kind,
                                          c.key() if c.kind == "law" or c.consideration else None)
            name, kind, key = got
            t = target_id.get((name, kind))
            if t is None:
                t = target_id[(name, kind)] = len(target_id)
            docs.append(first + j)
            targets.append(t)
            if key is None:
                keys.append(-1)
            else:
                k = key_id.get(key)
                if k is None:
                    k = key_id[key] = len(key_id)
                keys.append(k)
    as_np = lambda a: np.frombuffer(a, dtype=np.int32) if len(a) else np.empty(0, np.int32)  # noqa: E731
    return as_np(docs), as_np(targets), as_np(keys), list(target_id), list(key_id), len(docs)


def _workers(requested: int) -> int:
    if requested > 0:
        return requested
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))



@contextmanager
def row_group_references(folder: Path, tasks: Sequence[tuple[int, int]], codes: frozenset[str] | None,
                         aliases: dict[str, str], workers: int = 0) -> Iterator[Iterable[tuple]]:
    """The references of each row group of ``tasks`` ((row group, its first document) pairs of the
    corpus in ``folder``), in the order of ``tasks``, as :func:`_group_references` returns them;
    ``codes`` and ``aliases`` are the law codes the search knows and their other names.  Searched by
    ``workers`` processes (0: one per core, at most 8), or in this one where a single process is
    asked for or fork is not available; the processes end with the ``with`` block."""
    n_workers = min(_workers(workers), max(len(tasks), 1))
    if n_workers <= 1 or "fork" not in mp.get_all_start_methods():
        _init_worker(folder, codes, aliases)
        yield map(_group_references, tasks)
        return
    # fork, not spawn: spawn runs the caller's main module again (``python -m lexrag`` has no
    # main guard); the frozen objects are left alone by the children's garbage collector, so
    # the corpus's millions of strings stay shared pages
    gc.freeze()
    try:
        with warnings.catch_warnings():  # Python 3.12 warns of forking a threaded process; the
            warnings.simplefilter("ignore", DeprecationWarning)  # workers take no lock the parent's threads hold
            pool = mp.get_context("fork").Pool(n_workers, _init_worker, (folder, codes, aliases))
    finally:
        gc.unfreeze()
    try:
        yield pool.imap(_group_references, tasks)
    finally:
        pool.terminate()
