"""One run status, told plainly: OK, DEGRADED or FAILED, and a row for every stage the config
asks for.

A stage is *asked for* when the config switches it on (whatever is loaded).  Each such stage
either ran for every query, or its row says why not: **missing** (a part it needs was not found
or was refused, with the reason and the fix), **dropped** (the time budget gave it up for the
rest of the run), **skipped** (queries it never reached because the budget ran out) or
**failed** (queries whose call raised, with the first error).  The run is OK only when every
stage asked for ran for every query; FAILED when there was nothing to answer with (no corpus,
lexrag not installed) or the run stopped; DEGRADED otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lexrag.config import Config
from lexrag.stages.base import Phase, asked_for, registered_stages

__all__ = ["StageRow", "RunStatus", "run_status", "failed_status", "FIXES"]

# how to get a part back, by the name Artifacts.load records it under
FIXES = {
    "bm25": "attach the lexrag-bm25 dataset built over the attached corpus",
    "graph": "attach the lexrag-graph dataset built over the attached corpus",
    "prior": "attach the lexrag-prior dataset (build_datasets.py --only prior --train train.csv)",
    "semantic": "attach the lexrag-embeddings dataset and the BGE-M3 model (semantic.model)",
    "reranker": "attach bge-reranker-v2-m3 (rerank.model)",
    "llm": "attach Qwen2.5-7B-Instruct (llm.model) on a GPU machine, or the lexrag-llm-cache dataset to replay",
    "calibration": "run `python -m lexrag calibrate` or set count.method: elbow",
}


@dataclass
class StageRow:
    stage: str
    state: str  # ran | missing | dropped | skipped | failed
    queries: int = 0  # queries it ran for
    total: int = 0  # queries it was asked to run for
    why: str = ""
    fix: str = ""

    def line(self) -> str:
        ran = f"{self.queries}/{self.total} queries"
        detail = {"ran": ran, "missing": f"{self.why}; {self.fix}" if self.fix else self.why}.get(self.state, f"{ran}; {self.why}")
        return f"{self.stage:<15} {self.state:<8} {detail}"


@dataclass
class RunStatus:
    status: str  # OK | DEGRADED | FAILED
    rows: list[StageRow] = field(default_factory=list)
    off: list[str] = field(default_factory=list)  # stages the config leaves off
    reason: str = ""

    @property
    def headline(self) -> str:
        bad = [r.stage for r in self.rows if r.state != "ran"]
        if self.status == "OK":
            return f"OK: every stage the config asks for ran for every query ({len(self.rows)} stages)"
        if self.status == "FAILED":
            return f"FAILED: {self.reason}"
        return f"DEGRADED: {len(bad)} of {len(self.rows)} stages the config asks for did not run for every query: {', '.join(bad)}"

    def table(self) -> str:
        lines = [self.headline]
        if self.rows:
            lines.append(f"{'stage':<15} {'state':<8} detail")
            lines += [r.line() for r in self.rows]
        if self.off:
            lines.append(f"off in the config: {', '.join(self.off)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "headline": self.headline,
                "stages": {r.stage: {k: v for k, v in vars(r).items() if k != "stage" and v not in ("", None)} for r in self.rows},
                "off": list(self.off)}


def run_status(cfg: Config, art: Any, res: Any, n_queries: int | None = None) -> RunStatus:
    """The status of a finished run: ``art`` the loaded :class:`lexrag.pipeline.Artifacts`,
    ``res`` its :class:`lexrag.pipeline.RunResult`."""
    live = n_queries if n_queries is not None else len([q for q in res.states if q.text]) if res.states else len(res.query_ids)
    rows: list[StageRow] = []
    off: list[str] = []
    asked = {s.name for s in asked_for(cfg)}
    for stage in registered_stages():
        if stage.phase == Phase.SEED_FUSION:
            continue
        if stage.name not in asked:
            off.append(stage.name)
            continue
        if not stage.enabled(cfg, art):
            parts = [p for p in getattr(stage, "needs", ()) if p in art.missing] or list(getattr(stage, "needs", ()))
            why = "; ".join(f"{p}: {art.missing[p]}" for p in parts if p in art.missing) or \
                f"needs {', '.join(parts) or 'a part'} that was not loaded"
            rows.append(StageRow(stage.name, "missing", 0, live, why, "; ".join(FIXES[p] for p in parts if p in FIXES)))
            continue
        skipped = len(set(res.skipped.get(stage.name, [])))
        failed = res.failed.get(stage.name, {})
        ran = max(live - skipped - len(failed), 0)
        if stage.name in res.dropped:
            rows.append(StageRow(stage.name, "dropped", ran, live, f"dropped by the time budget ({res.dropped[stage.name]})"))
        elif skipped:
            rows.append(StageRow(stage.name, "skipped", ran, live, f"{skipped} queries past the time budget"))
        elif failed:
            first = next(iter(failed.items()))
            rows.append(StageRow(stage.name, "failed", ran, live, f"{len(failed)} queries failed, first {first[0]!r}: {first[1]}"))
        else:
            rows.append(StageRow(stage.name, "ran", ran, live))
    status = "OK" if all(r.state == "ran" for r in rows) else "DEGRADED"
    return RunStatus(status, rows, off)


def failed_status(reason: str) -> RunStatus:
    """The status of a run that could not answer at all (no corpus, lexrag not installed, an error)."""
    return RunStatus("FAILED", [], [], reason)
