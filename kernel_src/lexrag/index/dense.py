"""The dense index over the embeddings artifact (FAISS inner product over normalised vectors).

``index: flat`` is exact search over the fp16 vectors as they are stored: on the CPU a FAISS
``IndexScalarQuantizer`` with fp16 codes (the shards' bytes copied in as they are: the scores are
those of an ``IndexFlatIP`` over the same vectors, at half its memory), on a GPU (when faiss
reports one) an fp16 GPU flat index.  The shards are read with plain file reads, not through their
memory maps, so building the index leaves them in the page cache, not in this process's resident
set.  ``index: ivfpq`` keeps a ``pq_m``-byte PQ code per vector (64 bytes: 170 MB at 2.65M) in an
``IndexIVFPQ`` and re-scores the top ``rescore_k`` candidates exactly against the fp16 shards,
memory-mapped from disk.
"""

from __future__ import annotations

import logging
from typing import Iterator

import numpy as np

from lexrag.index.embeddings import Embeddings, SemanticError
from lexrag.io.procmem import mem_available
from lexrag.ranking import best_first_order

__all__ = ["DenseIndex", "choose_index_kind", "exact_scores"]

log = logging.getLogger(__name__)


def choose_index_kind(emb: "Embeddings", kind: str) -> str:
    """``auto``: the exact flat index when its fp16 vectors (plus a tenth for FAISS and the query
    path) fit in 70% of the memory available (the container's limit, where there is one), else
    IVF-PQ; any other kind unchanged."""
    if kind != "auto":
        return kind
    need = emb.n * emb.dims * 2 * 1.1
    avail = mem_available()
    chosen = "flat" if avail is None or need < 0.7 * avail else "ivfpq"
    if chosen == "ivfpq":
        log.warning("flat index needs %.1f GB, %.1f GB available: using IVF-PQ", need / 1e9, (avail or 0) / 1e9)
    return chosen


def _faiss_gpu(faiss, use_gpu: str, emb: "Embeddings", kind: str) -> int | None:
    """The GPU for the index, or None (CPU).  ``auto``: the last usable GPU (compute capability
    >= 7.0; it is the one the models use least) when the faiss build has GPU support and the
    index in fp16 takes at most 40% of that GPU's memory, so a 7B 4-bit LLM still fits beside it."""
    if use_gpu == "cpu" or not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        if use_gpu == "gpu":
            raise SemanticError("semantic.faiss_gpu is gpu, but this faiss has no GPU support (install faiss-gpu-cu12)")
        return None
    from lexrag.models import usable_gpus

    gpus = usable_gpus()
    if not gpus:
        return None
    import torch

    gpu = gpus[-1]
    size = emb.n * emb.dims * 2 if kind == "flat" else emb.n * 80
    if use_gpu == "auto" and size > 0.4 * torch.cuda.get_device_properties(gpu).total_memory:
        return None
    return gpu


BLAS_QUERIES = 32  # from this many queries at once the CPU flat index multiplies decoded blocks (BLAS);
# about where the two paths cross (scripts/bench_semantic.py batch)
BLOCK_ROWS = 32_768  # vectors decoded to fp32 at a time for that (128 MB at 1,024 dimensions)
_PAD_SCORE = np.finfo(np.float32).min  # the score faiss gives the -1 ids that pad a short result


def exact_scores(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Inner products of fp16-valued rows with one query, identical for identical rows wherever they
    are computed: each product is exact in float64 (11 x 24 significant bits) and every row is summed
    by one fixed loop over a fresh contiguous array.  BLAS is not used: its kernels sum a row
    differently by its place in a block, so copies of one vector could differ in the last bit."""
    v = np.array(vectors, dtype=np.float64)
    v *= np.asarray(q, dtype=np.float64)
    return v.sum(axis=1)


RESCORE_ROWS = 16_384  # candidates re-scored at a time (128 MB of float64 at 1,024 dimensions)
SCAN_MAX_K = 2_048  # the most results asked of faiss's own search (its GPU indexes refuse more)


def _order_head(ids: np.ndarray, fetch, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of candidate ``ids`` by their exact scores (``fetch(ids)``: their stored
    vectors), equal scores to the lower id, padded with id -1 and faiss's lowest score.  The
    candidates are re-scored :data:`RESCORE_ROWS` at a time, so a query near many copies of one
    text costs time, not memory."""
    best_i = np.empty(0, np.int64)
    best_s = np.empty(0, np.float64)
    for a in range(0, len(ids), RESCORE_ROWS):
        part = np.asarray(ids[a : a + RESCORE_ROWS], dtype=np.int64)
        cand_i = np.concatenate([best_i, part])
        cand_s = np.concatenate([best_s, exact_scores(fetch(part), q)])
        keep = best_first_order(cand_i, cand_s)[:k]
        best_i, best_s = cand_i[keep], cand_s[keep]
    out_i = np.full(k, -1, dtype=np.int64)
    out_s = np.full(k, _PAD_SCORE, dtype=np.float32)
    out_i[: len(best_i)] = best_i
    out_s[: len(best_s)] = best_s
    return out_i, out_s


class DenseIndex:
    """FAISS inner-product search over normalised embeddings: ``flat`` (exact over the fp16
    vectors: a scalar quantizer with fp16 codes on the CPU, an fp16 flat index on a GPU), or
    ``ivfpq`` (compressed codes, the top ``rescore_k`` re-scored exactly)."""

    def __init__(self, emb: Embeddings, kind: str = "flat", nlist: int = 2048, m: int = 64, nprobe: int = 64,
                 rescore_k: int = 1000, train_size: int = 100_000, seed: int = 0, use_gpu: str = "auto"):
        import faiss

        self.emb = emb
        self.kind = kind
        self.rescore_k = rescore_k
        d = emb.dims
        if kind not in ("flat", "ivfpq"):
            raise SemanticError(f"unknown dense index kind {kind!r} (flat | ivfpq)")
        if kind == "ivfpq" and d % m:  # faiss would stop on an assertion deep inside
            fits = [x for x in range(min(m, d), 0, -1) if d % x == 0][:3]
            raise SemanticError(f"semantic.pq_m {m} does not divide the embeddings' {d} dimensions (IVF-PQ cuts each "
                                f"vector into pq_m equal parts): set semantic.pq_m to a divisor of {d} "
                                f"({', '.join(map(str, fits))}) or semantic.index=flat")
        gpu = _faiss_gpu(faiss, use_gpu, emb, kind)
        filled = kind == "flat" and gpu is None  # the CPU flat index takes the shards' bytes as they are
        self.filled = filled
        self._vmax: float | None = None
        if filled:
            index = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
            self._fill_fp16(index, emb)
        elif kind == "flat":
            index = faiss.IndexFlatIP(d)
        else:
            nlist = max(1, min(nlist, emb.n // 39))
            quant = faiss.IndexFlatIP(d)
            rng = np.random.default_rng(seed)
            sample = np.sort(rng.choice(emb.n, size=min(train_size, emb.n), replace=False))
            bits = int(min(8, np.log2(max(len(sample), 2))))  # 8 bits need >= 256 training vectors
            index = faiss.IndexIVFPQ(quant, d, nlist, m, bits, faiss.METRIC_INNER_PRODUCT)
            index.train(emb.rows(sample))
            index.nprobe = nprobe
        if gpu is not None:
            co = faiss.GpuClonerOptions()
            co.useFloat16 = True
            index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), gpu, index, co)
        self.device = f"cuda:{gpu}" if gpu is not None else "cpu"
        if not filled:
            for chunk in emb.iter_chunks():
                index.add(chunk)
        self.index = index

    @staticmethod
    def _fill_fp16(index, emb: Embeddings) -> None:
        """The shards' fp16 bytes straight into the scalar quantizer's codes (its fp16 code is the
        IEEE half the shards hold): allocated once at full size, so the peak is the index itself,
        not the index plus a reallocation or an fp32 copy."""
        import faiss

        row = index.code_size
        if row != 2 * emb.dims:  # a faiss whose fp16 code is not two bytes a component
            raise SemanticError(f"faiss's fp16 scalar quantizer uses {row} bytes a vector of {emb.dims}, not {2 * emb.dims}")
        index.codes.resize(emb.n * row)
        codes = faiss.rev_swig_ptr(index.codes.data(), emb.n * row) if emb.n else np.empty(0, np.uint8)
        for i in range(len(emb.shards)):
            a = i * emb.shard_size * row
            b = min(emb.n, (i + 1) * emb.shard_size) * row
            emb.read_shard(i, codes[a:b])
        index.ntotal = emb.n

    def _codes(self) -> np.ndarray:
        """The CPU flat index's codes as the (n, d) fp16 vectors they are (no copy)."""
        import faiss

        n, d = self.index.ntotal, self.index.d
        return faiss.rev_swig_ptr(self.index.codes.data(), n * self.index.code_size).view(np.float16).reshape(n, d)

    def _vectors(self, ids: np.ndarray) -> np.ndarray:
        """The stored (fp16) vectors of ``ids``: the index's own codes on the CPU, else the shards."""
        return self._codes()[ids] if self.filled else self.emb.rows(ids)

    def _tolerance(self, q: np.ndarray) -> np.ndarray:
        """Per query, a bound on how far an approximate score (faiss's scan, a BLAS product, a GPU's
        half-precision query) can be from :func:`exact_scores`: the summation error of ``d`` fp32
        terms (truncated on a GPU), plus the query's rounding to fp16 on a GPU, times the norms
        (Cauchy-Schwarz)."""
        if self._vmax is None:
            if self.emb.params["params"].get("normalize"):
                self._vmax = 1.001  # unit vectors, each component rounded to fp16 (relative 2**-11)
            else:
                self._vmax = max((float(np.sqrt(np.einsum("ij,ij->i", c, c).max())) for c in self.emb.iter_chunks() if len(c)),
                                 default=0.0)
        # a GPU's tensor cores may truncate each fp32 addition (a unit of 2**-23, not 2**-24)
        unit = self.index.d * 2.0**-24 if self.device == "cpu" else self.index.d * 2.0**-23 + 2.0**-11
        return 1.01 * unit * np.linalg.norm(q.astype(np.float64), axis=1) * self._vmax

    def _blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first id, fp16 vectors) of every block of at most :data:`BLOCK_ROWS` vectors: views of
        the CPU index's codes, else the shards read from their files."""
        if self.filled:
            codes = self._codes()
            for a in range(0, self.index.ntotal, BLOCK_ROWS):
                yield a, codes[a : a + BLOCK_ROWS]
            return
        for i in range(len(self.emb.shards)):
            shard, base = self.emb.read_shard(i), i * self.emb.shard_size
            for a in range(0, len(shard), BLOCK_ROWS):
                yield base + a, shard[a : a + BLOCK_ROWS]

    def _search_blocks(self, q: np.ndarray, k: int, tol: np.ndarray) -> list[np.ndarray]:
        """Candidates for each query's exact top ``k``: every document whose approximate score is
        within ``2 * tol`` of the ``k``-th best approximate score, found a block of vectors at a time
        decoded to fp32 and multiplied with all the queries (one matrix product, BLAS).  faiss's
        scalar quantizer scores one (query, vector) pair at a time, which is the faster way for a
        few queries and several times slower for a batch (the semantic stage searches all of a
        chunk's texts at once).  It finds every candidate however many there are (copies of one
        text), so it is also where the scan sends the queries it cannot settle."""
        n, d = self.index.ntotal, self.index.d
        cand_i = [np.empty(0, np.int64) for _ in range(len(q))]
        cand_s = [np.empty(0, np.float32) for _ in range(len(q))]
        buf = np.empty((min(BLOCK_ROWS, n), d), dtype=np.float32)
        for a, vectors in self._blocks():
            block = buf[: len(vectors)]
            np.copyto(block, vectors)
            s = q @ block.T
            top = -np.partition(-s, min(k, len(block)) - 1, axis=1)[:, : min(k, len(block))]
            thr = np.empty(len(q))
            for i in range(len(q)):
                seen = np.concatenate([cand_s[i], top[i]])
                thr[i] = np.partition(seen, len(seen) - k)[len(seen) - k] - 2 * tol[i] if len(seen) >= k else -np.inf
            rows, cols = np.nonzero(s >= thr[:, None])
            bounds = np.searchsorted(rows, np.arange(len(q) + 1))
            for i in range(len(q)):
                keep = cand_s[i] >= thr[i]
                new = cols[bounds[i] : bounds[i + 1]]
                cand_i[i] = np.concatenate([cand_i[i][keep], new + a])
                cand_s[i] = np.concatenate([cand_s[i][keep], s[i, new]])
        return cand_i

    def _search_scan(self, q: np.ndarray, k: int, tol: np.ndarray) -> list[np.ndarray]:
        """The same candidates from faiss's own search, asking again with more results for the
        queries whose last result is still above their threshold; a query that needs more than
        :data:`SCAN_MAX_K` results goes to :meth:`_search_blocks`."""
        n = self.index.ntotal
        heads: list[np.ndarray | None] = [None] * len(q)
        todo = np.arange(len(q))
        want = min(n, 2 * k + 16)
        while len(todo) and want <= SCAN_MAX_K:
            scores, ids = self.index.search(q[todo], want)
            thr = (scores[:, k - 1].astype(np.float64) if k <= want else np.full(len(todo), -np.inf)) - 2 * tol[todo]
            settled = (scores[:, -1] < thr) | (want >= n)
            for j in np.flatnonzero(settled):
                heads[todo[j]] = ids[j][(ids[j] >= 0) & (scores[j] >= thr[j])]
            todo = todo[~settled]
            want = min(n, 4 * want)
        if len(todo):
            for j, c in zip(todo, self._search_blocks(q[todo], k, tol[todo])):
                heads[j] = c
        return heads  # type: ignore[return-value]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Best ``k`` documents per query, best first.  ``flat`` is exact and its order does not
        depend on the path, the batch or the BLAS kernel: the candidates near each query's ``k``-th
        score are re-scored by :func:`exact_scores` and equal scores go to the lower document id.
        A query of zeros scores every document 0 (the ``k`` lowest ids); a query that is not
        finite (an encoder overflow) gets no result (id -1) and a warning."""
        if k < 1:
            raise SemanticError(f"dense search: k = {k}; ask for at least one result")
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if self.kind == "flat":
            out_i = np.full((len(q), k), -1, dtype=np.int64)
            out_s = np.full((len(q), k), _PAD_SCORE, dtype=np.float32)
            n = self.index.ntotal
            finite = np.isfinite(q).all(axis=1)
            if not finite.all():
                log.warning("dense search: %d of %d query vectors are not finite (NaN or inf: an encoder overflow?); "
                            "they get no dense result", int((~finite).sum()), len(q))
            zero = finite & ~q.any(axis=1)
            out_i[zero, : min(k, n)] = np.arange(min(k, n))
            out_s[zero, : min(k, n)] = 0.0
            live = np.flatnonzero(finite & ~zero)
            if not n or not len(live):
                return out_i, out_s
            ql = q[live]
            tol = self._tolerance(ql)
            blocks = len(ql) >= BLAS_QUERIES and self.filled
            heads = self._search_blocks(ql, k, tol) if blocks else self._search_scan(ql, k, tol)
            for i, ids in zip(live, heads):
                out_i[i], out_s[i] = _order_head(ids, self._vectors, q[i], k)
            return out_i, out_s
        _, cand = self.index.search(q, max(k, self.rescore_k))
        out_ids = np.full((len(q), k), -1, dtype=np.int64)
        out_scores = np.full((len(q), k), -np.inf, dtype=np.float32)
        for i in range(len(q)):
            c = cand[i][cand[i] >= 0]
            out_ids[i], out_scores[i] = _order_head(c, self.emb.rows, q[i], k)
        return out_ids, out_scores
