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
- ``floor``: lexrag's kernel (:mod:`lexrag.index.bm25_kernel`) written out in plain C over the same
  arrays: the same float32 sums, the same long/short split, sampled bar and k-heap, so the same
  top 100 in the same order (best score first, then the lower doc id); compiled here with
  ``cc -O3 -march=native -ffp-contract=off`` (plain ``-O3`` with a note where the compiler refuses
  ``-march=native``), and its batch on the same threads as lexrag's.  What lexrag adds to it is
  what numba's code and the Python around it cost; the run prints the flags and whether its top
  100 equals lexrag's for every query;
- ``bm25s-numpy`` / ``bm25s-numba``: ``bm25s.BM25.retrieve`` over lexrag's own index folder (it
  is bm25s's format), one query a call;
- ``tantivy``: its own index of the documents' lexrag terms (whitespace tokenizer), its BM25
  (k1 1.2, b 0.75: not lexrag's parameters, so its top 100 differs);
- ``pisa``: ``pyterrier-pisa`` (its own index of the same terms, no stemming or stopwords), run
  with ``--pisa-python`` (an interpreter that has it: it needs python-terrier, which the project
  does not install).

Per engine: median milliseconds per long and per short query on one thread, queries per second
on ``--threads`` threads (long queries), agreement of its top 100 with lexrag's (the share of
lexrag's documents it also returns, and the queries whose top 100 is identical, ids and order),
Recall@100 of the long questions (:func:`lexrag.eval.metrics.recall_at_k` over the citations of
the top 100 documents, every gold citation counted, also those the corpus lacks; the mean over
the questions), and for the engines with their own index its build seconds and peak memory.

  python scripts/bench_engines.py --laws ../shared/data/laws_de.csv --synthetic 500000 \\
      --queries ../shared/data/lexam_dev.csv --work /tmp/lexrag-engines --build \\
      --engines lexrag lexrag-numpy floor bm25s-numpy bm25s-numba tantivy pisa --pisa-python /tmp/pisa-venv/bin/python
  python scripts/bench_engines.py --work /tmp/lexrag-engines --load-memory   # the index's memory, copied or mapped
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engine_searchers import K, engine_searchers, peak_mb

import benchkit  # beside this script

ENGINES = ("lexrag", "lexrag-numpy", "floor", "bm25s-numpy", "bm25s-numba", "tantivy", "pisa")

# ---------------------------------------------------------------- preparation (once per work folder)

def prepare(args) -> None:
    """Corpus, lexrag's BM25 index and the analyzed queries in ``--work`` (kept between runs)."""
    work = Path(args.work)
    art = work / "art"
    if not (art / "bm25" / "params.json").is_file():
        from lexrag.testing.synthetic import write_court_csv

        work.mkdir(parents=True, exist_ok=True)
        courts = work / "courts.csv"
        if not courts.is_file():
            write_court_csv(courts, args.synthetic)
        rc = subprocess.run([sys.executable, "-m", "lexrag", "-q", "build", "--laws", args.laws, "--courts", str(courts),
                             "--out", str(art)]).returncode
        if rc:
            raise SystemExit(f"the lexrag build failed ({rc})")
    if not (work / "queries.json").is_file() or "gold_citations" not in json.loads((work / "queries.json").read_text("utf-8")):
        from lexrag.config import load_config
        from lexrag.index.lexical import BM25Index
        from lexrag.queries import load_gold, load_queries

        idx = BM25Index.load(art / "bm25", load_config(None, {}).lexical)
        inverse = {j: t for t, j in idx.retriever.vocab_dict.items()}
        gold = load_gold(args.queries)
        qs = [q for q in load_queries(args.queries) if q.query_id in gold]
        out = {"long": [], "short": [], "gold_citations": []}
        for q in qs:
            for kind, text in (("long", q.text), ("short", " ".join(q.text.split()[:8]))):
                out[kind].append([inverse[j] for j in idx.query_terms(text, dedup=True)])
            out["gold_citations"].append(gold[q.query_id])  # every one, found in the corpus or not
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

# ---------------------------------------------------------------- engines

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
    out = {"build_s": round(time.perf_counter() - t0, 1), "build_peak_mb": round(peak_mb()),
           "index_mb": round(sum(p.stat().st_size for p in (work / "bm25_rebuild").glob("*.npy")) / 2**20)}
    shutil.rmtree(work / "bm25_rebuild")
    return out

def load_memory(work: Path, mmap: bool) -> dict:
    """The anonymous memory (what only freeing gives back) lexrag's loaded index adds to a process,
    its postings copied in or memory-mapped, at load and after the long queries."""
    from lexrag.config import load_config
    from lexrag.index.lexical import BM25Index
    from lexrag.io.procmem import process_memory

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
    row["peak_mb"] = round(peak_mb())
    (work / f"top_{name}.json").write_text(json.dumps(tops), encoding="utf-8")
    return row

def score(work: Path, name: str, citations: list[str], reference: str = "lexrag") -> dict:
    """An engine's top 100 against lexrag's (shared documents; identical lists, ids and order) and
    its Recall@100 by the project's one definition (``recall_at_k`` over citations)."""
    from lexrag.eval.metrics import recall_at_k

    qs = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    tops = json.loads((work / f"top_{name}.json").read_text(encoding="utf-8"))
    if name == "tantivy":
        tops = _tantivy_ids(work, tops)
    ref = json.loads((work / f"top_{reference}.json").read_text(encoding="utf-8"))
    out = {}
    for kind in ("long", "short"):
        agree = [len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(tops[kind], ref[kind]) if b]
        out[f"{kind}_agree"] = round(float(np.mean(agree)), 4)
        out[f"{kind}_identical"] = sum(a == b for a, b in zip(tops[kind], ref[kind]))
        out["queries"] = len(ref[kind])
    recall = [recall_at_k(g, [citations[d] for d in top], K) for g, top in zip(qs["gold_citations"], tops["long"])]
    out["recall100"] = round(float(np.mean(recall)), 4)
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
    from lexrag.io.outputs import check_output_file

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
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
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
    from lexrag.index.corpus import Corpus

    citations = Corpus(work / "art" / "corpus", lookups=False).citations
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
        row.update(score(work, name, citations))
        if name == "lexrag" and args.build:
            row.update(build)
        rows.append(row)
        print(json.dumps(row), flush=True)
    table(rows, args.threads)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return 0

def table(rows: list[dict], threads: int) -> None:
    base = next((r for r in rows if r["engine"] == "floor"), None)
    lex = next((r for r in rows if r["engine"] == "lexrag"), None)
    print(f"| engine | long ms | short ms | long / floor | short / floor | long q/s, {threads} threads | top-100 agreement "
          "long / short | identical top 100 (ids, order) long / short | Recall@100 | build s | build peak MB | index MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        rel = (lambda k: f"{r[k] / base[k]:.2f}") if base else (lambda k: "-")
        print(f"| {r['engine']} | {r['long_ms']:.3f} | {r['short_ms']:.3f} | {rel('long_ms')} | {rel('short_ms')} | "
              f"{r.get('long_qps_threads', '-')} | {r['long_agree']:.3f} / {r['short_agree']:.3f} | "
              f"{r['long_identical']} / {r['short_identical']} of {r['queries']} | {r['recall100']:.4f} | "
              f"{r.get('build_s', '-')} | {r.get('build_peak_mb', '-')} | {r.get('index_mb', '-')} |")
    print("Recall@100: lexrag.eval.metrics.recall_at_k over the long questions' gold citations, all of them, mean per question")
    if lex:
        print(f"lexrag backend: {lex.get('backend')}")
    if base:
        same = base["long_identical"] == base["short_identical"] == base["queries"]
        print(f"floor: compiled {base.get('floor_cc')}; its top 100 equals lexrag's (ids and order) for "
              f"{base['long_identical']} of {base['queries']} long and {base['short_identical']} of {base['queries']} short "
              f"queries{'' if same else ': NOT the same selection, so it is no floor for lexrag'}")
        if base.get("floor_note"):
            print(f"note: {base['floor_note']}")

if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))  # a project error or a disk error: one line, exit 2
