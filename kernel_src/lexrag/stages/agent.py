"""The agentic reformulation loop: planner -> retrieve -> observer, round by round.

Round 0 observes the question's own ranking (the current order: reranked and verified where those
stages ran).  In each later round the planner (``plan`` template, JSON) writes up to
``agent.queries_per_round`` German keyword queries from the question, the queries already run and
the evidence kept so far; each query goes through the retrieval phases (``Context.retrieve``: the
same content, seed, graph and fusion stages as the question, top ``agent.retrieve_k``); the
observer judges the top ``agent.observe_depth`` of each list with the verifier's Yes/No logits
(:func:`lexrag.stages.verify.judge`, batched over all queries of the round, cached) and keeps what
scores at least ``agent.threshold``.  A query stops when a round keeps nothing new, when the
planner says it is done or writes no new query, after ``agent.max_rounds`` planner rounds, or when
the time budget is spent: before a round, or inside one (an LLM call the client refuses or cuts,
:class:`~lexrag.errors.BudgetSpent`), when the queries keep the rounds before it, with a status
note; a budget that runs out inside round 0 stops the stage (the walk drops it).  All active
queries go through a round together, so every call is batched.

The final order puts the kept items first, by how many rounds kept them, then the earliest round
that kept them, then their best rank in any round; the rest of the current order follows.  The
planner never writes an output citation: a citation string in a planner query is cut out of it and
resolved onto the corpus like any other LLM citation (``llm_citations`` of the round's query).
Every round is one record of ``QueryState.trace`` (queries written, items kept and new, tokens,
seconds), which the validation run writes as JSONL.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from lexrag.errors import BudgetSpent
from lexrag.llm.rewrite import json_calls, strip_citations
from lexrag.queries import QueryState
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage
from lexrag.stages.verify import judge

__all__ = ["Agent", "AgentMemory", "agent_order", "PLAN_SCHEMA"]

log = logging.getLogger(__name__)

PLAN_SCHEMA: dict[str, tuple[type, bool]] = {"queries": (list, True), "done": (bool, False)}
EVIDENCE_ITEMS = 8  # kept items shown to the planner (most retained first)
EVIDENCE_CHARS = 160  # characters of each kept item's text shown to the planner


@dataclass
class AgentMemory:
    """What the loop knows about one query: per kept document how many rounds kept it, the first
    round that kept it and its best rank; every query run; every document judged."""

    retention: dict[int, int] = field(default_factory=dict)
    first_round: dict[int, int] = field(default_factory=dict)
    best_rank: dict[int, int] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    judged: dict[int, float] = field(default_factory=dict)
    done: bool = False

    def keep(self, round_no: int, ranked: list[tuple[int, int]], probs: dict[int, float], threshold: float) -> tuple[int, int]:
        """Record one round: ``ranked`` = (document, rank) observed this round.  Returns (kept, new)."""
        kept = new = 0
        seen: set[int] = set()
        for doc, rank in ranked:
            if doc in seen or probs.get(doc, 0.0) < threshold:
                continue
            seen.add(doc)
            kept += 1
            if doc not in self.retention:
                new += 1
                self.first_round[doc] = round_no
                self.best_rank[doc] = rank
                self.retention[doc] = 0
            self.retention[doc] += 1
            self.best_rank[doc] = min(self.best_rank[doc], rank)
        return kept, new


def agent_order(mem: AgentMemory) -> list[int]:
    """Kept documents: most rounds first, then the earliest round, then the best rank."""
    return sorted(mem.retention, key=lambda d: (-mem.retention[d], mem.first_round[d], mem.best_rank[d], d))


def _evidence(mem: AgentMemory, corpus) -> str:
    docs = agent_order(mem)[:EVIDENCE_ITEMS]
    if not docs:
        return "(none yet)"
    return "\n".join(f"- {corpus.citations[d]}: {(t or '')[:EVIDENCE_CHARS]}" for d, t in zip(docs, corpus.texts(docs)))


def _previous(mem: AgentMemory) -> str:
    return "\n".join(f"- {q}" for q in mem.queries) or "(none yet)"


class Agent:
    name = "agent"
    family = "agent"
    needs = ("llm",)
    phase = Phase.RERANK
    essential = False
    signals = ("agent",)

    def enabled(self, cfg, art) -> bool:
        return cfg.agent.enabled and cfg.llm.enabled and art.llm_ready

    def run(self, batch, ctx):
        ac = ctx.cfg.agent
        mems = {q.query_id: AgentMemory(queries=[q.text]) for q in batch.queries}
        # round 0: the question's own ranking
        t0 = time.perf_counter()
        observed = {q.query_id: {d: r for r, (d, _) in enumerate(batch.current.get(q.query_id, [])[: ac.observe_depth])}
                    for q in batch.queries}
        self._observe(0, list(batch.queries), observed, mems, ctx, {q.query_id: [q.text] for q in batch.queries}, t0, {})
        active = [q for q in batch.queries if mems[q.query_id].retention or batch.current.get(q.query_id)]
        for round_no in range(1, ac.max_rounds + 1):
            if not active:
                break
            if ctx.budget is not None and ctx.budget.exhausted():
                log.warning("agent: time budget spent; %d queries stop after round %d", len(active), round_no - 1)
                break
            try:
                active = self._round(round_no, active, mems, ctx)
            except BudgetSpent as e:  # the round's partial work is left out: its documents were never kept
                ctx.tallies["agent_cut"] = ctx.tallies.get("agent_cut", 0) + len(active)
                ctx.note("agent_budget", f"agent: the time budget ran out inside a round ({str(e)[:160]}); "
                                         f"{ctx.tallies['agent_cut']} queries keep the rounds before it")
                break
        out = Ranking("agent", "rerank")
        signal = batch.signals.setdefault("agent", Ranking("agent", "agent"))
        for q in batch.queries:
            mem = mems[q.query_id]
            kept = agent_order(mem)
            n = len(kept)
            signal.hits[q.query_id] = [(d, float(n - i)) for i, d in enumerate(kept)]
            head = [(d, 2.0 + (n - i) / max(n, 1)) for i, d in enumerate(kept)]
            hits = batch.current.get(q.query_id, [])
            best = max((abs(s) for _, s in hits), default=1.0) or 1.0
            rest = [(d, max(s, 0.0) / best * 1.999) for d, s in hits if d not in mem.retention]
            if head or rest:
                out.hits[q.query_id] = head + rest
        return out

    def _round(self, round_no: int, active: list[QueryState], mems: dict[str, AgentMemory], ctx) -> list[QueryState]:
        """One planner round over the ``active`` queries: plan, retrieve, observe; returns the
        queries that go on to the next round."""
        ac = ctx.cfg.agent
        t0 = time.perf_counter()
        before = {q.query_id: dict(q.cost.get("agent", {})) for q in active}
        plans = json_calls(ctx.llm, "plan", active, [
            {"question": q.text[: ctx.cfg.llm.max_question_chars], "previous": _previous(mems[q.query_id]),
             "evidence": _evidence(mems[q.query_id], ctx.art.corpus), "n": ac.queries_per_round} for q in active
        ], PLAN_SCHEMA, stage="agent")
        subs: list[QueryState] = []
        written: dict[str, list[str]] = {}
        for q in active:
            mem, plan = mems[q.query_id], plans.get(q.query_id)
            if plan is None or plan.get("done"):
                mem.done = True
                written[q.query_id] = []
                continue
            fresh = []
            for text in plan["queries"]:
                clean, cits = strip_citations(text[:500])
                if clean and clean not in mem.queries and clean not in fresh:
                    fresh.append(clean)
                    sub = QueryState(f"{q.query_id}#agent{round_no}.{len(fresh)}", clean)
                    sub.add_variant("de", clean, "llm:plan")
                    sub.llm_citations.extend(cits)
                    subs.append(sub)
                if len(fresh) >= ac.queries_per_round:
                    break
            written[q.query_id] = fresh
            mem.queries.extend(fresh)
            if not fresh:
                mem.done = True
        ranked = ctx.retrieve(subs) if subs else {}
        observed = {q.query_id: {} for q in active}  # document -> its best rank in any of the round's lists
        by_id = {q.query_id: q for q in active}
        for sub in subs:
            parent = sub.query_id.split("#agent", 1)[0]
            for r, (d, _) in enumerate(ranked.get(sub.query_id, [])[: ac.observe_depth]):
                if r < observed[parent].get(d, r + 1):
                    observed[parent][d] = r
            by_id[parent].add_cost("agent", retrieve_seconds=sum(c.get("seconds", 0.0) for c in sub.cost.values()))
        new = self._observe(round_no, active, observed, mems, ctx, written, t0, before)
        return [q for q in active if not mems[q.query_id].done and new.get(q.query_id, 0) > 0]

    @staticmethod
    def _observe(round_no, queries, observed, mems, ctx, written, t0, before) -> dict[str, int]:
        """Judge what a round retrieved (``observed``: query id -> {document: its best rank in the
        round's lists}; documents judged before are not judged again), keep, and trace the round."""
        ac = ctx.cfg.agent
        items = [(q, d) for q in queries for d in sorted(observed.get(q.query_id, {}), key=observed[q.query_id].get)
                 if d not in mems[q.query_id].judged]
        for (q, d), p in zip(items, judge(ctx, items, "agent")):
            mems[q.query_id].judged[d] = p
        new_by_query = {}
        for q in queries:
            mem = mems[q.query_id]
            ranked = sorted(observed.get(q.query_id, {}).items(), key=lambda t: t[1])
            kept_before = set(mem.retention)
            kept, new = mem.keep(round_no, ranked, mem.judged, ac.threshold)
            new_by_query[q.query_id] = new
            cost, prev = q.cost.get("agent", {}), before.get(q.query_id, {})
            q.trace.append({
                "query_id": q.query_id, "round": round_no, "queries": written.get(q.query_id, []),
                "observed": len(ranked), "kept": kept, "new": new,
                "new_citations": [ctx.art.corpus.citations[d] for d in mem.retention if d not in kept_before],
                "prompt_tokens": int(cost.get("prompt_tokens", 0) - prev.get("prompt_tokens", 0)),
                "gen_tokens": int(cost.get("gen_tokens", 0) - prev.get("gen_tokens", 0)),
                "llm_calls": int(cost.get("llm_calls", 0) - prev.get("llm_calls", 0)),
                "cache_hits": int(cost.get("cache_hits", 0) - prev.get("cache_hits", 0)),
                "seconds": round(time.perf_counter() - t0, 4), "done": mem.done,
            })
        return new_by_query


register_stage(Agent())
