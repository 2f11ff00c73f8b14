"""Verification stage: the LLM judges the top candidates of each query.

Each of the top ``verify.depth`` candidates of the current order (reranked, or fused when the
reranker is off) gets P(Yes) from the next-token logits of a Yes/No question (``verify``
template: the question, the candidate's citation and its text cut to ``verify.max_text_chars``),
batched across queries through the LLM client, so the answers are cached and replayed like every
other LLM call.  Candidates at or above ``verify.threshold`` move ahead, ordered by P(Yes) (ties
by their earlier rank); the others keep their order, and so do the candidates beyond the depth.
The LLM only scores: it never writes a citation.
"""

from __future__ import annotations

import logging

from lexrag.llm.prompts import load_template
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["Verify", "verified_order"]

log = logging.getLogger(__name__)


def verified_order(hits: list[tuple[int, float]], probs: list[float], threshold: float) -> list[tuple[int, float]]:
    """The new order: judged candidates with P(Yes) >= threshold first (score 1 + p, by p), then
    every other candidate in its earlier order (its earlier score scaled below 1)."""
    judged = len(probs)
    top = sorted((i for i in range(judged) if probs[i] >= threshold), key=lambda i: (-probs[i], i))
    rest = [i for i in range(len(hits)) if i >= judged or probs[i] < threshold]
    best = max((abs(s) for _, s in hits), default=1.0) or 1.0
    out = [(hits[i][0], 1.0 + probs[i]) for i in top]
    out += [(hits[i][0], max(hits[i][1], 0.0) / best * 0.999) for i in rest]
    return out


class Verify:
    name = "verify"
    family = "rerank"
    phase = Phase.RERANK
    essential = False
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.verify.enabled and cfg.llm.enabled and art.llm_ready

    def run(self, batch, ctx):
        vc, corpus = ctx.cfg.verify, ctx.art.corpus
        template = load_template("verify")
        values, owners = [], []
        for q in batch.queries:
            ids = [d for d, _ in batch.current.get(q.query_id, [])[: vc.depth]]
            for d, text in zip(ids, corpus.texts(ids)):
                values.append({"question": q.text[: ctx.cfg.llm.max_question_chars], "citation": corpus.citations[d],
                               "text": (text or "")[: vc.max_text_chars]})
                owners.append(q)
        gens = ctx.llm.yes_probabilities(template, values, [q.query_id for q in owners]) if values else []
        probs: dict[str, list[float]] = {}
        for q, g in zip(owners, gens):
            try:
                p = min(max(float(g.text), 0.0), 1.0)
            except ValueError:
                log.warning("query %r: verifier answer %r is not a probability; scored 0", q.query_id, g.text[:40])
                p = 0.0
            probs.setdefault(q.query_id, []).append(p)
            q.add_cost("verify", llm_calls=1, prompt_tokens=g.prompt_tokens, llm_seconds=g.seconds, cache_hits=int(g.cached))
        out = Ranking("verify", "rerank")
        for q in batch.queries:
            hits = batch.current.get(q.query_id, [])
            if hits:
                out.hits[q.query_id] = verified_order(hits, probs.get(q.query_id, []), vc.threshold)
        return out


register_stage(Verify())
