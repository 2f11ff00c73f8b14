#!/usr/bin/env python
"""Benchmark (not a test): lexrag's BM25 beside the engines a researcher would otherwise pick, on
one corpus and one set of queries, one engine at a time, each in its own process.

The corpus is the laws (``--laws``, the real ``laws_de.csv``) plus ``--synthetic`` court
considerations from :mod:`synthetic`; the queries are the questions of ``--queries``
(``lexam_dev.csv``: long) and their first 8 words (short).  Every engine is fed lexrag's terms
(its analyzer: stopwords, Snowball stems, compound parts), each query's distinct terms with
weight 1, so the engines differ only in how they score and select:

- ``lexrag``: :meth:`BM25Index.search_terms` (the compiled kernel when numba is installed);
- ``lexrag-numpy``: the same arrays through the numpy fallback;
- ``floor``: the same algorithm (postings summed into a score array, touched documents listed,
  a k-heap over them) in plain C over the same arrays, compiled here with ``cc -O2``;
- ``bm25s-numpy`` / ``bm25s-numba``: ``bm25s.BM25.retrieve`` over lexrag's own index folder (it
  is bm25s's format), one query a call;
- ``tantivy``: its own index of the documents' lexrag terms (whitespace tokenizer), its BM25
  (k1 1.2, b 0.75: not lexrag's parameters, so its top 100 differs);
- ``pisa``: ``pyterrier-pisa`` (its own index of the same terms, no stemming or stopwords), run
  with ``--pisa-python`` (an interpreter that has it: it needs python-terrier, which the project
  does not install).

Per engine: median milliseconds per long and per short query on one thread, queries per second
on ``--threads`` threads (long queries), agreement of its top 100 with lexrag's, Recall@100 of
the questions' gold, and for the engines with their own index its build seconds and peak memory.

  python scripts/bench_engines.py --laws ../shared/data/laws_de.csv --synthetic 500000 \\
      --queries ../shared/data/lexam_dev.csv --work /tmp/lexrag-engines --build \\
      --engines lexrag lexrag-numpy floor bm25s-numpy bm25s-numba tantivy pisa --pisa-python /tmp/pisa-venv/bin/python
  python scripts/bench_engines.py --work /tmp/lexrag-engines --load-memory   # the index's memory, copied or mapped
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ENGINES = ("lexrag", "lexrag-numpy", "floor", "bm25s-numpy", "bm25s-numba", "tantivy", "pisa")
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


# ---------------------------------------------------------------- preparation (once per work folder)


def prepare(args) -> None:
    """Corpus, lexrag's BM25 index and the analyzed queries in ``--work`` (kept between runs)."""
    work = Path(args.work)
    art = work / "art"
    if not (art / "bm25" / "params.json").is_file():
        from lexrag.synthetic import write_court_csv

        work.mkdir(parents=True, exist_ok=True)
        courts = work / "courts.csv"
        if not courts.is_file():
            write_court_csv(courts, args.synthetic)
        rc = subprocess.run([sys.executable, "-m", "lexrag", "-q", "build", "--laws", args.laws, "--courts", str(courts),
                             "--out", str(art)]).returncode
        if rc:
            raise SystemExit(f"the lexrag build failed ({rc})")
    if not (work / "queries.json").is_file():
        from lexrag.config import load_config
        from lexrag.index.corpus import Corpus
        from lexrag.index.lexical import BM25Index
        from lexrag.queries import load_gold, load_queries

        idx = BM25Index.load(art / "bm25", load_config(None, {}).lexical)
        inverse = {j: t for t, j in idx.retriever.vocab_dict.items()}
        corpus = Corpus(art / "corpus", lookups=False)
        where: dict[str, list[int]] = {}
        for d, c in enumerate(corpus.citations):
            where.setdefault(c, []).append(d)
        gold = load_gold(args.queries)
        qs = [q for q in load_queries(args.queries) if q.query_id in gold]
        out = {"long": [], "short": [], "gold": []}
        for q in qs:
            for kind, text in (("long", q.text), ("short", " ".join(q.text.split()[:8]))):
                out[kind].append([inverse[j] for j in idx.query_terms(text, dedup=True)])
            out["gold"].append(sorted({d for c in gold[q.query_id] for d in where.get(c, [])}))
        (work / "queries.json").write_text(json.dumps(out), encoding="utf-8")
    if {"tantivy", "pisa"} & set(args.engines) and not (work / "doc_terms.txt").is_file():
        write_doc_terms(work)


def write_doc_terms(work: Path) -> None:
    """``doc_terms.txt``: every document's lexrag terms (its analyzer over the fields BM25 indexes),
    one line a document in doc order, for the engines that build their own index."""
    from lexrag.config import load_config
    from lexrag.index.corpus import Corpus
    from lexrag.index.lexical import BM25Index

    cfg = load_config(None, {}).lexical
    idx = BM25Index.load(work / "art" / "bm25", cfg)
    corpus = Corpus(work / "art" / "corpus", lookups=False)
    tmp = work / "doc_terms.txt.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for batch in corpus.iter_texts(fields=cfg.fields):
            for text in batch:
                f.write(" ".join(idx.analyzer(text)) + "\n")
    tmp.replace(work / "doc_terms.txt")


def doc_terms(work: Path):
    with open(work / "doc_terms.txt", encoding="utf-8") as f:
        for line in f:
            yield line.split()


# ---------------------------------------------------------------- engines


def _peak_mb() -> float:
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
            info.update(build_s=round(time.perf_counter() - t0, 1), build_peak_mb=round(_peak_mb()),
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
            info.update(build_s=round(time.perf_counter() - t0, 1), build_peak_mb=round(_peak_mb()),
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


def build_lexrag(work: Path) -> dict:
    """lexrag's BM25 build over the corpus (analysis included), timed, into a scratch folder."""
    import shutil

    from lexrag.config import load_config
    from lexrag.index.corpus import Corpus
    from lexrag.index.bm25_build import build_bm25

    cfg = load_config(None, {}).lexical
    corpus = Corpus(work / "art" / "corpus", lookups=False)
    t0 = time.perf_counter()
    build_bm25(corpus.iter_texts(fields=cfg.fields), work / "bm25_rebuild", cfg)
    out = {"build_s": round(time.perf_counter() - t0, 1), "build_peak_mb": round(_peak_mb()),
           "index_mb": round(sum(p.stat().st_size for p in (work / "bm25_rebuild").glob("*.npy")) / 2**20)}
    shutil.rmtree(work / "bm25_rebuild")
    return out


def load_memory(work: Path, mmap: bool) -> dict:
    """The anonymous memory (what only freeing gives back) lexrag's loaded index adds to a process,
    its postings copied in or memory-mapped, at load and after the long queries."""
    from lexrag.config import load_config
    from lexrag.index.lexical import BM25Index
    from lexrag.procmem import process_memory

    qs = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    before = process_memory()
    idx = BM25Index.load(work / "art" / "bm25", load_config(None, {}).lexical, mmap=mmap)
    loaded = process_memory()
    vocab = idx.retriever.vocab_dict
    for terms in qs["long"]:
        idx.search_terms({vocab[t]: 1.0 for t in terms}, K)
    after = process_memory()
    mb = 1024
    return {"mmap": mmap, "anon_load_mb": round((loaded["anon"] - before["anon"]) * mb),
            "anon_after_queries_mb": round((after["anon"] - before["anon"]) * mb), "file_mb": round(after["file"] * mb)}


def run_engine(name: str, work: Path, threads: int) -> dict:
    if name == "lexrag-build":
        return build_lexrag(work)
    if name.startswith("load-"):
        return load_memory(work, name == "load-mmap")
    qs = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    search, batch, info = engine_searchers(name, work, threads)

    def one(terms):  # a query none of whose words is indexed finds nothing, in every engine
        return search(terms) if terms else np.empty(0, dtype=np.int64)

    info["load_s"] = round(time.perf_counter() - t0, 2)
    built = work / f"build_{name}.json"  # an engine's own index is built once; its build numbers kept beside it
    if "build_s" in info:
        built.write_text(json.dumps(info), encoding="utf-8")
    elif built.is_file():
        info.update({k: v for k, v in json.loads(built.read_text(encoding="utf-8")).items() if k.startswith(("build", "index"))})
    for terms in qs["long"] + qs["short"]:
        one(terms)  # warm, every engine alike: compiled code, and every posting the queries read in memory
    if batch is not None:
        batch([t for t in qs["long"][:8] if t])
    row: dict = {"engine": name, **info}
    tops = {}
    for kind in ("long", "short"):
        lat, got = [], []
        for terms in qs[kind]:
            t1 = time.perf_counter()
            got.append(one(terms))
            lat.append(time.perf_counter() - t1)
        row[f"{kind}_ms"] = round(float(np.median(lat)) * 1000, 4)
        tops[kind] = [np.asarray(g, dtype=np.int64).tolist() for g in got]
    if batch is not None:
        asked = [t for t in qs["long"] if t]
        t1 = time.perf_counter()
        batch(asked)
        row["long_qps_threads"] = round(len(asked) / (time.perf_counter() - t1), 1)
    row["peak_mb"] = round(_peak_mb())
    (work / f"top_{name}.json").write_text(json.dumps(tops), encoding="utf-8")
    return row


def score(work: Path, name: str, reference: str = "lexrag") -> dict:
    qs = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    tops = json.loads((work / f"top_{name}.json").read_text(encoding="utf-8"))
    if name == "tantivy":
        tops = _tantivy_ids(work, tops)
    ref = json.loads((work / f"top_{reference}.json").read_text(encoding="utf-8"))
    out = {}
    for kind in ("long", "short"):
        agree = [len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(tops[kind], ref[kind]) if b]
        out[f"{kind}_agree"] = round(float(np.mean(agree)), 4)
    found = sum(len(set(g) & set(t)) for g, t in zip(qs["gold"], tops["long"]))
    out["recall100"] = round(found / max(sum(len(g) for g in qs["gold"]), 1), 4)
    return out


def _tantivy_ids(work: Path, tops: dict) -> dict:
    """tantivy's (segment, doc) addresses -> lexrag doc ids, read from its stored field."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="ws")
    builder.add_integer_field("doc", stored=True, indexed=False)
    index = tantivy.Index(builder.build(), path=str(work / "tantivy"), reuse=True)
    index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    searcher = index.searcher()
    return {kind: [[searcher.doc(tantivy.DocAddress(a >> 32, a & 0xFFFFFFFF))["doc"][0] for a in top] for top in tops[kind]]
            for kind in ("long", "short")}


def _check_args(args, work: Path) -> str | None:
    """What is wrong with the arguments, before hours of building; None when nothing."""
    from lexrag.errors import LexragError
    from lexrag.outputs import check_output_file

    if args.threads < 1 or args.synthetic < 0:
        return "--threads must be 1 or more and --synthetic 0 or more"
    if work.exists() and not work.is_dir():
        return f"--work {work} is a file; give a folder (it keeps the corpus and indexes between runs)"
    if not (work / "queries.json").is_file():  # the first run builds: its inputs must be there
        for flag, path in (("--laws", args.laws), ("--queries", args.queries)):
            if not Path(path).is_file():
                return f"{flag} {path}: not a file"
    if args.json:
        try:
            check_output_file(args.json, "--json", {"--laws": args.laws, "--queries": args.queries}, {"--work": work},
                              "engines.jsonl")
        except LexragError as e:
            return str(e)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laws", default="../shared/data/laws_de.csv")
    ap.add_argument("--synthetic", type=int, default=500_000, help="synthetic court considerations beside the laws")
    ap.add_argument("--queries", default="../shared/data/lexam_dev.csv")
    ap.add_argument("--work", default="/tmp/lexrag-engines", help="kept between runs: the corpus and indexes are built once")
    ap.add_argument("--engines", nargs="*", choices=ENGINES, default=[e for e in ENGINES if e != "pisa"])
    ap.add_argument("--threads", type=int, default=2, help="threads of the batch measurement")
    ap.add_argument("--pisa-python", help="an interpreter with pyterrier-pisa (for the pisa engine)")
    ap.add_argument("--build", action="store_true", help="also time lexrag's BM25 build (analysis included) beside the "
                    "builds of tantivy and PISA (over terms analyzed beforehand)")
    ap.add_argument("--load-memory", action="store_true", help="only: the anonymous memory lexrag's loaded index adds, "
                    "its postings copied in against memory-mapped")
    ap.add_argument("--json", help="append the rows to this JSON-lines file")
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)
    if args.engine:
        print(json.dumps(run_engine(args.engine, work, args.threads)))
        return 0
    problem = _check_args(args, work)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    prepare(args)
    if args.load_memory:
        for name in ("load-copy", "load-mmap"):
            r = subprocess.run([sys.executable, __file__, "--engine", name, "--work", str(work)], capture_output=True, text=True)
            print(r.stdout.strip().splitlines()[-1] if r.returncode == 0 else f"{name}: failed {r.stderr[-300:]}")
        return 0
    rows = []
    for name in ["lexrag"] + [e for e in args.engines if e != "lexrag"]:
        if name == "lexrag" and args.build:
            r = subprocess.run([sys.executable, __file__, "--engine", "lexrag-build", "--work", str(work)], capture_output=True,
                               text=True)
            build = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
        py = args.pisa_python if name == "pisa" else sys.executable
        env = {**os.environ, **({"LEXRAG_BM25_BACKEND": "numpy"} if name == "lexrag-numpy" else {})}
        r = subprocess.run([py, __file__, "--engine", name, "--work", str(work), "--threads", str(args.threads)],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            print(f"{name}: failed ({r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})", file=sys.stderr)
            continue
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row.update(score(work, name))
        if name == "lexrag" and args.build:
            row.update(build)
        rows.append(row)
        print(json.dumps(row), flush=True)
    table(rows)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return 0


def table(rows: list[dict]) -> None:
    base = next((r for r in rows if r["engine"] == "floor"), None)
    lex = next((r for r in rows if r["engine"] == "lexrag"), None)
    print("| engine | long ms | short ms | long / floor | short / floor | long q/s on threads | top-100 agreement long / short "
          "| Recall@100 | build s | build peak MB | index MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        rel = (lambda k: f"{r[k] / base[k]:.2f}") if base else (lambda k: "-")
        print(f"| {r['engine']} | {r['long_ms']:.3f} | {r['short_ms']:.3f} | {rel('long_ms')} | {rel('short_ms')} | "
              f"{r.get('long_qps_threads', '-')} | {r['long_agree']:.3f} / {r['short_agree']:.3f} | {r['recall100']:.4f} | "
              f"{r.get('build_s', '-')} | {r.get('build_peak_mb', '-')} | {r.get('index_mb', '-')} |")
    if lex:
        print(f"lexrag backend: {lex.get('backend')}")


if __name__ == "__main__":
    raise SystemExit(main())
