"""Verification stage: the LLM judges the top candidates of each query.

Each of the top ``verify.depth`` candidates of the current order (reranked, or fused when the
reranker is off) gets P(Yes) from the next-token logits of a Yes/No question (``verify``
template: the question, the candidate's citation and its text cut to ``verify.max_text_chars``),
batched across queries through the LLM client, so the answers are cached and replayed like every
other LLM call.  Candidates at or above ``verify.threshold`` move ahead, ordered by P(Yes) (ties
by their earlier rank); with ``verify.expand`` and a citation graph each verified item then pulls
in up to ``verify.expand_k`` graph neighbours (other considerations or paragraphs of its decision
or article, then the authorities most co-cited with it), scored ``EXPAND_WEIGHT`` times its
P(Yes), so below it; a neighbour the verifier judged and rejected is not pulled in.  The other
candidates keep their order, and so do the candidates beyond the depth.  The probabilities are
also kept as the ``verify`` signal (``BatchState.signals``).  The LLM only scores: it never writes
a citation.
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from lexrag.llm.client import book
from lexrag.llm.prompts import load_template
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["Verify", "verified_order", "judge", "graph_neighbours"]

log = logging.getLogger(__name__)

EXPAND_WEIGHT = 0.5  # a pulled-in neighbour scores this fraction of the P(Yes) of the item that brought it (below it)


def judge(ctx, items: Sequence[tuple[object, int]], stage: str) -> list[float]:
    """P(Yes) for each (query state, document) pair, in one batched call through the LLM client
    (the verifier's template and values, so the verifier and the agent's observer share cached
    answers); an answer that is not a probability scores 0 with a warning.  The cost is booked on
    each query under ``stage``."""
    if not items:
        return []
    corpus, lc, vc = ctx.art.corpus, ctx.cfg.llm, ctx.cfg.verify
    docs = [d for _, d in items]
    values = [{"question": q.text[: lc.max_question_chars], "citation": corpus.citations[d], "text": (t or "")[: vc.max_text_chars]}
              for (q, _), d, t in zip(items, docs, corpus.texts(docs))]
    gens = ctx.llm.yes_probabilities(load_template("verify"), values, [q.query_id for q, _ in items])
    out = []
    for (q, _), g in zip(items, gens):
        try:
            p = float(g.text)
            if p != p:  # NaN
                raise ValueError
            p = min(max(p, 0.0), 1.0)
        except ValueError:
            log.warning("query %r: verifier answer %r is not a probability; scored 0", q.query_id, g.text[:40])
            p = 0.0
        out.append(p)
        book(q, stage, g)
    return out


def verified_order(hits: list[tuple[int, float]], probs: list[float], threshold: float,
                   neighbours: dict[int, list[int]] | None = None,
                   weight: float = EXPAND_WEIGHT) -> list[tuple[int, float]]:
    """The new order: judged candidates with P(Yes) >= threshold first (score 1 + p, by p), each
    followed in score order by its ``neighbours`` (score 1 + weight * p, so below it; not a judged
    and rejected candidate, not one already placed), then every other candidate in its earlier
    order (its earlier score scaled below 1)."""
    judged = len(probs)
    top = sorted((i for i in range(judged) if probs[i] >= threshold), key=lambda i: (-probs[i], i))
    rejected = {hits[i][0] for i in range(judged) if probs[i] < threshold}
    placed: dict[int, float] = {hits[i][0]: 1.0 + probs[i] for i in top}
    for i in top:
        for d in (neighbours or {}).get(hits[i][0], []):
            if d not in placed and d not in rejected:
                placed[d] = 1.0 + weight * probs[i]
    best = max((abs(s) for _, s in hits), default=1.0) or 1.0
    out = sorted(placed.items(), key=lambda t: -t[1])  # stable: ties keep the verified order
    out += [(d, max(s, 0.0) / best * 0.999) for d, s in hits if d not in placed]
    return out


def graph_neighbours(graph, doc: int, k: int) -> list[int]:
    """Up to ``k`` neighbours of ``doc``: the other documents of its decision or article (most
    cited first), then documents of the nodes most co-cited with its node."""
    from lexrag.stages import graph_signals as gs

    if k <= 0:
        return []
    node = int(graph.doc_node[doc])
    same = [int(d) for d in sorted(graph.docs_of_node(node).tolist(), key=lambda x: (-int(graph.doc_cited[x]), x)) if d != doc]
    out = same[:k]
    if len(out) < k:
        nodes = np.array([node], dtype=np.int64)
        co = gs.top_nodes(gs.co_citation(graph, nodes, np.ones(1, dtype=np.float64)), nodes, k)
        for d, _ in gs.nodes_to_docs(graph, co, None, 1, k):
            if d != doc and d not in out:
                out.append(d)
    return out[:k]


class Verify:
    name = "verify"
    family = "rerank"
    needs = ("llm",)
    phase = Phase.RERANK
    essential = False
    signals = ("verify",)

    def enabled(self, cfg, art) -> bool:
        return cfg.verify.enabled and cfg.llm.enabled and art.llm_ready

    def run(self, batch, ctx):
        vc, graph = ctx.cfg.verify, ctx.art.graph
        items = [(q, d) for q in batch.queries for d, _ in batch.current.get(q.query_id, [])[: vc.depth]]
        scores = judge(ctx, items, "verify")
        probs: dict[str, list[float]] = {}
        for (q, _), p in zip(items, scores):
            probs.setdefault(q.query_id, []).append(p)
        out = Ranking("verify", "rerank")
        signal = batch.signals.setdefault("verify", Ranking("verify", "rerank"))
        for q in batch.queries:
            hits = batch.current.get(q.query_id, [])
            if not hits:
                continue
            ps = probs.get(q.query_id, [])
            signal.hits[q.query_id] = sorted(((hits[i][0], ps[i]) for i in range(len(ps))), key=lambda t: -t[1])
            nb = {}
            if vc.expand and graph is not None and vc.expand_k > 0:
                nb = {hits[i][0]: graph_neighbours(graph, hits[i][0], vc.expand_k) for i in range(len(ps)) if ps[i] >= vc.threshold}
            out.hits[q.query_id] = verified_order(hits, ps, vc.threshold, nb, EXPAND_WEIGHT)
        return out


register_stage(Verify())
