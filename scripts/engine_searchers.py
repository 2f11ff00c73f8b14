"""The search engines scripts/bench_engines.py compares, each behind one shape: ``engine_searchers``
gives an engine's one-query and many-query search over the documents' lexrag terms (the top
:data:`K` document ids), building the engine's own index where it has one."""

from __future__ import annotations

import ctypes
import subprocess
import time
from pathlib import Path

import numpy as np

K = 100


FLOOR_C = r"""
#include <stdint.h>
#include <string.h>
static inline int worse(float s1, int64_t d1, float s2, int64_t d2) { return s1 < s2 || (s1 == s2 && d1 > d2); }
/* scores zeroed by the caller; returns the number of documents written to out (best first not required) */
int64_t search(const float *data, const int32_t *indices, const int64_t *starts, const int64_t *ends,
               const float *weights, int64_t nterms, float *scores, int32_t *touched, int64_t k,
               float *hs, int64_t *hd) {
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
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = touched[i]; float s = scores[d]; int64_t j;
        if (m < k) {
            j = m++;
            while (j > 0) { int64_t q = (j - 1) / 2; if (!worse(s, d, hs[q], hd[q])) break; hs[j] = hs[q]; hd[j] = hd[q]; j = q; }
            hs[j] = s; hd[j] = d;
        } else if (worse(hs[0], hd[0], s, d)) {
            j = 0;
            for (;;) {
                int64_t c = 2 * j + 1; if (c >= m) break;
                if (c + 1 < m && worse(hs[c + 1], hd[c + 1], hs[c], hd[c])) c++;
                if (!worse(hs[c], hd[c], s, d)) break;
                hs[j] = hs[c]; hd[j] = hd[c]; j = c;
            }
            hs[j] = s; hd[j] = d;
        }
    }
    for (int64_t i = 0; i < n; i++) scores[touched[i]] = 0.0f;  /* ready for the next query */
    return m;
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
        lib = _floor_lib(work)
        data, indices, indptr = (np.ascontiguousarray(a) for a in (data, indices, indptr))
        scores = np.zeros(idx.n_docs, dtype=np.float32)
        touched = np.empty(len(indices), dtype=np.int32)
        hs, hd = np.empty(K, np.float32), np.empty(K, np.int64)
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731

        def one(terms):
            ids = np.array([vocab[t] for t in terms], dtype=np.int64)
            starts, ends = indptr[ids].astype(np.int64), indptr[ids + 1].astype(np.int64)
            w = np.ones(len(ids), dtype=np.float32)
            m = lib.search(ptr(data), ptr(indices), ptr(starts), ptr(ends), ptr(w), len(ids), ptr(scores), ptr(touched),
                           K, ptr(hs), ptr(hd))
            order = np.lexsort((hd[:m], -hs[:m]))
            return hd[:m][order]

        return one, None, info
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


def _floor_lib(work: Path):
    src, so = work / "floor.c", work / "floor.so"
    src.write_text(FLOOR_C, encoding="utf-8")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.search.restype = ctypes.c_int64
    lib.search.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                   ctypes.c_void_p, ctypes.c_void_p]
    return lib
