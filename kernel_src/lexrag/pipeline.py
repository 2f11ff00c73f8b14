"""The pipeline: artifacts in, per-query citation lists out.

Stages have one shape, ``stage(queries, state) -> Ranking``; the list of signal stages comes
from the config (a stage switched off is simply not in the list).  Signals are fused by
weighted RRF, documents are mapped to unique corpus citation strings, and the count stage cuts
each list.  Every stage's output is validated at the border.
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

from lexrag.artifacts import read_params
from lexrag.config import Config
from lexrag.corpus import Corpus, build_corpus
from lexrag.count import choose_count
from lexrag.fusion import reciprocal_rank_fusion
from lexrag.lexical import BM25Index, build_bm25
from lexrag.queries import Query
from lexrag.ranking import Ranking

__all__ = ["build_artifacts", "Artifacts", "RunResult", "run_pipeline", "corpus_id"]

log = print


def corpus_id(corpus_dir: str | Path) -> str:
    """Identity of a corpus artifact: a hash of its recorded sources and doc count."""
    p = read_params(corpus_dir, "corpus")
    blob = json.dumps({"sources": p.get("sources"), "n_docs": p.get("n_docs")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_artifacts(
    cfg: Config, laws: str | Path, out_dir: str | Path, courts: str | Path | None = None, law_keys: str | Path | None = None
) -> dict:
    """Build every artifact this config needs under ``out_dir``: ``corpus/`` then ``bm25/``."""
    out = Path(out_dir)
    t0 = time.perf_counter()
    report = build_corpus(out / "corpus", laws, courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=law_keys)
    corpus = Corpus(out / "corpus")
    t1 = time.perf_counter()
    log(f"corpus: {len(corpus)} documents in {t1 - t0:.1f}s")
    if cfg.lexical.enabled:
        build_bm25(
            corpus.iter_texts(fields=cfg.lexical.fields),
            out / "bm25",
            cfg.lexical,
            corpus_id=corpus_id(out / "corpus"),
            progress=cfg.runtime.progress,
            n_docs_hint=len(corpus),
        )
        log(f"bm25: built in {time.perf_counter() - t1:.1f}s")
    return report


@dataclass
class Artifacts:
    """Everything a run loads, loaded once."""

    corpus: Corpus
    bm25: BM25Index | None

    @classmethod
    def load(cls, folder: str | Path, cfg: Config, paths=None) -> "Artifacts":
        """Load from ``folder`` (holding ``corpus/`` and ``bm25/``) or, when ``paths`` (a
        :class:`lexrag.paths.Paths`) is given, from wherever the resolver finds each artifact."""
        locate = (lambda name: paths.artifact(name)) if paths is not None else (lambda name: Path(folder) / name)
        corpus_dir = locate("corpus")
        corpus = Corpus(corpus_dir)
        bm25 = BM25Index.load(locate("bm25"), cfg.lexical, corpus_id=corpus_id(corpus_dir)) if cfg.lexical.enabled else None
        return cls(corpus=corpus, bm25=bm25)


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


def signal_stages(cfg: Config) -> list[Stage]:
    stages: list[Stage] = []
    if cfg.seeds.enabled:
        stages.append(seed_stage)
    if cfg.lexical.enabled:
        stages.append(bm25_query_stage)
    return stages


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


def run_pipeline(queries: list[Query], art: Artifacts, cfg: Config) -> RunResult:
    """Run the configured stages over ``queries``.

    The time budget (``runtime.time_budget_s``) is checked between queries; once it runs out the
    remaining queries get the citation-seed signal alone (cheap) and are listed in ``degraded``,
    so a submission is always complete.
    """
    t_start = time.perf_counter()
    budget = cfg.runtime.time_budget_s
    stages = signal_stages(cfg)
    timings: dict[str, float] = {}
    signals: dict[str, Ranking] = {}
    degraded: list[str] = []
    n = len(art.corpus)
    active = [q for q in queries if q.text]
    for q in active:
        over = budget > 0 and time.perf_counter() - t_start > budget
        for stage in stages:
            if over and stage is not seed_stage:
                continue
            t0 = time.perf_counter()
            r = stage([q], art, cfg).validate(n_docs=n)
            timings[r.signal] = timings.get(r.signal, 0.0) + time.perf_counter() - t0
            signals.setdefault(r.signal, Ranking(r.signal, r.family)).hits.update(r.hits)
        if over:
            degraded.append(q.query_id)
    if degraded:
        warnings.warn(f"time budget of {budget}s ran out: {len(degraded)} queries answered from citation seeds only")
    t0 = time.perf_counter()
    fused = reciprocal_rank_fusion(
        list(signals.values()),
        rrf_k=cfg.fusion.rrf_k,
        weights=cfg.fusion.weights,
        default_weight=cfg.fusion.default_weight,
        depth=cfg.fusion.depth,
    ).validate(n_docs=n)
    predictions: dict[str, list[str]] = {}
    ranked: dict[str, list[str]] = {}
    for q in queries:
        cits, scores = _to_citations(fused.hits.get(q.query_id, []), art.corpus)
        k = choose_count(np.asarray(scores), cfg.count.method, cfg.count.k, cfg.count.min_k, cfg.count.max_k)
        ranked[q.query_id] = cits
        predictions[q.query_id] = cits[:k]
    timings["fusion_and_count"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return RunResult([q.query_id for q in queries], predictions, ranked, list(signals.values()), fused, timings, degraded)
