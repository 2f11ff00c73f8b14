"""The walk: orchestration only.

:func:`run_pipeline` turns queries into query states and walks the phases (rewrite -> content
-> seed fusion -> graph and prior -> fusion -> rerank -> count) over them.  Each enabled stage
runs on chunks of ``runtime.batch_size`` queries: the walk times every call, checks the time
budget before it (past the budget only essential stages run: citation seeds, BM25, fusion,
count) and records which queries each stage skipped, then checks every ranking at the border.
Phase by phase over all queries means each model is loaded once per phase and the encoder,
the reranker and the LLM take turns on one GPU (see :class:`lexrag.models.ModelPool`); without a
time budget, runs of stages that share one model go chunk by chunk (:func:`call_order`).
:func:`retrieve` runs the retrieval phases alone for any query texts (the agentic loop's call).
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Iterable

from lexrag import stages as _stages  # noqa: F401  (registers the built-in stages)
from lexrag.config import Config
from lexrag.pipeline.artifacts import Artifacts
from lexrag.pipeline.budget import Budget, degrade, piece_size
from lexrag.pipeline.calls import run_call
from lexrag.pipeline.context import make_context
from lexrag.pipeline.signal_cache import SignalCache, remember
from lexrag.io.procmem import process_memory
from lexrag.queries import Query, QueryState
from lexrag.ranking import Ranking
from lexrag.stages.base import (
    RETRIEVAL_PHASES,
    BatchState,
    Context,
    Phase,
    Stage,
    check_degrade_order,
    stages_for,
)
from lexrag.stages.count import emitted_order, unique_citations

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    query_ids: list[str]
    predictions: dict[str, list[str]]
    ranked: dict[str, list[str]]
    signals: list[Ranking]
    fused: Ranking  # all signals fused
    current: Ranking  # the order the count stage cut (fused, or reranked where the reranker ran)
    timings: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)  # queries some stage skipped for lack of time
    skipped: dict[str, list[str]] = field(default_factory=dict)  # stage -> query ids
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> query id -> error
    states: list[QueryState] = field(default_factory=list)
    costs: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # query -> stage -> amounts
    model_loads: dict[str, int] = field(default_factory=dict)
    model_load_seconds: dict[str, float] = field(default_factory=dict)
    current_by: dict[str, str] = field(default_factory=dict)  # query id -> stage that made its final order
    dropped: dict[str, str] = field(default_factory=dict)  # optional stages the budget dropped -> why
    memory_added: dict[str, float] = field(default_factory=dict)  # stage -> GB of anonymous memory left after its runs
    # stage -> {"why": ..., "queries": [...]}: where a stage ran but did less than the config asked (Context.note)
    partial: dict[str, dict] = field(default_factory=dict)
    budget_s: float = 0.0  # runtime.time_budget_s the run had (0: none)
    budget_elapsed_s: float = 0.0  # seconds of that budget spent when the walk ended (from the budget's start)

    @property
    def traces(self) -> list[dict]:
        """The agentic loop's round records of every query, in query order."""
        return [r for q in self.states for r in q.trace]

    def cost_totals(self) -> dict[str, dict[str, float]]:
        """Per stage, every amount summed over queries (LLM calls, tokens, seconds...)."""
        out: dict[str, dict[str, float]] = {}
        for per_stage in self.costs.values():
            for stage, amounts in per_stage.items():
                acc = out.setdefault(stage, {})
                for k, v in amounts.items():
                    acc[k] = acc.get(k, 0.0) + v
        return out


def walk(batch: BatchState, ctx: Context, budget: Budget, phases: Iterable[Phase] | None = None,
         project: bool = True) -> BatchState:
    """Run the enabled stages of ``phases`` (all by default) over ``batch`` in phase order, in
    chunks of ``runtime.batch_size`` queries, with the time budget applied before each call.

    Before each call the time the rest of the run needs is projected (per stage: its measured
    seconds per query once it has run, else ``runtime.stage_estimates_s``, times the queries it
    has left); while that exceeds the budget left, the next group of ``runtime.degrade_order``
    is dropped for the rest of the run (agentic loop, verification, reranking, dense, graph and
    prior, rewrite, the extra BM25 passes).  Past the budget every optional stage is skipped; the essential ones (citation
    seeds, BM25, fusion, count) always run, so every query gets the best answer left.  The
    queries a stage skipped are recorded in ``batch.skipped``.  ``project=False`` (the agent's
    retrieval calls) only honours what the run has dropped.  With a budget, an optional stage's
    call takes as many of a chunk's queries as its rate spends in a slice of the budget
    (:func:`~lexrag.pipeline.budget.piece_size`) and the projection is made again before the
    next, so a stage slower than its estimate is cut inside a chunk.  Inside a call the LLM client
    holds the budget (:class:`~lexrag.errors.BudgetSpent`): a call it stops is undone, its queries
    skipped and the stage dropped (:func:`lexrag.pipeline.calls.run_call`).  The order of the calls:
    :func:`call_order`."""
    cfg = ctx.cfg
    n_docs = len(ctx.art.corpus)
    size = cfg.runtime.batch_size
    live = [q for q in batch.queries if q.text]
    stages = stages_for(cfg, ctx.art, tuple(phases) if phases is not None else None)
    done: dict[str, int] = {}
    for i, start in call_order(stages, len(live), size, by_chunk=budget.left() == float("inf")):
        stage = stages[i]
        chunk = batch.chunk(live[start : start + size])
        if not stage.essential:
            if project:
                degrade(stages[i:], len(live) - start, len(live), done, batch.timings, budget, cfg)
            if stage.name in budget.dropped or budget.exhausted():
                batch.skipped.setdefault(stage.name, []).extend(chunk.query_ids)
                continue
        memo = ctx.signal_cache if ctx.signal_cache is not None and SignalCache.applies(stage) else None
        keys: dict[str, tuple] = {}
        if memo is not None:
            keys = {q.query_id: memo.key(stage, q, chunk, ctx) for q in chunk.queries}
            todo = []
            for q in chunk.queries:
                hit = memo.get(keys[q.query_id])
                if hit is None:
                    todo.append(q)
                    continue
                for signal, family, hits in hit:
                    batch.signals.setdefault(signal, Ranking(signal, family)).hits[q.query_id] = list(hits)
            if not todo:
                continue
            chunk = batch.chunk(todo)
        pos, queries = 0, chunk.queries
        while pos < len(queries):
            if pos:  # inside the chunk: projected again with the rate measured so far
                degrade(stages[i:], len(live) - start - pos, len(live), done, batch.timings, budget, cfg)
                if stage.name in budget.dropped or budget.exhausted():
                    batch.skipped.setdefault(stage.name, []).extend(q.query_id for q in queries[pos:])
                    break
            n = piece_size(stage, len(queries) - pos, done, batch.timings, budget, cfg) if project else len(queries)
            piece = batch.chunk(queries[pos:pos + n])
            t0, m0 = time.perf_counter(), process_memory().get("anon")
            cut = run_call(stage, piece, ctx, n_docs, budget,
                             (lambda out, k=keys, m=memo, st=stage: remember(m, st, k, out)) if memo is not None else None)
            dt = time.perf_counter() - t0
            batch.timings[stage.name] = batch.timings.get(stage.name, 0.0) + dt
            if m0 is not None:  # what the stage left resident: models it loaded, caches it filled (summed unrounded)
                batch.memory_added[stage.name] = batch.memory_added.get(stage.name, 0.0) + process_memory()["anon"] - m0
            for q in piece.queries:  # the time was spent on them, whether or not the stage finished
                q.add_cost(stage.name, seconds=dt / len(piece.queries))
            if cut:  # the budget ran out inside this call: the stage is dropped, the rest of the chunk skipped
                batch.skipped.setdefault(stage.name, []).extend(q.query_id for q in queries[pos + n:])
                break
            done[stage.name] = done.get(stage.name, 0) + len(piece.queries)
            pos += n
    return batch


_MODELS = frozenset({"llm", "semantic", "reranker"})  # what a stage ``needs`` that loads a model


def call_order(stages: list[Stage], n: int, size: int, by_chunk: bool) -> list[tuple[int, int]]:
    """(stage index, first query) of every stage call, in the walk's order.  With a time budget
    (``by_chunk`` false), stage by stage, each over every chunk: the projection and the degrade
    order count stage by stage.  Without one, each run of consecutive stages that load one model
    at most goes chunk by chunk through all its stages, so the stages that ask the BM25 index for
    a question's scores (BM25, statutes, articles, feedback, graph) find them in its cache however
    many questions the run has; stage by stage, a run of more questions than the cache holds (50
    at 2.65M documents) would score each question again for every such stage.  Each model still
    loads once per run of stages."""
    chunks = range(0, n, size)
    if not by_chunk:
        return [(i, start) for i in range(len(stages)) for start in chunks]
    order: list[tuple[int, int]] = []
    i = 0
    while i < len(stages):
        j, models = i, set()
        while j < len(stages):
            m = set(getattr(stages[j], "needs", ())) & _MODELS
            if m - models and models:  # another model: the next run
                break
            models |= m
            j += 1
        order += [(k, start) for start in chunks for k in range(i, j)]
        i = j
    return order


def retrieve(states: list[QueryState], ctx: Context, budget: Budget | None = None) -> dict[str, list[tuple[int, float]]]:
    """The fused ranking for any query texts (content, seed fusion, graph and prior, fusion);
    the agentic loop calls this once per reformulation."""
    batch = walk(BatchState(list(states)), ctx, budget or ctx.budget or Budget(), RETRIEVAL_PHASES, project=False)
    return {q.query_id: batch.fused.get(q.query_id, []) for q in states}


def _scored_ranking(hits, corpus, cfg: Config) -> list[tuple[str, float]]:
    """A query's full ranking before the count, as (citation, score): the distinct citations of the
    order the count cuts, in the form the count section asks (whole articles beside their paragraphs)."""
    _, cits, scores = unique_citations(hits, corpus)
    return list(zip(*emitted_order(cits, scores, cfg.count)))


def scored_rankings(result: "RunResult", corpus, cfg: Config) -> dict[str, list[tuple[str, float]]]:
    """Query id -> its ranking with scores (``result.ranked`` with the scores of the order), for a
    TREC run file (:mod:`lexrag.eval.trec`)."""
    return {q: _scored_ranking(result.current.hits.get(q, []), corpus, cfg) for q in result.query_ids}


def run_pipeline(queries: list[Query] | list[QueryState], art: Artifacts, cfg: Config, paths=None,
                 ctx: Context | None = None, budget: Budget | None = None, cache: SignalCache | None = None) -> RunResult:
    """Answer ``queries``: every phase over all queries, then the count cut.  Queries with an
    empty text get an empty prediction.  ``budget`` defaults to ``runtime.time_budget_s`` from
    now; past it the non-essential stages are skipped for the remaining chunks and the queries
    are listed in ``degraded`` (with a warning), so a submission is always complete."""
    t_start = time.perf_counter()
    own = ctx is None
    ctx = ctx or make_context(cfg, art, paths)
    budget = budget or Budget(cfg.runtime.time_budget_s, t_start, cfg.runtime.reserve_s)
    check_degrade_order(cfg.runtime.degrade_order, cfg.runtime.stage_estimates_s)
    ctx.budget = budget
    ctx.retrieve = lambda sub: retrieve(sub, ctx, budget)
    if cache is not None:
        ctx.signal_cache = cache
    states = [QueryState.of(q) for q in queries]
    ctx.new_run()  # counts and notes are a run's own (a searcher's context serves several)
    try:
        batch = walk(BatchState(states), ctx, budget)
    finally:
        ctx.flush_notes()  # each note once, with the run's totals
        if own:  # a context made here is closed here: models freed, cache written out
            # cleanup only: every answer is in the cache (committed as it came) and in the batch,
            # so a failing close (a read-only or full disk) is a warning and never costs the run
            # its finished answers
            try:
                ctx.models.release()
            except Exception as e:  # noqa: BLE001
                log.warning("releasing the run's models failed (%s: %s); the answers are kept", type(e).__name__, e)
            if ctx.llm is not None:
                if ctx.llm.cache.foreign:
                    note = (f"LLM cache: {ctx.llm.cache.foreign} stored answers were written by another model than the "
                            f"attached {ctx.llm.model_name!r} (or one of unknown identity) and were not used; the model answered")
                    log.warning("%s", note)
                    art.notes.append(note)
                try:
                    ctx.llm.cache.close()
                except Exception as e:  # noqa: BLE001
                    log.warning("closing the LLM cache failed (%s: %s); the answers are kept", type(e).__name__, e)
    degraded = sorted({q for qs in batch.skipped.values() for q in qs}, key=[s.query_id for s in states].index)
    if degraded:
        warnings.warn(skip_summary(budget, batch.skipped))
    elapsed = budget.elapsed()
    if budget.seconds > 0 and elapsed > budget.seconds:  # every stage may have run, but the budget was not kept
        log.warning("the run took %.1fs of a time budget of %.1fs", elapsed, budget.seconds)
    predictions: dict[str, list[str]] = {}
    ranked: dict[str, list[str]] = {}
    corpus = art.corpus
    for q in states:
        final = batch.final.get(q.query_id, [])
        emitted = [corpus.citations[d] for d, _ in final]
        ranked[q.query_id] = [c for c, _ in _scored_ranking(batch.current.get(q.query_id, []), corpus, cfg)]
        predictions[q.query_id] = emitted_order(emitted, [s for _, s in final], cfg.count)[0][: len(emitted)]
    timings = dict(batch.timings)
    timings["total"] = time.perf_counter() - t_start
    fused = Ranking("fused", "fused", dict(batch.fused))
    reordered = any(by != "fused" for by in batch.current_by.values())
    current = Ranking("rerank" if reordered else "fused", "rerank" if reordered else "fused", dict(batch.current))
    return RunResult(query_ids=[q.query_id for q in states], predictions=predictions, ranked=ranked,
                     signals=list(batch.signals.values()), fused=fused, current=current, timings=timings,
                     degraded=degraded, skipped=dict(batch.skipped), failed=dict(batch.failed), states=states,
                     costs={q.query_id: q.cost for q in states}, model_loads=dict(ctx.models.loads),
                     model_load_seconds=dict(ctx.models.load_seconds), current_by=dict(batch.current_by),
                     dropped=dict(budget.dropped), memory_added={k: round(v, 2) for k, v in batch.memory_added.items()},
                     partial={stage: {"why": "; ".join(t for t, _ in kept.values()),
                                      "queries": list(dict.fromkeys(q for _, ids in kept.values() for q in ids))}
                              for stage, kept in ctx.partial.items()},
                     budget_s=float(budget.seconds), budget_elapsed_s=elapsed)


def skip_summary(budget: Budget, skipped: dict[str, list[str]]) -> str:
    """One line for the stages the time budget kept from queries: per stage, how many queries it
    skipped, grouped by why, each reason once; a stage dropped because the projection said the
    rest would not fit is told apart from one the budget ran out for (or inside)."""
    by_why: dict[str, list[str]] = {}
    for name in sorted(skipped):
        n = len(set(skipped[name]))
        why = budget.dropped.get(name)
        if why is None:
            how = "the time budget ran out"
        elif why.startswith("projected"):
            how = f"dropped because the projection said the rest of the run would not fit, not for time spent ({why})"
        else:
            how = f"dropped: {why}"
        by_why.setdefault(how, []).append(f"{name} {n} {'query' if n == 1 else 'queries'}")
    parts = [f"{', '.join(counts)} skipped: {how}" for how, counts in by_why.items()]
    return f"time budget of {budget.seconds:g}s: " + "; ".join(parts)
