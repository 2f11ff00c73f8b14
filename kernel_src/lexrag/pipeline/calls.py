"""One stage call, contained: its output checked and merged into the batch at the stage border
(:func:`_merge`), a failing call undone and retried query by query under
``runtime.on_stage_error: skip``, and a call the time budget cut inside undone and its stage
dropped (:func:`run_call`).  :mod:`lexrag.pipeline.run` walks the calls."""

from __future__ import annotations

import logging
from typing import Any

from lexrag.errors import BudgetSpent, StageError
from lexrag.pipeline.budget import Budget
from lexrag.queries import QueryState, Variant
from lexrag.ranking import Ranking
from lexrag.stages.base import BatchState, Context, Phase, Stage

log = logging.getLogger(__name__)


def _merge(batch: BatchState, stage: Stage, out: Any, n_docs: int) -> None:
    phase = stage.phase
    if phase == Phase.REWRITE:
        if not isinstance(out, dict):
            raise StageError(f"stage {stage.name!r} (rewrite) must return {{query_id: [Variant, ...]}}, got {type(out).__name__}")
        by_id = {q.query_id: q for q in batch.queries}
        for qid, variants in out.items():
            for v in variants:
                if not isinstance(v, Variant):
                    raise StageError(f"stage {stage.name!r}: query {qid!r}: {v!r} is not a Variant")
                by_id[qid].add_variant(v.name, v.text, v.origin)
        return
    if phase in (Phase.CONTENT, Phase.GRAPH):
        if not isinstance(out, list) or not all(isinstance(r, Ranking) for r in out):
            raise StageError(f"stage {stage.name!r} must return a list of Rankings")
        for r in out:
            r.validate(n_docs=n_docs, query_ids=batch.query_ids)
            batch.signals.setdefault(r.signal, Ranking(r.signal, r.family)).hits.update(r.hits)
        return
    if not isinstance(out, Ranking):
        raise StageError(f"stage {stage.name!r} ({phase.name.lower()}) must return one Ranking")
    out.validate(n_docs=n_docs, query_ids=batch.query_ids)
    target = {Phase.SEED_FUSION: batch.seeds, Phase.FUSION: batch.fused, Phase.RERANK: batch.current,
              Phase.COUNT: batch.final}[phase]
    target.update(out.hits)
    if phase == Phase.FUSION:
        batch.current.update(out.hits)
    if phase in (Phase.FUSION, Phase.RERANK):
        batch.current_by.update({qid: "fused" if phase == Phase.FUSION else stage.name for qid in out.hits})


def run_call(stage: Stage, chunk: BatchState, ctx: Context, n_docs: int, budget: "Budget", on_output=None) -> bool:
    """Run one stage call; True when the time budget ran out inside it.  An optional stage's
    call that the budget stops (:class:`BudgetSpent`: an LLM batch refused or cut) is undone for
    all its queries (their states restored), which are recorded as skipped, and the stage is
    dropped for the rest of the run (:func:`_cut`), whatever ``on_stage_error`` says.  With
    ``runtime.on_stage_error: skip`` a failing call is undone, retried one query at a time, and
    the queries that still fail lose that stage only (logged, recorded in ``failed``); with
    ``raise`` (the default) the error propagates."""
    snap = _snapshot(chunk.queries)
    try:
        out = stage.run(chunk, ctx)
        _merge(chunk, stage, out, n_docs)
        if on_output is not None:
            on_output(out)
        return False
    except Exception as e:  # noqa: BLE001 - the whole point is to contain any stage failure
        if isinstance(e, BudgetSpent) and not stage.essential:
            _restore(snap, keep_cost=True)
            _cut(stage, chunk, [q.query_id for q in chunk.queries], budget, e)
            return True
        if ctx.cfg.runtime.on_stage_error != "skip" or isinstance(e, StageError):
            raise
        _restore(snap)
        _after_failure(e)
        if len(chunk.queries) == 1:
            _record_failure(stage, chunk, chunk.queries[0].query_id, e)
            return False
    for j, q in enumerate(chunk.queries):
        if not stage.essential and budget.exhausted():
            chunk.skipped.setdefault(stage.name, []).append(q.query_id)
            continue
        one = chunk.chunk([q])
        snap = _snapshot([q])
        try:
            out = stage.run(one, ctx)
            _merge(one, stage, out, n_docs)
            if on_output is not None:
                on_output(out)
        except Exception as e:  # noqa: BLE001
            if isinstance(e, BudgetSpent) and not stage.essential:
                _restore(snap, keep_cost=True)
                _cut(stage, chunk, [r.query_id for r in chunk.queries[j:]], budget, e)
                return True
            if isinstance(e, StageError):
                raise
            _restore(snap)
            _after_failure(e)
            _record_failure(stage, chunk, q.query_id, e)
    return False


def _cut(stage: Stage, batch: BatchState, query_ids: list[str], budget: Budget, e: BudgetSpent) -> None:
    """Stage ``stage`` was stopped by the budget inside a call: ``query_ids`` (its undone
    queries) are skipped, and it is dropped for the rest of the run, the reason naming the
    query it was cut inside."""
    batch.skipped.setdefault(stage.name, []).extend(query_ids)
    inside = (e.query_ids or query_ids)[:1]
    where = f"inside query {inside[0]!r}" if inside else "inside a call"
    undone = f"query {query_ids[0]!r}" if len(query_ids) == 1 else f"{len(query_ids)} queries"
    why = f"the time budget ran out {where}; its work on {undone} undone ({str(e)[:200]})"
    budget.dropped.setdefault(stage.name, why)
    log.warning("time budget: %s dropped, %s", stage.name, why)


def _snapshot(queries: list[QueryState]) -> list[tuple]:
    """What a stage may change in a query state (variants, concepts, LLM citations, cost, trace)."""
    return [(q, dict(q.variants), dict(q.concepts), list(q.llm_citations), {k: dict(v) for k, v in q.cost.items()},
             list(q.trace)) for q in queries]


def _restore(snap: list[tuple], keep_cost: bool = False) -> None:
    """Undo a stage's work on the snapshot's query states; ``keep_cost`` keeps what it booked
    (calls a budget cut made were made, though their answers are not used)."""
    for q, variants, concepts, cits, cost, trace in snap:
        q.variants, q.concepts, q.llm_citations, q.trace = variants, concepts, cits, trace
        if not keep_cost:
            q.cost = cost


def _after_failure(e: Exception) -> None:
    if "out of memory" in str(e).lower():
        from lexrag.models import release_memory

        release_memory()


def _record_failure(stage: Stage, batch: BatchState, query_id: str, e: Exception) -> None:
    msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    log.warning("stage %s failed for query %r (%s); the query goes on without it", stage.name, query_id, msg)
    batch.failed.setdefault(stage.name, {})[query_id] = msg
