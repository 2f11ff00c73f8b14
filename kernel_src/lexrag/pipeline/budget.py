"""The time budget of a run and its projection: :class:`Budget`, the seconds the rest of a run
needs, and the degrade step that drops optional stages in ``runtime.degrade_order``."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from lexrag.config import Config
from lexrag.stages.base import (
    Stage,
)

log = logging.getLogger(__name__)


@dataclass
class Budget:
    """Wall-clock budget in seconds from ``start`` (``perf_counter`` time), less ``reserve``
    seconds kept for writing the output; 0 = unlimited.  ``dropped`` holds the optional stages
    the run has given up on (see :func:`walk`), for the whole run."""

    seconds: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    reserve: float = 0.0
    dropped: dict[str, str] = field(default_factory=dict)  # stage -> why

    def left(self) -> float:
        """Seconds left before the reserve (infinite when unlimited)."""
        if self.seconds <= 0:
            return float("inf")
        return self.seconds - self.reserve - (time.perf_counter() - self.start)

    @classmethod
    def since(cls, seconds: float, started_at: float | None, reserve: float = 0.0) -> "Budget":
        """A budget that started at wall-clock time ``started_at`` (``time.time()``, e.g. the
        notebook's first cell), so loading models and artifacts counts against it."""
        start = time.perf_counter() - (time.time() - started_at) if started_at is not None else time.perf_counter()
        return cls(seconds, start, reserve)

    def exhausted(self) -> bool:
        return self.seconds > 0 and time.perf_counter() - self.start > self.seconds - self.reserve

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def projected_seconds(stages: list[Stage], current: str, first_left: int, n: int, done: dict[str, int],
                      timings: dict[str, float], estimates: dict[str, float], dropped) -> float:
    """Seconds the optional ``stages`` still need: stage ``current`` has ``first_left`` queries to
    go, the later ones ``n``; a stage's rate is its measured seconds per query once it has run,
    else its estimate."""
    total = 0.0
    for s in stages:
        if s.essential or s.name in dropped:
            continue
        rate = timings.get(s.name, 0.0) / done[s.name] if done.get(s.name) else float(estimates.get(s.name, 0.0))
        total += rate * (first_left if s.name == current else n)
    return total


def degrade(stages: list[Stage], first_left: int, n: int, done: dict[str, int], timings: dict[str, float],
             budget: Budget, cfg: Config) -> None:
    """While the projected time of the droppable stages still to run exceeds what is left after
    the other stages' projection, drop the next group of ``runtime.degrade_order`` that has a
    stage still to run (``stages[0]`` is the stage about to run, with ``first_left`` queries)."""
    left = budget.left()
    if left == float("inf") or not stages:
        return
    rc, est = cfg.runtime, cfg.runtime.stage_estimates_s
    droppable = {name for group in rc.degrade_order for name in group}
    current = stages[0].name
    fixed = projected_seconds([s for s in stages if s.name not in droppable], current, first_left, n, done, timings, est, {})
    mine = [s for s in stages if s.name in droppable]
    ahead = {s.name for s in mine}
    for group in rc.degrade_order:
        need = projected_seconds(mine, current, first_left, n, done, timings, est, budget.dropped)
        if need <= left - fixed:
            return
        fresh = [name for name in group if name in ahead and name not in budget.dropped]
        if not fresh:
            continue
        why = f"projected {seconds(need + fixed)} for the rest of the run, {seconds(max(left, 0))} left"
        for name in fresh:
            budget.dropped[name] = why
        log.warning("time budget: %s; dropping %s for the remaining queries", why, ", ".join(fresh))


def seconds(x: float) -> str:
    """``3520s``, or with one decimal under 10 s (``0.4s``), where a whole number would read 0s."""
    return f"{x:.1f}s" if x < 10 else f"{x:.0f}s"


PIECE_SHARE = 0.02  # share of the budget one optional stage call may take before the walk projects again


def piece_size(stage: Stage, n: int, done: dict[str, int], timings: dict[str, float], budget: Budget, cfg: Config) -> int:
    """How many of a chunk's ``n`` queries one call of ``stage`` takes.  All of them, unless the
    run has a budget and the stage is optional: then as many as its rate spends in a slice of the
    budget (:data:`PIECE_SHARE` of it, at most the reserve, at least one query), so a stage slower
    than its estimate is re-projected, and cut, inside a chunk.  Before its rate is measured it
    takes one query where its estimate says the chunk would not fit in a slice."""
    if stage.essential or budget.left() == float("inf"):
        return n
    slice_s = max(1.0, min(PIECE_SHARE * budget.seconds, budget.reserve if budget.reserve > 0 else float("inf")))
    if done.get(stage.name):
        rate = timings.get(stage.name, 0.0) / done[stage.name]
    else:
        rate = float(cfg.runtime.stage_estimates_s.get(stage.name, 0.0))
        if rate * n > slice_s:
            return 1  # measure it first
    return n if rate <= 0 else max(1, min(n, int(slice_s // rate)))
