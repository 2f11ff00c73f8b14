#!/usr/bin/env python
"""Benchmark (not a test): the competition's scale through every CPU build and the inference run.

  python scripts/bench_scale.py --sizes 2476315 [--work /tmp/lexrag-scale]

Corpus = synthetic German legal-like court considerations (lexrag.testing.synthetic) citing the real law
keys, plus the law rows: ../shared/data/laws_de.csv with the keys of laws_de_citations.txt
(175,933 rows, as in the competition's laws_de.csv; LEXRAG_BENCH_LAWS / LEXRAG_BENCH_KEYS move
them).  Each phase runs in its own process and reports wall time and peak RSS:

1. ``corpus``: ``build_corpus`` (streamed CSV -> parquet + text blob);
2. ``bm25``: ``build_index("bm25")`` (two-pass build);
3. ``graph``: ``build_index("graph")`` (reference extraction + nested Leiden);
4. ``embeddings``: writes synthetic 1024-d fp16 shards for every document as an embeddings
   artifact of a random 1024-d encoder (not timed as a build: on Kaggle it is a GPU job);
5. ``infer_flat`` / ``infer_ivfpq``: the inference path as the notebook runs it
   (``Artifacts.load`` of corpus, BM25, graph and embeddings, then ``run_pipeline`` over 40
   synthetic questions with seeds, BM25, dense, graph, fusion, count), one dense index kind each.

Artifact sizes on disk are reported after the builds.  ``--phases corpus bm25 graph embeddings
--keep`` builds the artifacts and leaves them for ``scripts/bench_inference.py`` (the inference
notebook's own process over them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import benchkit
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
LAWS = Path(os.environ.get("LEXRAG_BENCH_LAWS", DATA / "laws_de.csv"))
KEYS = Path(os.environ.get("LEXRAG_BENCH_KEYS", DATA / "laws_de_citations.txt"))
DIMS = 1024


def prepare(folder: Path, n: int) -> dict:
    from lexrag.testing.synthetic import write_court_csv

    keys = [k.strip() for k in KEYS.read_text(encoding="utf-8").splitlines() if k.strip()]
    t0 = time.perf_counter()
    write_court_csv(folder / "courts.csv", n, laws=keys[::7])
    return {"courts_csv_gb": round((folder / "courts.csv").stat().st_size / 1e9, 2), "write_csv_s": round(time.perf_counter() - t0)}


def _cfg(**over):
    from lexrag.config import load_config

    return load_config(None, {"runtime.progress": False, **over})


def _du(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e9


def phase(name: str, work: Path, n: int) -> dict:
    art = work / "art"
    t0 = time.perf_counter()
    if name == "corpus":
        from lexrag.index.corpus import build_corpus

        build_corpus(art / "corpus", LAWS, work / "courts.csv", _cfg().corpus, law_keys=KEYS)
        return {"corpus_s": round(time.perf_counter() - t0), "corpus_rss_gb": round(benchkit.peak_rss_mb() / 1024, 2),
                "corpus_gb": round(_du(art / "corpus"), 2)}
    if name in ("bm25", "graph"):
        from lexrag.pipeline.build import build_index

        build_index(name, _cfg(), art / "corpus", art / name)
        return {f"{name}_s": round(time.perf_counter() - t0), f"{name}_rss_gb": round(benchkit.peak_rss_mb() / 1024, 2),
                f"{name}_gb": round(_du(art / name), 2)}
    if name == "embeddings":
        from lexrag.testing import make_tiny_encoder

        from lexrag.artifacts import write_params
        from lexrag.artifacts import corpus_id
        from lexrag.index.corpus import Corpus
        from lexrag.models import model_id

        enc = make_tiny_encoder(work / "encoder", hidden=DIMS, layers=1)
        docs = len(Corpus(art / "corpus"))
        out = art / "embeddings"
        out.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        centers = rng.standard_normal((2000, DIMS)).astype(np.float32)
        shard = 100_000
        n_shards = (docs + shard - 1) // shard
        for i in range(n_shards):
            rows = min(shard, docs - i * shard)
            x = centers[rng.integers(0, 2000, rows)] + 0.7 * rng.standard_normal((rows, DIMS), dtype=np.float32)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            np.save(out / f"shard_{i:05d}.npy", x.astype(np.float16), allow_pickle=False)
        sc = _cfg().semantic
        meta = {"model": model_id(enc), "dims": DIMS, "normalize": True, "max_seq": sc.max_seq, "fields": list(sc.fields),
                "shard_size": shard, "n_docs": docs, "corpus_id": corpus_id(art / "corpus"), "dtype": "float16"}
        write_params(out, "embeddings", "scripts/bench_scale.py", meta, n_docs=docs, n_shards=n_shards)
        (work / "encoder_path.txt").write_text(str(enc))
        return {"embeddings_gb": round(_du(out), 2)}
    if name in ("infer_flat", "infer_ivfpq"):
        from lexrag.pipeline import Artifacts, run_pipeline
        from lexrag.queries import Query
        from lexrag.testing.synthetic import TextSampler

        kind = name.split("_")[1]
        cfg = _cfg(**{"semantic.enabled": True, "semantic.model": (work / "encoder_path.txt").read_text(),
                      "semantic.index": kind, "semantic.device": "cpu", "count.method": "elbow"})
        a = Artifacts.from_folder(art, cfg)
        load_s = time.perf_counter() - t0
        load_rss = benchkit.peak_rss_mb() / 1024
        s = TextSampler(seed=5)
        qs = [Query(f"q{i}", s.text(250) + " Art. 41 OR") for i in range(40)]
        res = run_pipeline(qs, a, cfg)
        return {f"{kind}_load_s": round(load_s), f"{kind}_load_rss_gb": round(load_rss, 2),
                f"{kind}_40q_s": round(res.timings["total"], 1), f"{kind}_rss_gb": round(benchkit.peak_rss_mb() / 1024, 2),
                f"{kind}_stage_s": {k: round(v, 1) for k, v in res.timings.items()}}
    raise ValueError(name)


def table(rows: list[dict]) -> None:
    print("| documents | stage | wall s | peak RSS GB | on disk GB |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        for st in ("corpus", "bm25", "graph"):
            if f"{st}_s" in r:  # the phases --phases ran
                print(f"| {r['n']:,} + laws | {st} build | {r[f'{st}_s']} | {r[f'{st}_rss_gb']} | {r[f'{st}_gb']} |")
        if "embeddings_gb" in r:
            print(f"| | embeddings (synthetic, fp16) | | | {r['embeddings_gb']} |")
        for kind in ("flat", "ivfpq"):
            if f"{kind}_load_s" not in r:
                continue
            print(f"| | inference, {kind}: load | {r[f'{kind}_load_s']} | {r[f'{kind}_load_rss_gb']} | |")
            print(f"| | inference, {kind}: 40 queries | {r[f'{kind}_40q_s']} | {r[f'{kind}_rss_gb']} | |")


if __name__ == "__main__":
    raise SystemExit(benchkit.main(__file__, __doc__, phase, ["corpus", "bm25", "graph", "embeddings", "infer_flat", "infer_ivfpq"],
                                   [2_476_315], "/tmp/lexrag-scale", table, prepare,
                                   inputs=[("the laws (LEXRAG_BENCH_LAWS moves them)", LAWS),
                                           ("the law keys (LEXRAG_BENCH_KEYS moves them)", KEYS)]))
