"""The pipeline: artifacts in, per-query citation lists out.

Stages have one shape: content stages ``stage(queries, artifacts, config) -> Ranking`` (citation
seeds, BM25), then the graph stage, which takes each query's seed candidates (the top of a first
fusion of the content signals) and returns one Ranking per graph signal.  Stages switched off in
the config are simply not run.  All signals are fused by weighted RRF with the cross-signal boost,
documents are mapped to unique corpus citation strings, and the count stage cuts each list.
Every stage's output is validated at the border.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from lexrag import graph_signals as gs
from lexrag.artifacts import read_params
from lexrag.config import GRAPH_SIGNALS, Config
from lexrag.corpus import Corpus, build_corpus
from lexrag.count import choose_count
from lexrag.fusion import reciprocal_rank_fusion
from lexrag.graph import CitationGraph, build_graph
from lexrag.lexical import BM25Index, build_bm25
from lexrag.prior import TrainingPrior, build_prior
from lexrag.queries import Query
from lexrag.ranking import Ranking

__all__ = ["build_artifacts", "build_index", "Artifacts", "RunResult", "run_pipeline", "corpus_id", "GRAPH_SIGNALS"]

log = print



def corpus_id(corpus_dir: str | Path) -> str:
    """Identity of a corpus artifact: a hash of its recorded sources and doc count."""
    p = read_params(corpus_dir, "corpus")
    blob = json.dumps({"sources": p.get("sources"), "n_docs": p.get("n_docs")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_index(name: str, cfg: Config, corpus_dir: str | Path, dest: str | Path, corpus: Corpus | None = None, **kw):
    """Build artifact ``name`` (``bm25`` | ``embeddings`` | ``graph``) over the corpus artifact at
    ``corpus_dir`` into ``dest`` with the config's parameters.  The one builder call shared by
    :func:`build_artifacts`, ``build_datasets.py`` and the notebooks; ``kw`` go to
    ``build_embeddings`` (``max_shards``, ``time_budget_s``, ``resume_from``, ``model``)."""
    corpus = corpus or Corpus(corpus_dir)
    cid = corpus_id(corpus_dir)
    progress = cfg.runtime.progress
    if name == "bm25":
        return build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), dest, cfg.lexical, corpus_id=cid,
                          progress=progress, n_docs_hint=len(corpus))
    if name == "graph":
        return build_graph(corpus, dest, cfg.graph.resolutions, cfg.graph.leiden_seed, corpus_id=cid, progress=progress)
    if name == "embeddings":
        from lexrag.semantic import build_embeddings

        sc = cfg.semantic
        return build_embeddings(corpus, kw.pop("model", sc.model), dest, corpus_id=cid, shard_size=sc.shard_size,
                                batch_size=sc.batch_size, max_seq=sc.max_seq, fields=sc.fields, device=sc.device,
                                fp16=sc.fp16, devices=sc.devices or None, progress=progress, **kw)
    raise ValueError(f"no index artifact named {name!r} (bm25 | embeddings | graph)")


def build_artifacts(
    cfg: Config,
    laws: str | Path,
    out_dir: str | Path,
    courts: str | Path | None = None,
    law_keys: str | Path | None = None,
    train: str | Path | None = None,
) -> dict:
    """Build every artifact this config needs under ``out_dir``: ``corpus/``, then ``bm25/``,
    ``embeddings/`` and ``graph/`` as switched on, and ``prior/`` when a training file is given."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    report = build_corpus(out / "corpus", laws, courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=law_keys)
    corpus = Corpus(out / "corpus")
    log(f"corpus: {len(corpus)} documents in {time.perf_counter() - t0:.1f}s")
    for name, on in (("bm25", cfg.lexical.enabled), ("embeddings", cfg.semantic.enabled), ("graph", cfg.graph.enabled)):
        if on:
            t = time.perf_counter()
            result = build_index(name, cfg, out / "corpus", out / name, corpus)
            note = " (INCOMPLETE: run again to resume)" if result is False else ""
            log(f"{name}: built in {time.perf_counter() - t:.1f}s{note}")
    if train:
        p = build_prior(train, out / "prior")
        log(f"prior: {len(p)} training queries from {train}")
    return report


@dataclass
class Artifacts:
    """Everything a run loads, loaded once."""

    corpus: Corpus
    bm25: BM25Index | None
    graph: CitationGraph | None = None
    prior: TrainingPrior | None = None
    encoder: object | None = None  # a SentenceTransformer
    dense: object | None = None  # lexrag.semantic.DenseIndex
    reranker: object | None = None  # lexrag.rerank.Reranker

    @classmethod
    def load(cls, folder: str | Path | None, cfg: Config, paths=None) -> "Artifacts":
        """Load from ``folder`` (holding ``corpus/``, ``bm25/``, ...) or, when ``paths`` (a
        :class:`lexrag.paths.Paths`) is given, from wherever the resolver finds each artifact.
        Only the artifacts the config switches on are loaded; a missing one is an error."""
        locate = (lambda name: paths.artifact(name)) if paths is not None else (lambda name: Path(folder) / name)
        corpus_dir = locate("corpus")
        corpus = Corpus(corpus_dir)
        cid = corpus_id(corpus_dir)
        bm25 = BM25Index.load(locate("bm25"), cfg.lexical, corpus_id=cid) if cfg.lexical.enabled else None
        graph = (CitationGraph.load(locate("graph"), len(corpus), corpus_id=cid, resolutions=cfg.graph.resolutions)
                 if cfg.graph.enabled else None)
        prior = TrainingPrior.load(locate("prior")) if cfg.prior.enabled else None
        model = (lambda name: paths.model(name)) if paths is not None else Path
        encoder = dense = reranker = None
        if cfg.semantic.enabled:
            from lexrag.semantic import DenseIndex, Embeddings, load_encoder

            sc = cfg.semantic
            encoder = load_encoder(model(sc.model), sc.device, sc.fp16, sc.max_seq)
            emb = Embeddings(locate("embeddings"), len(corpus), cid, model(sc.model),
                             expected={"fields": list(sc.fields), "max_seq": sc.max_seq})
            dense = DenseIndex(emb, sc.index, sc.nlist, sc.pq_m, sc.nprobe, sc.rescore_k)
        if cfg.rerank.enabled:
            from lexrag.rerank import Reranker

            rc = cfg.rerank
            reranker = Reranker(model(rc.model), rc.device, rc.max_length, rc.batch_size)
        return cls(corpus=corpus, bm25=bm25, graph=graph, prior=prior, encoder=encoder, dense=dense, reranker=reranker)


Stage = Callable[[list[Query], Artifacts, Config], Ranking]


def seed_stage(queries: list[Query], art: Artifacts, cfg: Config) -> Ranking:
    """Citations named in the query, mapped onto corpus strings, in order of mention."""
    out = Ranking("citation_seeds", "seed")
    index = art.corpus.index
    for q in queries:
        docs: list[int] = []
        for c in index.resolve_text(q.text, expand_decisions=cfg.seeds.expand_decisions):
            docs.extend(d for d in art.corpus.docs_of(c) if d not in docs)
        out.add(q.query_id, docs, [1.0 / (i + 1) for i in range(len(docs))])
    return out


def bm25_query_stage(queries: list[Query], art: Artifacts, cfg: Config) -> Ranking:
    """BM25 over the whole query text, top-k."""
    assert art.bm25 is not None
    out = Ranking("bm25_query", "lexical")
    for q in queries:
        ids, scores = art.bm25.search(q.text, cfg.lexical.top_k, dedup=cfg.lexical.query_dedup)
        out.add(q.query_id, ids, scores)
    return out


def dense_query_stage(queries: list[Query], art: Artifacts, cfg: Config) -> Ranking:
    """Dense retrieval with the query as written (English on Kaggle: the cross-lingual bridge).
    The German-translation and HyDE variants join once the LLM stage provides those texts."""
    assert art.encoder is not None and art.dense is not None
    out = Ranking("dense_query", "semantic")
    vecs = art.encoder.encode([q.text for q in queries], normalize_embeddings=True, convert_to_numpy=True,
                              show_progress_bar=False)
    ids, scores = art.dense.search(vecs, cfg.semantic.top_k)
    for q, i, s in zip(queries, ids, scores):
        keep = i >= 0
        out.add(q.query_id, i[keep], s[keep])
    return out


def content_stages(cfg: Config) -> list[Stage]:
    stages: list[Stage] = []
    if cfg.seeds.enabled:
        stages.append(seed_stage)
    if cfg.lexical.enabled:
        stages.append(bm25_query_stage)
    if cfg.semantic.enabled:
        stages.append(dense_query_stage)
    return stages


def graph_stage(query: Query, seed_hits: list[tuple[int, float]], art: Artifacts, cfg: Config) -> list[Ranking]:
    """Graph and prior signals for one query from its seed candidates (top ``graph.seed_k``)."""
    gc = cfg.graph
    out: list[Ranking] = []
    seeds = seed_hits[: gc.seed_k]
    if art.graph is not None and seeds:
        g = art.graph
        on = {s for s in GRAPH_SIGNALS if gc.signals.get(s, True)}
        nodes, w = gs.seed_vector(g, seeds, gc.seed_k)
        pref = art.bm25.scores(query.text, cfg.lexical.query_dedup) if art.bm25 is not None else None

        def emit(name: str, node_hits: list[tuple[int, float]]) -> None:
            r = Ranking(name, "graph")
            docs = gs.nodes_to_docs(g, node_hits, pref, gc.docs_per_node, gc.top_k)
            r.hits[query.query_id] = docs
            out.append(r)

        if "ppr" in on:
            emit("ppr", gs.top_nodes(gs.personalized_pagerank(g, nodes, w, gc.alpha), nodes, gc.top_k))
        if on & {"hits_authority", "hits_hub"}:
            sub, hub, auth = gs.hits(g, nodes, gc.hits_max_nodes)
            for name, vec in (("hits_authority", auth), ("hits_hub", hub)):
                if name in on:
                    order = [i for i in np.lexsort((sub, -vec)) if vec[i] > 0][: gc.top_k]
                    emit(name, [(int(sub[i]), float(vec[i])) for i in order])
        if "coupling" in on:
            emit("coupling", gs.top_nodes(gs.bibliographic_coupling(g, nodes, w), nodes, gc.top_k))
        if "cocitation" in on:
            emit("cocitation", gs.top_nodes(gs.co_citation(g, nodes, w), nodes, gc.top_k))
        if "community" in on:
            emit("community", gs.community_members(g, nodes, w, g.level_of(gc.community_resolution), gc.top_k))
        if "siblings" in on:
            out.append(Ranking("siblings", "graph", {query.query_id: gs.siblings(g, seeds, gc.seed_k, gc.top_k, gc.siblings_kinds)}))
    if art.prior is not None:
        pc = cfg.prior
        total = sum(max(s, 0.0) for _, s in seeds) or 1.0
        seed_cits = [(art.corpus.citations[d], max(s, 0.0) / total) for d, s in seeds]
        for name, cits in (
            ("prior_cocited", art.prior.cocited(seed_cits, query.query_id, pc.min_count, pc.top_k) if seeds else []),
            ("prior_frequent", art.prior.frequent(query.query_id, pc.min_count, pc.top_k)),
        ):
            docs: dict[int, float] = {}
            for c, score in cits:
                for s in art.corpus.index.resolve(c):
                    for d in art.corpus.docs_of(s):
                        docs.setdefault(d, score)
            out.append(Ranking(name, "graph", {query.query_id: sorted(docs.items(), key=lambda t: (-t[1], t[0]))}))
    return out


@dataclass
class RunResult:
    query_ids: list[str]
    predictions: dict[str, list[str]]
    ranked: dict[str, list[str]]
    signals: list[Ranking]
    fused: Ranking
    timings: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)


def _to_citations(hits: list[tuple[int, float]], corpus: Corpus) -> tuple[list[str], list[float]]:
    seen: dict[str, float] = {}
    for doc, score in hits:
        c = corpus.citations[doc]
        if c not in seen:
            seen[c] = score
    return list(seen), list(seen.values())


def _fuse(signals: list[Ranking], cfg: Config, boost: float, n: int) -> Ranking:
    return reciprocal_rank_fusion(
        signals, rrf_k=cfg.fusion.rrf_k, weights=cfg.fusion.weights, default_weight=cfg.fusion.default_weight,
        depth=cfg.fusion.depth, boost=boost, boost_exclude=frozenset(cfg.fusion.boost_exclude),
    ).validate(n_docs=n)


def run_pipeline(queries: list[Query], art: Artifacts, cfg: Config) -> RunResult:
    """Run the configured stages over ``queries``.

    The time budget (``runtime.time_budget_s``) is checked between queries; once it runs out the
    remaining queries get the citation-seed signal alone (cheap) and are listed in ``degraded``,
    so a submission is always complete.
    """
    t_start = time.perf_counter()
    budget = cfg.runtime.time_budget_s
    stages = content_stages(cfg)
    use_graph = art.graph is not None or art.prior is not None
    timings: dict[str, float] = {}
    signals: dict[str, Ranking] = {}
    degraded: list[str] = []
    n = len(art.corpus)

    def collect(r: Ranking, dt: float) -> None:
        r.validate(n_docs=n)
        timings[r.signal] = timings.get(r.signal, 0.0) + dt
        signals.setdefault(r.signal, Ranking(r.signal, r.family)).hits.update(r.hits)

    for q in (q for q in queries if q.text):
        over = budget > 0 and time.perf_counter() - t_start > budget
        content: list[Ranking] = []
        for stage in stages:
            if over and stage is not seed_stage:
                continue
            t0 = time.perf_counter()
            r = stage([q], art, cfg)
            collect(r, time.perf_counter() - t0)
            content.append(r)
        if over:
            degraded.append(q.query_id)
        elif use_graph:
            t0 = time.perf_counter()
            seeds = _fuse(content, cfg, 1.0, n).hits.get(q.query_id, [])
            for r in graph_stage(q, seeds, art, cfg):
                collect(r, 0.0)
            timings["graph"] = timings.get("graph", 0.0) + time.perf_counter() - t0
    if degraded:
        warnings.warn(f"time budget of {budget}s ran out: {len(degraded)} queries answered from citation seeds only")
    t0 = time.perf_counter()
    fused = _fuse(list(signals.values()), cfg, cfg.fusion.boost, n)
    timings["fusion"] = time.perf_counter() - t0
    final = fused
    if art.reranker is not None:
        t0 = time.perf_counter()
        final = Ranking("rerank", "rerank")
        for q in queries:
            hits = fused.hits.get(q.query_id, [])
            if budget > 0 and time.perf_counter() - t_start > budget and q.query_id not in degraded:
                degraded.append(q.query_id)  # out of time: keep the fused order, skip the reranker
            if q.query_id in degraded or not hits:
                final.hits[q.query_id] = hits
                continue
            ids = [d for d, _ in hits[: cfg.rerank.top_n]]
            texts = [t or art.corpus.citations[d] for d, t in zip(ids, art.corpus.texts(ids))]
            final.hits[q.query_id] = art.reranker.rerank(q.text, ids, texts, cfg.rerank.tau)
        final.validate(n_docs=n)
        timings["rerank"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    predictions: dict[str, list[str]] = {}
    ranked: dict[str, list[str]] = {}
    for q in queries:
        cits, scores = _to_citations(final.hits.get(q.query_id, []), art.corpus)
        k = choose_count(np.asarray(scores), cfg.count.method, cfg.count.k, cfg.count.min_k, cfg.count.max_k)
        ranked[q.query_id] = cits
        predictions[q.query_id] = cits[:k]
    timings["count"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return RunResult([q.query_id for q in queries], predictions, ranked, list(signals.values()), final, timings, degraded)
