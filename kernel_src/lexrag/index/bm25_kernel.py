"""The BM25 query kernel: a query's weighted postings summed into a score vector, and the best
``k`` among the documents it touched.

The index is bm25s's CSC layout (``data``: float32 BM25 contributions, ``indices``: int32 doc ids,
``indptr``: one span per term).  A query is a few term ids with weights; its score vector is the
sum of their weighted columns, accumulated in float32 in term order as bm25s does, so the scores
are the same bits whichever backend adds them:

- ``numba`` (when installed; Kaggle's image carries it): one compiled loop over the postings that
  also lists the documents it touches, and a k-heap over those, so a short query never scans
  every document.  Both release the GIL, so :func:`search_many` runs queries on several threads.
- ``numpy`` (the fallback): ``np.add.at`` over the concatenated postings, then a partition of
  the positive scores.

``LEXRAG_BM25_BACKEND=numpy`` forces the fallback; both take ``backend=`` (tests compare them).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

__all__ = ["BACKEND", "accumulate", "top_k", "search_many"]

try:  # optional: the numpy path gives the same scores, slower
    if os.environ.get("LEXRAG_BM25_BACKEND", "").strip().lower() == "numpy":
        raise ImportError("numpy backend asked for")
    import numba
except ImportError:
    numba = None

BACKEND = "numba" if numba is not None else "numpy"


def _compiled(f):
    """``f`` compiled without the GIL, cached on disk where numba finds a writable place (beside
    the module or in the user's cache folder); compiled afresh in each process where it does not."""
    try:
        return numba.njit(nogil=True, cache=True)(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(f)


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

    @numba.njit(inline="always")
    def _worse(s1, d1, s2, d2):  # pragma: no cover - compiled
        return s1 < s2 or (s1 == s2 and d1 > d2)

    @numba.njit(inline="always")
    def _offer(hs, hd, m, k, s, d):  # pragma: no cover - compiled
        """Offer (s, d) to the k-heap (hs, hd) of m items whose root is the worst; returns m."""
        if m < k:
            i = m
            m += 1
        elif _worse(hs[0], hd[0], s, d):
            i = 0
            while True:  # sift the new item down from the root
                c = 2 * i + 1
                if c >= m:
                    break
                if c + 1 < m and _worse(hs[c + 1], hd[c + 1], hs[c], hd[c]):
                    c += 1
                if not _worse(hs[c], hd[c], s, d):
                    break
                hs[i] = hs[c]
                hd[i] = hd[c]
                i = c
            hs[i] = s
            hd[i] = d
            return m
        else:
            return m
        while i > 0:  # sift the new leaf up
            parent = (i - 1) // 2
            if not _worse(s, d, hs[parent], hd[parent]):
                break
            hs[i] = hs[parent]
            hd[i] = hd[parent]
            i = parent
        hs[i] = s
        hd[i] = d
        return m

    @_compiled
    def _top_nb(scores, candidates, k):  # pragma: no cover - compiled
        hs = np.empty(k, dtype=np.float32)
        hd = np.empty(k, dtype=np.int64)
        m = 0
        for i in range(candidates.shape[0]):
            d = candidates[i]
            s = scores[d]
            if s > 0:
                m = _offer(hs, hd, m, k, s, d)
        return hd[:m]

    @_compiled
    def _top_all_nb(scores, k):  # pragma: no cover - compiled
        hs = np.empty(k, dtype=np.float32)
        hd = np.empty(k, dtype=np.int64)
        m = 0
        for d in range(scores.shape[0]):
            s = scores[d]
            if s > 0:
                m = _offer(hs, hd, m, k, s, d)
        return hd[:m]


def accumulate(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, weights: dict[int, float],
               n_docs: int, backend: str = BACKEND) -> tuple[np.ndarray, np.ndarray | None]:
    """(scores, touched): the float32 score of every document for ``weights`` (term id -> weight,
    in the order the terms are added) and, with numba, the ids of the documents with a positive
    score (unordered; None from numpy, where finding them costs a scan of every score)."""
    _check(backend)
    if not weights:
        return np.zeros(n_docs, dtype=np.float32), (np.empty(0, dtype=np.int32) if backend == "numba" else None)
    terms = np.fromiter(weights, dtype=np.int64, count=len(weights))
    w = np.fromiter(weights.values(), dtype=np.float32, count=len(weights))
    starts, ends = indptr[terms].astype(np.int64), indptr[terms + 1].astype(np.int64)
    scores = np.zeros(n_docs, dtype=np.float32)
    if backend == "numba":
        touched = np.empty(int((ends - starts).sum()), dtype=np.int32)
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
        top = _top_all_nb(scores, k) if candidates is None else _top_nb(scores, candidates, k)
    else:
        top = np.flatnonzero(scores > 0) if candidates is None else np.asarray(candidates, dtype=np.int64)
        if len(top) > k:
            vals = scores[top]
            kth = np.partition(vals, len(vals) - k)[len(vals) - k]
            above = top[vals > kth]
            tied = np.sort(top[vals == kth])[: k - len(above)]
            top = np.concatenate([above, tied])
    top = top[np.lexsort((top, -scores[top]))]
    return top, scores[top]


def _check(backend: str) -> None:
    if backend not in ("numba", "numpy") or (backend == "numba" and numba is None):
        raise ValueError(f"BM25 backend {backend!r} is not available here (have: {BACKEND}{', numpy' if numba else ''})")


def search_many(search, texts: Sequence[str], threads: int = 0) -> list:
    """``[search(t) for t in texts]`` on ``threads`` threads (0: the machine's cores).  With the
    numba kernel the scoring releases the GIL and the threads run side by side; with numpy they
    mostly take turns, so one thread is used."""
    threads = threads or (os.cpu_count() or 1)
    if BACKEND != "numba" or threads <= 1 or len(texts) < 2:
        return [search(t) for t in texts]
    with ThreadPoolExecutor(max_workers=min(threads, len(texts))) as pool:
        return list(pool.map(search, texts))
