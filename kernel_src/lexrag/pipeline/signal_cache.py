"""Signals computed once and reused by later runs in the same process (ablations, tuning grids,
cross-validation folds)."""

from __future__ import annotations

import logging
from typing import Any

from lexrag.queries import QueryState
from lexrag.stages.base import (
    BatchState,
    Context,
    Phase,
    Stage,
)

log = logging.getLogger(__name__)


class SignalCache:
    """Signals computed once and reused by later runs in the same process (ablation rows, tuning
    grid points, cross-validation folds).

    A content or graph stage's output for one query is stored under a key made of the stage, the
    config sections it reads (its ``reads`` attribute, else every section of its phase), the loaded
    artifacts it can see (an ablation that removes one gets another key), the query's texts
    (question, variants, LLM citations) and, for the graph phase, its seed candidates and the
    prior; a later run whose key matches takes the stored rankings instead of running the stage.
    ``computed`` counts (stage, query) computations, ``reused`` the reuses."""

    SECTIONS = {Phase.CONTENT: ("lexical", "semantic", "seeds", "query", "llm"),
                Phase.GRAPH: ("lexical", "graph", "prior", "seeds")}

    def __init__(self) -> None:
        self.store: dict[tuple, list[tuple[str, str, list]]] = {}
        self.computed: dict[tuple[str, str], int] = {}
        self.reused = 0
        self.texts: dict[tuple, Any] = {}  # per-text results of a retriever (one query variant's BM25 or dense hits)
        self._alive: dict[int, Any] = {}
        self.text_computed: dict[tuple[str, str], int] = {}

    def text_key(self, kind: str, section: Any, index: Any, text: str) -> tuple:
        """Key of one retriever call: ``kind`` (bm25, dense), its config section, the index object, the text."""
        import json

        self._alive[id(index)] = index
        return kind, json.dumps(section.__dict__, sort_keys=True, default=str), id(index), text

    def get_text(self, key: tuple):
        hit = self.texts.get(key)
        if hit is not None:
            self.reused += 1
        return hit

    def put_text(self, key: tuple, value: Any) -> None:
        self.texts[key] = value
        self.text_computed[(key[0], key[3])] = self.text_computed.get((key[0], key[3]), 0) + 1

    @classmethod
    def applies(cls, stage: Stage) -> bool:
        return stage.phase in cls.SECTIONS

    def key(self, stage: Stage, q: QueryState, batch: BatchState, ctx: Context) -> tuple:
        import hashlib
        import json

        cfg, art = ctx.cfg, ctx.art
        for obj in (art.bm25, art.dense, art.graph, art.prior, art.corpus):
            self._alive[id(obj)] = obj  # keyed by id(): keep the object, so no later object can take its id
        sections = getattr(stage, "reads", None) or self.SECTIONS[stage.phase]
        conf = json.dumps({sec: getattr(cfg, sec).__dict__ for sec in sections}, sort_keys=True, default=str)
        parts = [stage.name, hashlib.sha256(conf.encode()).hexdigest(),
                 tuple(id(x) for x in (art.bm25, art.dense, art.graph, art.prior, art.corpus)),
                 q.query_id, q.text, tuple(sorted((v.name, v.text) for v in q.variants.values())), tuple(q.llm_citations)]
        if stage.phase == Phase.GRAPH:
            parts.append(tuple(batch.seeds.get(q.query_id, ())[: cfg.graph.seed_k]))
        return tuple(parts)

    def get(self, key: tuple):
        hit = self.store.get(key)
        if hit is not None:
            self.reused += 1
        return hit

    def put(self, key: tuple, stage: str, query_id: str, rankings: list[tuple[str, str, list]]) -> None:
        self.store[key] = rankings
        self.computed[(stage, query_id)] = self.computed.get((stage, query_id), 0) + 1


def remember(memo: "SignalCache", stage: Stage, keys: dict[str, tuple], out) -> None:
    """Store what a content or graph stage returned, per query of the call."""
    for qid in {qid for r in out for qid in r.hits}:
        if qid in keys:
            memo.put(keys[qid], stage.name, qid, [(r.signal, r.family, list(r.hits[qid])) for r in out if qid in r.hits])
