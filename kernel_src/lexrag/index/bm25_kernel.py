"""The BM25 query kernel: a query's weighted postings summed into a score vector, and the best
``k`` among the documents it touched.

The index is bm25s's CSC layout (``data``: float32 BM25 contributions, ``indices``: int32 doc ids,
``indptr``: one span per term).  A query is a few term ids with weights; its score vector is the
sum of their weighted columns, accumulated in float32 in term order as bm25s does, so the scores
are the same bits whichever backend adds them:

- ``numba`` (when installed; Kaggle's image carries it): one compiled loop over the postings that
  also lists the documents it touches, and a k-heap over those, so a short query never scans
  every document; :func:`top_k_many` runs a batch of queries on several threads in one call.
- ``numpy`` (the fallback): ``np.add.at`` over the concatenated postings, then a partition of
  the positive scores.

``LEXRAG_BM25_BACKEND=numpy`` forces the fallback; both take ``backend=`` (tests compare them).
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from lexrag.ranking import best_first

__all__ = ["BACKEND", "accumulate", "top_k", "top_k_many", "idf_of"]

_ASKED = os.environ.get("LEXRAG_BM25_BACKEND", "").strip().lower()
if _ASKED not in ("", "numba", "numpy"):
    logging.getLogger(__name__).warning("LEXRAG_BM25_BACKEND=%r is neither numba nor numpy: ignored (the default is used; "
                                        "the scores are the same either way)", _ASKED[:40])
try:  # optional: the numpy path gives the same scores, slower
    if _ASKED == "numpy":
        raise ImportError("numpy backend asked for")
    import numba
except ImportError:
    numba = None
except ValueError as _e:  # numba refuses its environment at import (NUMBA_NUM_THREADS=0): said, then numpy
    logging.getLogger(__name__).warning("numba cannot start (%s; check the NUMBA_* environment variables): BM25 runs on "
                                        "numpy, with the same scores, slower", str(_e).splitlines()[0][:120])
    numba = None
except OSError as _e:  # llvmlite cannot load its library (a memory limit such as ulimit -v, a broken install): said, then numpy
    logging.getLogger(__name__).warning("numba cannot load its compiler library (%s): BM25 runs on numpy, with the same "
                                        "scores, slower", str(_e).splitlines()[0][:120])
    numba = None

BACKEND = "numba" if numba is not None else "numpy"
# a query with more postings than documents / LONG_FACTOR is summed without listing the documents it
# touches (most of them), and its top k found by a scan of every score
LONG_FACTOR = 4
# one score in SAMPLE is read first to find a score the top k cannot be below (see _floor)
SAMPLE = 16
BLOCK = 512  # scores read in one run when sampling a score vector
RUN = 64  # scores the scan over every document counts before it decides to look closer
STEPS = 12  # bisection steps towards the bar of a long query (a 4096th of the top score)


def _compiled(f=None, parallel: bool = False):
    """``f`` compiled without the GIL, cached on disk where numba finds a writable place (beside
    the module or in the user's cache folder); compiled afresh in each process where it does not."""
    if f is None:
        return lambda g: _compiled(g, parallel)
    try:
        return numba.njit(nogil=True, parallel=parallel, cache=True)(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True, parallel=parallel)(f)


if numba is not None:

    @_compiled
    def _accumulate_nb(data, indices, starts, ends, weights, scores, touched):  # pragma: no cover - compiled
        # branch-free: every posting writes its document at touched[n]; n moves on only at a
        # document's first posting (scores only grow from 0, so each is listed once)
        n = 0
        for t in range(starts.shape[0]):
            w = weights[t]
            for p in range(starts[t], ends[t]):
                d = indices[p]
                before = scores[d]
                touched[n] = d
                n += before == 0
                scores[d] = before + data[p] * w  # x * 1.0f is x: the same bits as numpy's unweighted sum
        return n

    @_compiled
    def _scatter_nb(data, indices, starts, ends, weights, scores):  # pragma: no cover - compiled
        # a long query touches most documents: listing them costs more than scanning every score after
        for t in range(starts.shape[0]):
            w = weights[t]
            for p in range(starts[t], ends[t]):
                scores[indices[p]] += data[p] * w

    @numba.njit(inline="always")
    def _worse(s1, d1, s2, d2):  # pragma: no cover - compiled
        return s1 < s2 or (s1 == s2 and d1 > d2)

    @numba.njit(inline="always")
    def _sift_down(hs, hd, size, s, d):  # pragma: no cover - compiled
        """Put (s, d) at the root of the heap's first ``size`` items and sift it down to its place."""
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and _worse(hs[c + 1], hd[c + 1], hs[c], hd[c]):
                c += 1
            if not _worse(hs[c], hd[c], s, d):
                break
            hs[i] = hs[c]
            hd[i] = hd[c]
            i = c
        hs[i] = s
        hd[i] = d

    @numba.njit(inline="always")
    def _offer(hs, hd, m, k, s, d):  # pragma: no cover - compiled
        """Offer (s, d) to the k-heap (hs, hd) of m items whose root is the worst; returns m."""
        if m == k:
            if _worse(hs[0], hd[0], s, d):
                _sift_down(hs, hd, m, s, d)  # the new item replaces the worst
            return m
        i = m
        while i > 0:  # a new leaf, sifted up
            parent = (i - 1) // 2
            if not _worse(s, d, hs[parent], hd[parent]):
                break
            hs[i] = hs[parent]
            hd[i] = hd[parent]
            i = parent
        hs[i] = s
        hd[i] = d
        return m + 1

    @numba.njit(inline="always")
    def _is_long(postings, n_docs):  # pragma: no cover - compiled
        return postings * LONG_FACTOR > n_docs

    @numba.njit(inline="always")
    def _floor(scores, k, run):  # pragma: no cover - compiled
        """A score no top-k member is below, from a sample of ``scores``: the first ``run`` of every
        ``run * SAMPLE`` (read in runs, as the memory delivers them).  The lower edge of the
        histogram bin that holds the sample's k-th largest is at most that score, which is at most
        the whole's k-th largest.  0 where the sample has fewer than k positive scores."""
        n = scores.shape[0]
        hi = np.float32(0.0)
        for a in range(0, n, run * SAMPLE):
            for i in range(a, min(a + run, n)):
                hi = max(hi, scores[i])
        if hi <= 0:
            return np.float32(0.0)
        bins = 1024
        hist = np.zeros(bins, dtype=np.int64)
        scale = np.float32(bins) / hi
        for a in range(0, n, run * SAMPLE):
            for i in range(a, min(a + run, n)):
                x = scores[i]
                if x > 0:
                    hist[min(int(x * scale), bins - 1)] += 1
        seen = 0
        for b in range(bins - 1, -1, -1):
            seen += hist[b]
            if seen >= k:
                return np.float32(b / scale) * np.float32(0.999)  # below the bin's edge whatever the rounding
        return np.float32(0.0)

    @_compiled
    def _top_nb(scores, candidates, k):  # pragma: no cover - compiled
        n = candidates.shape[0]
        bar = np.float32(0.0)
        if n >= SAMPLE * k * 4:
            bar = _floor(scores[candidates[::SAMPLE]], k, n)  # a strided gather: one sample run
        hs = np.empty(k, dtype=np.float32)
        hd = np.empty(k, dtype=np.int64)
        m = 0
        for i in range(n):
            d = np.int64(candidates[i])
            s = scores[d]
            if s > 0 and s >= bar:  # most fall below the bar (the floor, raised to the heap's worst when full)
                m = _offer(hs, hd, m, k, s, d)
                if m == k:
                    bar = max(bar, hs[0])
        return hs, hd, m

    @numba.njit(nogil=True)
    def _count_reaching(x, t):  # pragma: no cover - compiled
        # a plain loop over one contiguous array: the compiler runs it several scores at a time
        c = 0
        for i in range(x.shape[0]):
            c += x[i] >= t
        return c

    @numba.njit(nogil=True)
    def _bisect(x, want, hi):  # pragma: no cover - compiled
        """The largest t a bisection of [0, hi] finds with at least ``want`` of ``x`` reaching it."""
        lo = np.float32(0.0)
        for _ in range(STEPS):
            mid = np.float32((lo + hi) * np.float32(0.5))
            if _count_reaching(x, mid) >= want:
                lo = mid
            else:
                hi = mid
        return lo

    @numba.njit(nogil=True)
    def _bar_all(scores, k):  # pragma: no cover - compiled
        """A score the k-th best of ``scores`` is not below, found by counting, which runs many
        scores at a time: k scores of a sample (the first BLOCK of every BLOCK * SAMPLE) reach it;
        a higher one where counting the whole shows that k scores still reach it."""
        n = scores.shape[0]
        stride = BLOCK * SAMPLE
        sample = np.empty(((n + stride - 1) // stride) * BLOCK, dtype=np.float32)
        m = 0
        for a in range(0, n, stride):
            b = min(a + BLOCK, n)
            sample[m : m + b - a] = scores[a:b]
            m += b - a
        sample = sample[:m]
        hi = np.float32(0.0)
        for i in range(m):
            if sample[i] > hi:
                hi = sample[i]
        if hi <= 0:
            return np.float32(0.0)
        hi = hi * np.float32(1.001)
        bar = _bisect(sample, k, hi)  # k of a subset reach it, so k of the whole do
        tight = _bisect(sample, max(2 * k // SAMPLE, 1), hi)  # about 2k of the whole reach this one
        if tight > bar and _count_reaching(scores, tight) >= k:
            bar = tight
        return bar

    @_compiled
    def _top_all_nb(scores, k):  # pragma: no cover - compiled
        # every document's score is counted against the bar in small runs; a run none of whose
        # scores reaches it is passed over, only the runs that hold a contender go through the heap
        n = scores.shape[0]
        bar = _bar_all(scores, k) if n >= SAMPLE * k * 4 else np.float32(0.0)
        hs = np.empty(k, dtype=np.float32)
        hd = np.empty(k, dtype=np.int64)
        m = 0
        for start in range(0, n, RUN):
            stop = min(start + RUN, n)
            if _count_reaching(scores[start:stop], bar) == 0:
                continue
            for d in range(start, stop):
                s = scores[d]
                if s > 0 and s >= bar:
                    m = _offer(hs, hd, m, k, s, np.int64(d))
                    if m == k:
                        bar = max(bar, hs[0])
        return hs, hd, m

    @numba.njit(inline="always")
    def _drain(hs, hd, m, out_docs, out_scores):  # pragma: no cover - compiled
        """Empty the k-heap into out_*[:m], best first (the worst is popped first, written last)."""
        for pos in range(m - 1, -1, -1):
            out_docs[pos] = hd[0]
            out_scores[pos] = hs[0]
            _sift_down(hs, hd, pos, hs[pos], hd[pos])  # the last item takes the root of the pos left

    @_compiled(parallel=True)
    def _batch_nb(data, indices, starts, ends, weights, qptr, n_docs, k, longest, n_chunks,
                  out_docs, out_scores, out_m):  # pragma: no cover - compiled
        nq = qptr.shape[0] - 1
        for c in numba.prange(n_chunks):  # each chunk its own buffers, queries c, c + n_chunks, ...
            scores = np.zeros(n_docs, dtype=np.float32)
            touched = np.empty(longest, dtype=np.int32)
            for q in range(c, nq, n_chunks):
                a, b = qptr[q], qptr[q + 1]
                postings = 0
                for t in range(a, b):
                    postings += ends[t] - starts[t]
                if _is_long(postings, n_docs):
                    _scatter_nb(data, indices, starts[a:b], ends[a:b], weights[a:b], scores)
                    hs, hd, m = _top_all_nb(scores, k)
                    scores[:] = 0
                else:
                    n = _accumulate_nb(data, indices, starts[a:b], ends[a:b], weights[a:b], scores, touched)
                    hs, hd, m = _top_nb(scores, touched[:n], k)
                    for i in range(n):  # back to zeros for the next query (cheaper than a fresh array)
                        scores[touched[i]] = 0
                _drain(hs, hd, m, out_docs[q], out_scores[q])
                out_m[q] = m


def accumulate(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, weights: dict[int, float],
               n_docs: int, backend: str = BACKEND) -> tuple[np.ndarray, np.ndarray | None]:
    """(scores, touched): the float32 score of every document for ``weights`` (term id -> weight,
    in the order the terms are added) and, for a short query with numba, the ids of the documents
    with a positive score (unordered; None for a long query and from numpy: top_k scans every score)."""
    _check(backend)
    if not weights:
        return np.zeros(n_docs, dtype=np.float32), (np.empty(0, dtype=np.int32) if backend == "numba" else None)
    terms = np.fromiter(weights, dtype=np.int64, count=len(weights))
    w = np.fromiter(weights.values(), dtype=np.float32, count=len(weights))
    starts, ends = indptr[terms].astype(np.int64), indptr[terms + 1].astype(np.int64)
    scores = np.zeros(n_docs, dtype=np.float32)
    if backend == "numba":
        postings = int((ends - starts).sum())
        if _is_long(postings, n_docs):  # long: add, then let top_k scan every score
            _scatter_nb(data, indices, starts, ends, w, scores)
            return scores, None
        touched = np.empty(postings, dtype=np.int32)
        n = _accumulate_nb(data, indices, starts, ends, w, scores, touched)
        return scores, touched[:n]
    docs = np.concatenate([indices[a:b] for a, b in zip(starts, ends)])
    vals = np.concatenate([data[a:b] if x == 1 else data[a:b] * x for a, b, x in zip(starts, ends, w)])
    np.add.at(scores, docs, vals)
    return scores, None


def top_k(scores: np.ndarray, k: int, candidates: np.ndarray | None = None,
          backend: str = BACKEND) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best documents with a positive score (among ``candidates`` when given, else
    among all), best first; ties by doc id, at the k-th place too (the lowest ids of the tied
    scores are kept): the first ``k`` in the order (-score, doc id)."""
    _check(backend)
    if k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    if backend == "numba":
        _, hd, m = _top_all_nb(scores, k) if candidates is None else _top_nb(scores, candidates, k)
        top = hd[:m]
    else:
        top = np.flatnonzero(scores > 0) if candidates is None else np.asarray(candidates, dtype=np.int64)
        if len(top) > k:
            vals = scores[top]
            kth = np.partition(vals, len(vals) - k)[len(vals) - k]
            above = top[vals > kth]
            tied = np.sort(top[vals == kth])[: k - len(above)]
            top = np.concatenate([above, tied])
    top = best_first(top, scores[top])
    return top, scores[top]


def _check(backend: str) -> None:
    if backend not in ("numba", "numpy") or (backend == "numba" and numba is None):
        raise ValueError(f"BM25 backend {backend!r} is not available here (have: {BACKEND}{', numpy' if numba else ''})")


def top_k_many(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, queries: Sequence[dict[int, float]], n_docs: int,
               k: int, threads: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`top_k` of :func:`accumulate` for many analyzed queries at once, the same documents and
    bits; with numba one compiled call runs them on ``threads`` threads (0: every core) without
    the GIL, each thread reusing one score array."""
    if BACKEND != "numba" or k <= 0:
        out = []
        for w in queries:
            scores, touched = accumulate(data, indices, indptr, w, n_docs)
            out.append(top_k(scores, k, touched))
        return out
    threads = max(1, min(threads or (os.cpu_count() or 1), numba.config.NUMBA_NUM_THREADS, max(len(queries), 1)))
    terms = np.fromiter((t for w in queries for t in w), dtype=np.int64)
    weights = np.fromiter((x for w in queries for x in w.values()), dtype=np.float32, count=len(terms))
    qptr = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in queries], out=qptr[1:])
    starts, ends = indptr[terms].astype(np.int64), indptr[terms + 1].astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(ends - starts)])
    per = cum[qptr[1:]] - cum[qptr[:-1]]  # postings per query (0 for a query without terms)
    out_docs = np.empty((len(queries), k), dtype=np.int64)
    out_scores = np.empty((len(queries), k), dtype=np.float32)
    out_m = np.zeros(len(queries), dtype=np.int64)
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        _batch_nb(data, indices, starts, ends, weights, qptr, n_docs, k, max(int(per.max(initial=0)), 1), threads,
                  out_docs, out_scores, out_m)
    finally:
        numba.set_num_threads(old)
    return [(out_docs[q, :m], out_scores[q, :m]) for q, m in enumerate(out_m.tolist())]


def idf_of(df: np.ndarray, n_docs: int, method: str) -> np.ndarray:
    """BM25 idf of document frequencies: the same formulas as bm25s.scoring (Kamphuis et al. 2020 variants)."""
    df = df.astype(np.float64)
    if method == "lucene":
        return np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    if method == "robertson":
        return np.log(np.maximum((n_docs - df + 0.5) / (df + 0.5), 1.0))
    if method == "atire":
        return np.log(n_docs / df)
    raise ValueError(f"unsupported BM25 method {method!r}")
