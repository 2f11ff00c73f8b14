"""The search engines scripts/bench_engines.py compares, each behind one shape: ``engine_searchers``
gives an engine's one-query and many-query search over the documents' lexrag terms (the top
:data:`K` document ids), building the engine's own index where it has one."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

K = 100


FLOOR_C = r"""
/* lexrag's BM25 query kernel (kernel_src/lexrag/index/bm25_kernel.py) line for line in C: the
   same float32 sums in term order, the same choice between listing the touched documents (short
   query) and scanning every score (long query), the same sampled bar below the k-th score, the
   same k-heap and its order (best score first, then the lower doc id, at the k-th place too). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LONG_FACTOR 4
#define SAMPLE 16
#define BLOCK 512
#define RUN 64
#define STEPS 12

static inline int worse(float s1, int64_t d1, float s2, int64_t d2) { return s1 < s2 || (s1 == s2 && d1 > d2); }

static inline void sift_down(float *hs, int64_t *hd, int64_t size, float s, int64_t d) {
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && worse(hs[c + 1], hd[c + 1], hs[c], hd[c])) c++;
        if (!worse(hs[c], hd[c], s, d)) break;
        hs[i] = hs[c]; hd[i] = hd[c]; i = c;
    }
    hs[i] = s; hd[i] = d;
}

static inline int64_t offer(float *hs, int64_t *hd, int64_t m, int64_t k, float s, int64_t d) {
    if (m == k) {
        if (worse(hs[0], hd[0], s, d)) sift_down(hs, hd, m, s, d);
        return m;
    }
    int64_t i = m;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!worse(s, d, hs[parent], hd[parent])) break;
        hs[i] = hs[parent]; hd[i] = hd[parent]; i = parent;
    }
    hs[i] = s; hd[i] = d;
    return m + 1;
}

static int64_t accumulate(const float *data, const int32_t *indices, const int64_t *starts, const int64_t *ends,
                          const float *weights, int64_t nterms, float *scores, int32_t *touched) {
    int64_t n = 0;
    for (int64_t t = 0; t < nterms; t++) {
        float w = weights[t];
        for (int64_t p = starts[t]; p < ends[t]; p++) {
            int32_t d = indices[p];
            float before = scores[d];
            touched[n] = d;
            n += before == 0.0f;
            scores[d] = before + data[p] * w;
        }
    }
    return n;
}

static void scatter(const float *data, const int32_t *indices, const int64_t *starts, const int64_t *ends,
                    const float *weights, int64_t nterms, float *scores) {
    for (int64_t t = 0; t < nterms; t++) {
        float w = weights[t];
        for (int64_t p = starts[t]; p < ends[t]; p++) scores[indices[p]] += data[p] * w;
    }
}

/* _floor over the strided sample scores[candidates[::SAMPLE]] (read in place, not gathered) */
static float sampled_floor(const float *scores, const int32_t *candidates, int64_t n, int64_t k) {
    float hi = 0.0f;
    for (int64_t i = 0; i < n; i += SAMPLE) { float x = scores[candidates[i]]; if (x > hi) hi = x; }
    if (hi <= 0.0f) return 0.0f;
    enum { BINS = 1024 };
    int64_t hist[BINS] = {0};
    float scale = (float)BINS / hi;
    for (int64_t i = 0; i < n; i += SAMPLE) {
        float x = scores[candidates[i]];
        if (x > 0.0f) { int64_t b = (int64_t)(x * scale); hist[b < BINS - 1 ? b : BINS - 1]++; }
    }
    int64_t seen = 0;
    for (int64_t b = BINS - 1; b >= 0; b--) {
        seen += hist[b];
        if (seen >= k) return (float)((double)b / (double)scale) * 0.999f;
    }
    return 0.0f;
}

static int64_t top_touched(const float *scores, const int32_t *candidates, int64_t n, int64_t k, float *hs, int64_t *hd) {
    float bar = n >= SAMPLE * k * 4 ? sampled_floor(scores, candidates, n, k) : 0.0f;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = candidates[i];
        float s = scores[d];
        if (s > 0.0f && s >= bar) {
            m = offer(hs, hd, m, k, s, d);
            if (m == k && hs[0] > bar) bar = hs[0];
        }
    }
    return m;
}

static inline int64_t count_reaching(const float *x, int64_t n, float t) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += x[i] >= t;
    return c;
}

static float bisect(const float *x, int64_t n, int64_t want, float hi) {
    float lo = 0.0f;
    for (int s = 0; s < STEPS; s++) {
        float mid = (lo + hi) * 0.5f;
        if (count_reaching(x, n, mid) >= want) lo = mid; else hi = mid;
    }
    return lo;
}

static float bar_all(const float *scores, int64_t n, int64_t k, float *sample) {
    int64_t stride = BLOCK * SAMPLE, m = 0;
    for (int64_t a = 0; a < n; a += stride) {
        int64_t b = a + BLOCK < n ? a + BLOCK : n;
        memcpy(sample + m, scores + a, (size_t)(b - a) * sizeof(float));
        m += b - a;
    }
    float hi = 0.0f;
    for (int64_t i = 0; i < m; i++) if (sample[i] > hi) hi = sample[i];
    if (hi <= 0.0f) return 0.0f;
    hi = hi * 1.001f;
    float bar = bisect(sample, m, k, hi);
    int64_t few = 2 * k / SAMPLE;
    float tight = bisect(sample, m, few > 1 ? few : 1, hi);
    if (tight > bar && count_reaching(scores, n, tight) >= k) bar = tight;
    return bar;
}

static int64_t top_all(const float *scores, int64_t n, int64_t k, float *sample, float *hs, int64_t *hd) {
    float bar = n >= SAMPLE * k * 4 ? bar_all(scores, n, k, sample) : 0.0f;
    int64_t m = 0;
    for (int64_t start = 0; start < n; start += RUN) {
        int64_t stop = start + RUN < n ? start + RUN : n;
        if (count_reaching(scores + start, stop - start, bar) == 0) continue;
        for (int64_t d = start; d < stop; d++) {
            float s = scores[d];
            if (s > 0.0f && s >= bar) {
                m = offer(hs, hd, m, k, s, d);
                if (m == k && hs[0] > bar) bar = hs[0];
            }
        }
    }
    return m;
}

/* the heap into out_*[:m], best first */
static void drain(float *hs, int64_t *hd, int64_t m, int64_t *out_docs, float *out_scores) {
    for (int64_t pos = m - 1; pos >= 0; pos--) {
        out_docs[pos] = hd[0]; out_scores[pos] = hs[0];
        sift_down(hs, hd, pos, hs[pos], hd[pos]);
    }
}

/* One query: its top k into out_*, best first; returns how many.  scores: n_docs zeros, left
   zeroed; touched: room for the query's postings; sample: room for n_docs + BLOCK floats;
   hs, hd: room for k. */
int64_t search(const float *data, const int32_t *indices, const int64_t *starts, const int64_t *ends,
               const float *weights, int64_t nterms, int64_t n_docs, int64_t k, float *scores, int32_t *touched,
               float *sample, float *hs, int64_t *hd, int64_t *out_docs, float *out_scores) {
    int64_t postings = 0, m;
    for (int64_t t = 0; t < nterms; t++) postings += ends[t] - starts[t];
    if (postings * LONG_FACTOR > n_docs) {
        scatter(data, indices, starts, ends, weights, nterms, scores);
        m = top_all(scores, n_docs, k, sample, hs, hd);
        memset(scores, 0, (size_t)n_docs * sizeof(float));
    } else {
        int64_t n = accumulate(data, indices, starts, ends, weights, nterms, scores, touched);
        m = top_touched(scores, touched, n, k, hs, hd);
        for (int64_t i = 0; i < n; i++) scores[touched[i]] = 0.0f;
    }
    drain(hs, hd, m, out_docs, out_scores);
    return m;
}

typedef struct {
    const float *data; const int32_t *indices; const int64_t *starts, *ends; const float *weights; const int64_t *qptr;
    int64_t nq, n_docs, k, longest, chunk, chunks; int64_t *out_docs; float *out_scores; int64_t *out_m; int failed;
} batch_job;

static void *batch_chunk(void *arg) {
    batch_job *j = (batch_job *)arg;
    float *scores = calloc((size_t)j->n_docs, sizeof(float)), *sample = malloc(((size_t)j->n_docs + BLOCK) * sizeof(float));
    int32_t *touched = malloc((size_t)j->longest * sizeof(int32_t));
    float *hs = malloc((size_t)j->k * sizeof(float)); int64_t *hd = malloc((size_t)j->k * sizeof(int64_t));
    if (!scores || !sample || !touched || !hs || !hd) j->failed = 1;
    else
        for (int64_t q = j->chunk; q < j->nq; q += j->chunks) {
            int64_t a = j->qptr[q], b = j->qptr[q + 1];
            j->out_m[q] = search(j->data, j->indices, j->starts + a, j->ends + a, j->weights + a, b - a, j->n_docs, j->k,
                                 scores, touched, sample, hs, hd, j->out_docs + q * j->k, j->out_scores + q * j->k);
        }
    free(scores); free(sample); free(touched); free(hs); free(hd);
    return NULL;
}

/* Many queries (query q's terms at qptr[q]..qptr[q+1]) on `threads` threads, queries c, c + threads,
   ... on thread c, each thread with its own buffers (lexrag's top_k_many); returns 0, or -1 when
   a thread could not start or allocate. */
int64_t search_many(const float *data, const int32_t *indices, const int64_t *starts, const int64_t *ends,
                    const float *weights, const int64_t *qptr, int64_t nq, int64_t n_docs, int64_t k, int64_t longest,
                    int64_t threads, int64_t *out_docs, float *out_scores, int64_t *out_m) {
    batch_job jobs[256];
    pthread_t ids[256];
    int started[256] = {0};
    if (threads > 256) threads = 256;
    int failed = 0;
    for (int64_t c = 0; c < threads; c++) {
        jobs[c] = (batch_job){data, indices, starts, ends, weights, qptr, nq, n_docs, k, longest, c, threads,
                              out_docs, out_scores, out_m, 0};
        if (c > 0) started[c] = pthread_create(&ids[c], NULL, batch_chunk, &jobs[c]) == 0;
        if (c > 0 && !started[c]) failed = 1;
    }
    batch_chunk(&jobs[0]);  /* this thread takes the first chunk */
    for (int64_t c = 1; c < threads; c++) if (started[c]) pthread_join(ids[c], NULL);
    for (int64_t c = 0; c < threads; c++) failed |= jobs[c].failed;
    return failed ? -1 : 0;
}
"""


def doc_terms(work: Path):
    with open(work / "doc_terms.txt", encoding="utf-8") as f:
        for line in f:
            yield line.split()


def peak_mb() -> float:
    """This process's resident high-water mark (VmHWM: its own since exec, unlike ru_maxrss)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def engine_searchers(name: str, work: Path, threads: int):
    """(search(terms) -> doc ids best first, search_batch(list of terms) -> list, build info)."""
    art = work / "art"
    info: dict = {}
    if name in ("lexrag", "lexrag-numpy", "floor"):
        from lexrag.config import load_config
        from lexrag.index import bm25_kernel
        from lexrag.index.lexical import BM25Index

        idx = BM25Index.load(art / "bm25", load_config(None, {}).lexical)
        vocab = idx.retriever.vocab_dict
        sc = idx.retriever.scores
        data, indices, indptr = sc["data"], sc["indices"], sc["indptr"]
        if name == "lexrag":
            info["backend"] = bm25_kernel.BACKEND

            def one(terms):
                return idx.search_terms({vocab[t]: 1.0 for t in terms}, K)[0]

            def batch(qs):
                return bm25_kernel.top_k_many(data, indices, indptr, [{vocab[t]: 1.0 for t in q} for q in qs], idx.n_docs, K,
                                              threads)

            return one, batch, info
        if name == "lexrag-numpy":
            def one(terms):
                w = {vocab[t]: 1.0 for t in terms}
                scores, touched = bm25_kernel.accumulate(data, indices, indptr, w, idx.n_docs, backend="numpy")
                return bm25_kernel.top_k(scores, K, touched, backend="numpy")[0]

            return one, None, info
        lib, info["floor_cc"], note = _floor_lib(work)
        if note:
            info["floor_note"] = note
        data, indices, indptr = (np.ascontiguousarray(a) for a in (data, indices, indptr))
        n_docs = idx.n_docs
        scores = np.zeros(n_docs, dtype=np.float32)  # zeroed once; the kernel leaves it zeroed
        touched = np.empty(len(indices), dtype=np.int32)
        sample = np.empty(n_docs + 512, dtype=np.float32)
        hs, hd = np.empty(K, np.float32), np.empty(K, np.int64)
        out_docs, out_scores = np.empty(K, np.int64), np.empty(K, np.float32)
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731

        def spans(qs):
            ids = np.fromiter((vocab[t] for q in qs for t in q), dtype=np.int64)
            return indptr[ids].astype(np.int64), indptr[ids + 1].astype(np.int64), np.ones(len(ids), dtype=np.float32)

        def one(terms):
            starts, ends, w = spans([terms])
            m = lib.search(ptr(data), ptr(indices), ptr(starts), ptr(ends), ptr(w), len(starts), n_docs, K, ptr(scores),
                           ptr(touched), ptr(sample), ptr(hs), ptr(hd), ptr(out_docs), ptr(out_scores))
            return out_docs[:m].copy()

        def batch(qs):
            starts, ends, w = spans(qs)
            qptr = np.zeros(len(qs) + 1, dtype=np.int64)
            np.cumsum([len(q) for q in qs], out=qptr[1:])
            cum = np.concatenate([[0], np.cumsum(ends - starts)])
            longest = max(int((cum[qptr[1:]] - cum[qptr[:-1]]).max(initial=0)), 1)
            docs, got = np.empty((len(qs), K), np.int64), np.empty((len(qs), K), np.float32)
            ms = np.zeros(len(qs), dtype=np.int64)
            if lib.search_many(ptr(data), ptr(indices), ptr(starts), ptr(ends), ptr(w), ptr(qptr), len(qs), n_docs, K,
                               longest, batch_threads(threads, len(qs)), ptr(docs), ptr(got), ptr(ms)):
                raise SystemExit("the floor's batch could not start its threads or allocate their buffers")
            return [docs[q, :m] for q, m in enumerate(ms.tolist())]

        return one, batch, info
    if name.startswith("bm25s"):
        import bm25s

        retriever = bm25s.BM25.load(art / "bm25", mmap=True, show_progress=False, verbosity=0)
        backend = name.split("-")[1]
        retriever.backend = backend  # bm25s reads its backend from the object
        if backend == "numba":
            retriever.activate_numba_scorer()

        def one(terms):
            docs, _ = retriever.retrieve([terms], k=K, show_progress=False, n_threads=1, backend_selection=backend)
            return docs[0]

        def batch(qs):
            docs, _ = retriever.retrieve(qs, k=K, show_progress=False, n_threads=threads, backend_selection=backend)
            return list(docs)

        return one, batch, info
    if name == "tantivy":
        import tantivy

        folder = work / "tantivy"
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", stored=False, tokenizer_name="ws")
        builder.add_integer_field("doc", stored=True, indexed=False)
        schema = builder.build()
        ws = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        built = (folder / "meta.json").is_file()
        folder.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(schema, path=str(folder), reuse=built)
        index.register_tokenizer("ws", ws)
        if not built:
            t0 = time.perf_counter()
            writer = index.writer(heap_size=512 * 2**20, num_threads=threads)
            for d, terms in enumerate(doc_terms(work)):
                writer.add_document(tantivy.Document(body=" ".join(terms), doc=d))
            writer.commit()
            writer.wait_merging_threads()
            info.update(build_s=round(time.perf_counter() - t0, 1), build_peak_mb=round(peak_mb()),
                        index_mb=round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20))
        index.reload()
        searcher = index.searcher()

        def one(terms):
            q = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in terms])
            # (segment, doc) addresses: mapped to lexrag's ids after the timing (_tantivy_ids)
            return np.array([int(a.segment_ord) << 32 | int(a.doc) for _, a in searcher.search(q, K).hits], dtype=np.int64)

        return one, None, info
    if name == "pisa":
        from pyterrier_pisa import PisaIndex

        folder = work / "pisa"
        index = PisaIndex(str(folder), stemmer="none", stops="none", threads=threads)
        if not index.built():
            t0 = time.perf_counter()
            index.index({"docno": str(d), "text": " ".join(terms)} for d, terms in enumerate(doc_terms(work)))
            info.update(build_s=round(time.perf_counter() - t0, 1), build_peak_mb=round(peak_mb()),
                        index_mb=round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20))
        bm25 = index.bm25(k1=1.2, b=0.75, num_results=K, threads=1)
        many = index.bm25(k1=1.2, b=0.75, num_results=K, threads=threads)
        import pandas as pd

        def one(terms):
            res = bm25.search(" ".join(terms))
            return res["docno"].astype(np.int64).to_numpy()

        def batch(qs):
            return many(pd.DataFrame({"qid": [str(i) for i in range(len(qs))], "query": [" ".join(t) for t in qs]}))

        return one, batch, info
    raise SystemExit(f"unknown engine {name!r}")


def batch_threads(threads: int, n_queries: int) -> int:
    """The threads a batch of ``n_queries`` runs on when ``threads`` are asked for: lexrag's own cap
    (:func:`lexrag.index.bm25_kernel.top_k_many`: numba's thread count, at most one a query), which
    the floor takes too so that both batches run on the same number of threads."""
    try:
        import numba

        most = numba.config.NUMBA_NUM_THREADS
    except ImportError:
        most = os.cpu_count() or 1
    return max(1, min(threads, most, max(n_queries, 1)))


FLOOR_FLAGS = ["-O3", "-march=native", "-ffp-contract=off"]


def _floor_lib(work: Path):
    """The floor compiled as well as the compiler can for this CPU: (library, the command that
    built it, a note when ``-march=native`` was refused and plain ``-O3`` used).  ``-ffp-contract=off``
    keeps every multiply and add a separate float32 operation, as numba compiles lexrag's kernel,
    so the scores are the same bits (a fused multiply-add rounds once where lexrag rounds twice)."""
    src, so = work / "floor.c", work / "floor.so"
    src.write_text(FLOOR_C, encoding="utf-8")
    note = ""
    flags = FLOOR_FLAGS
    cc = ["cc", "-shared", "-fPIC", "-pthread", "-o", str(so), str(src)]
    r = subprocess.run(cc[:1] + flags + cc[1:], capture_output=True, text=True)
    if r.returncode:
        flags = [f for f in FLOOR_FLAGS if not f.startswith("-march=")]
        lines = r.stderr.strip().splitlines() or ["no message"]
        why = next((line for line in lines if "error" in line), lines[-1])[:160]
        note = f"cc refused -march=native ({why}): the floor is compiled {' '.join(flags)} instead"
        print(f"note: {note}", file=sys.stderr)
        subprocess.run(cc[:1] + flags + cc[1:], check=True)
    version = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    lib = ctypes.CDLL(str(so))
    lib.search.restype = ctypes.c_int64
    lib.search.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 7
    lib.search_many.restype = ctypes.c_int64
    lib.search_many.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 5 + [ctypes.c_void_p] * 3
    return lib, " ".join(["cc"] + flags) + (f" ({version[0]})" if version else ""), note
