"""One run status, told plainly: OK, DEGRADED or FAILED, and a row for every stage the config
asks for.

A stage is *asked for* when the config switches it on (whatever is loaded).  Each such stage
either ran for every query, or its row says why not: **missing** (a part it needs was not found
or was refused, with the reason and the fix), **dropped** (the time budget gave it up for the
rest of the run), **skipped** (queries it never reached because the budget ran out) or
**failed** (queries whose call raised, with the first error).  The run is OK only when every
stage asked for ran for every query; FAILED when there was nothing to answer with (no corpus,
lexrag not installed), the run stopped, or no query got a citation; DEGRADED otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lexrag.config import Config
from lexrag.io.procmem import process_memory
from lexrag.pipeline import artifacts as _parts  # noqa: F401  (declares every artifact and part: their fixes)
from lexrag.registry import fix_for
from lexrag.stages.base import Phase, asked_for, blocked, needs_of, registered_stages, stages_read

__all__ = ["StageRow", "RunStatus", "run_status", "failed_status", "measured", "measured_table", "fix_for"]

@dataclass
class StageRow:
    stage: str
    state: str  # ran | partial (ran without a part it reads) | missing | dropped | skipped | failed
    queries: int = 0  # queries it ran for
    total: int = 0  # queries it was asked to run for
    why: str = ""
    fix: str = ""

    def line(self) -> str:
        ran = f"{self.queries}/{self.total} queries"
        if self.state == "missing":
            detail = f"{self.why}; {self.fix}" if self.fix else self.why
        else:
            detail = f"{ran}; {self.why}" if self.why else ran
        return f"{self.stage:<15} {self.state:<8} {detail}"


@dataclass
class RunStatus:
    status: str  # OK | DEGRADED | FAILED
    rows: list[StageRow] = field(default_factory=list)
    off: list[str] = field(default_factory=list)  # stages the config leaves off
    reason: str = ""
    notes: list[str] = field(default_factory=list)  # what happened besides the rows (an LLM cache set aside)

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
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "RunStatus":
        """The status a ``metrics.json`` recorded (:meth:`to_dict`); a FAILED one keeps its headline as the reason."""
        rows = [StageRow(name, str(r.get("state", "?")), int(r.get("queries", 0) or 0), int(r.get("total", 0) or 0),
                         str(r.get("why", "")), str(r.get("fix", ""))) for name, r in (doc.get("stages") or {}).items()
                if isinstance(r, dict)]
        status = str(doc.get("status", "?"))
        reason = str(doc.get("headline", "")).removeprefix("FAILED: ") if status == "FAILED" else ""
        return cls(status, rows, [str(x) for x in doc.get("off") or []], reason, [str(x) for x in doc.get("notes") or []])

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "headline": self.headline,
                "stages": {r.stage: {k: v for k, v in vars(r).items() if k != "stage" and v not in ("", None)} for r in self.rows},
                "off": list(self.off), **({"notes": list(self.notes)} if self.notes else {})}


def run_status(cfg: Config, art: Any, res: Any, n_queries: int | None = None) -> RunStatus:
    """The status of a finished run: ``art`` the loaded :class:`lexrag.pipeline.Artifacts`,
    ``res`` its :class:`lexrag.pipeline.RunResult`."""
    live = n_queries if n_queries is not None else len([q for q in res.states if q.text]) if res.states else len(res.query_ids)
    rows: list[StageRow] = []
    off: list[str] = []
    totals = res.cost_totals()
    asked = {s.name for s in asked_for(cfg)}
    needs = blocked(cfg)  # switched on, but a switch they need is off: said as missing, not listed as off
    finders: list[str] = []  # content stages that ran: the ones that put documents among the candidates
    for stage in registered_stages():
        if stage.phase == Phase.SEED_FUSION:
            continue
        if stage.name in needs:
            want = needs[stage.name]
            rows.append(StageRow(stage.name, "missing", 0, live, f"{stage.name}.enabled is on, but it needs "
                                 f"{' or '.join(want) or 'more than one stage the config leaves off'}, which is off",
                                 fix=(f"--set {want[0]}=true, or " if want else "") + f"--set {stage.name}.enabled=false"))
            continue
        if stage.name not in asked:
            off.append(stage.name)
            continue
        if not stage.enabled(cfg, art):
            parts = [p for p in needs_of(stage, cfg) if p in art.missing] or list(needs_of(stage, cfg))
            why = "; ".join(f"{p}: {_brief(art.missing[p], _fix(art, p))}" for p in parts if p in art.missing) or \
                f"needs {', '.join(parts) or 'a part'} that was not loaded"
            fix = "; ".join(f for f in (_fix(art, p) for p in parts) if f)
            rows.append(StageRow(stage.name, "missing", 0, live, why, fix))
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
            lacking = [p for p in getattr(stage, "uses", ()) if p in art.missing]  # parts it reads when the config asks
            if lacking:
                rows[-1].state = "partial"
                rows[-1].why = "without " + "; ".join(
                    f"{p} ({'; '.join(x for x in (_brief(art.missing[p], _fix(art, p)), _fix(art, p)) if x)})"
                    for p in lacking)
        _short_of(rows[-1], stage, res, rows, live)
        if stage.phase == Phase.CONTENT and rows[-1].state in ("ran", "partial"):
            finders.append(stage.name)
        bad_json = int(totals.get(stage.name, {}).get("json_failures", 0))
        if bad_json:  # the stage ran, but some of its LLM answers could not be used
            rows[-1].why = "; ".join(x for x in (rows[-1].why, f"{bad_json} LLM answers were not usable JSON and were "
                                                 "left out (the log names the queries)") if x)
    status = "OK" if all(r.state == "ran" for r in rows) else "DEGRADED"
    notes = list(getattr(art, "notes", []))
    budget_s, spent = getattr(res, "budget_s", 0.0) or 0.0, getattr(res, "budget_elapsed_s", 0.0) or 0.0
    if budget_s > 0 and spent > budget_s:  # said, not DEGRADED: the stages ran, the budget was not kept
        notes.append(f"the run took {spent:.1f}s of a time budget of {budget_s:g}s (runtime.time_budget_s): "
                     f"{spent - budget_s:.1f}s over")
    predictions = getattr(res, "predictions", None)
    n_all = len(getattr(res, "query_ids", None) or [])
    if not live and n_all:  # a file of blank questions: nothing was asked, so nothing ran
        return RunStatus("FAILED", rows, off, reason=f"every one of the {n_all} queries is blank: nothing was asked (is the "
                         "question column empty, or the wrong column?)", notes=notes)
    if live and predictions is not None and not any(predictions.values()):  # nothing answered: the run did not do its job
        why = (f"{', '.join(finders)} ran and found nothing" if finders else "no stage that finds candidates ran (is every "
               "retrieval stage off, e.g. lexical.enabled and seeds.enabled false?)")
        left = [r.stage for r in rows if r.state != "ran"]
        if left:
            why += f"; did not run: {', '.join(left)} (the table says why)"
        return RunStatus("FAILED", rows, off, reason=f"none of the {live} queries got a citation: {why}", notes=notes)
    return RunStatus(status, rows, off, notes=notes)


def _short_of(row: StageRow, stage: Any, res: Any, rows: list[StageRow], live: int) -> None:
    """Where ``stage`` ran but did less than the config asked, its row says so and counts only the
    queries it did that for: queries a stage it reads (``reads_stages``) did not run for have
    nothing of that stage's to read, and the stage's own shortfalls (``res.partial``: a count cut
    at count.k where it should read the ranker) are named with their reason."""
    if row.state == "missing":
        return
    own = set(res.skipped.get(stage.name, [])) | set(res.failed.get(stage.name, {}))
    short: set[str] = set()
    whys: list[str] = []
    ids = [q.query_id for q in getattr(res, "states", []) if q.text] or list(getattr(res, "query_ids", []))
    for name in stages_read(stage):
        up = next((r for r in rows if r.stage == name), None)
        if up is None or up.state == "missing":  # off in the config, or switched off: none of its output exists
            lack = set(ids) - own
            how = "is off in the config" if up is None else f"is missing ({up.why})"
        else:
            lack = (set(res.skipped.get(name, [])) | set(res.failed.get(name, {}))) - own
            how = f"was {up.state}" if up.state in ("dropped", "skipped", "failed") else "did not run for them"
        if lack:
            n = len(lack)
            whys.append(f"reads the {name} stage's output, and {name} did not run for {n} of the queries "
                        f"({name} {how}): nothing to read for them")
            short |= lack
    mine = (getattr(res, "partial", None) or {}).get(stage.name)
    if mine:
        whys.append(mine["why"])
        short |= set(mine["queries"]) - own
    if not whys:
        return
    row.queries = max(min(row.queries, live - len(short)), 0)
    row.why = "; ".join(x for x in (row.why, *whys) if x)
    if row.state == "ran":
        row.state = "partial"


def _fix(art: Any, part: str) -> str:
    """How to provide a missing part: what the artifacts recorded for it, else the standard fix."""
    return getattr(art, "fixes", {}).get(part) or fix_for(part)


def _brief(reason: str, fix: str = "") -> str:
    """A missing part's reason for the table, whole: without the exception's class name, the list
    of places searched (the log has the whole message) and a clause that only says what the fix
    column says (how to make or attach it), so the row says each thing once."""
    head, sep, rest = reason.partition(": ")
    text = rest if sep and head.isidentifier() and head[:1].isupper() else reason
    text = text.split(" (searched ")[0].split(" (make it: ")[0]  # the fix column says how to make it
    clauses = []
    for clause in text.split("; "):
        clause = clause.split(": searched ")[0]
        if fix and clause and (clause in fix or fix.startswith(clause.split(" (")[0])):
            continue  # the fix column says it
        clauses.append(clause)
    return "; ".join(c for c in clauses if c)


def failed_status(reason: str) -> RunStatus:
    """The status of a run that could not answer at all (no corpus, lexrag not installed, an error)."""
    return RunStatus("FAILED", [], [], reason)


def measured(cfg: Config, res: Any, art: Any = None) -> dict[str, Any]:
    """What the run measured about itself, beside the plan: per stage that ran, seconds per query
    against ``runtime.stage_estimates_s`` and, for the LLM stages, prompt and generated tokens per
    second, and the anonymous memory its runs left resident (models it loaded, caches it filled);
    per model, its load seconds; per GPU, the peak memory torch allocated (when CUDA ran); this
    process's memory (peak, and now: anonymous and file pages) and, given the artifacts, what
    loading each part took and added."""
    n = max(len(res.query_ids), 1)
    totals = res.cost_totals()
    est = cfg.runtime.stage_estimates_s
    stages: dict[str, dict[str, float]] = {}
    for name, secs in res.timings.items():
        if name == "total":
            continue
        row = {"s_per_query": round(secs / n, 3)}
        if name in res.memory_added:
            row["anon_gb_added"] = round(res.memory_added[name], 2)
        if name in est:
            row["plan_s_per_query"] = float(est[name])
        amounts = totals.get(name, {})
        if amounts.get("llm_calls"):
            llm_s = amounts.get("seconds", secs) or secs
            row["prompt_tok_per_s"] = round(amounts.get("prompt_tokens", 0.0) / max(llm_s, 1e-9), 1)
            row["gen_tok_per_s"] = round(amounts.get("gen_tokens", 0.0) / max(llm_s, 1e-9), 1)
        stages[name] = row
    out: dict[str, Any] = {"stages": stages, "model_load_s": {k: round(v, 1) for k, v in res.model_load_seconds.items()},
                           "host_memory_gb": {k: round(v, 2) for k, v in process_memory().items()}}
    if art is not None and getattr(art, "loads", None):
        out["loads"] = dict(art.loads)
    try:
        import sys

        torch = sys.modules.get("torch")  # only when a model ran: importing torch costs seconds
        if torch is not None and torch.cuda.is_available():
            out["peak_gpu_gb"] = {f"cuda:{i}": round(torch.cuda.max_memory_allocated(i) / 2**30, 2)
                                  for i in range(torch.cuda.device_count())}
    except Exception:  # noqa: BLE001 - a measurement never fails the run
        pass
    return out


def _load_text(name: str, v: dict[str, float]) -> str:
    """``bm25 15.0s +3.0 GB`` (and the file pages it touched, when any)."""
    text = f"{name} {v['s']}s"
    if "anon_gb" in v:
        text += f" {v['anon_gb']:+.1f} GB"
        if v["file_gb"] >= 0.05:
            text += f" ({v['file_gb']:+.1f} GB file pages)"
    return text


def measured_table(m: dict[str, Any]) -> str:
    """The measurements as lines: stage, seconds per query (plan), tokens per second."""
    lines = [f"{'measured':<15} {'s/query':>8} {'plan':>8} {'+GB':>6}  tokens/s (prompt, generated)"]
    for name, row in m["stages"].items():
        plan = f"{row['plan_s_per_query']:.2f}" if "plan_s_per_query" in row else "-"
        mem = f"{row['anon_gb_added']:+.2f}" if "anon_gb_added" in row else "-"
        tok = f"{row['prompt_tok_per_s']:.0f}, {row['gen_tok_per_s']:.0f}" if "gen_tok_per_s" in row else ""
        lines.append(f"{name:<15} {row['s_per_query']:>8.3f} {plan:>8} {mem:>6}  {tok}".rstrip())
    if m["model_load_s"]:
        lines.append("model loads: " + ", ".join(f"{k} {v}s" for k, v in m["model_load_s"].items()))
    if m.get("peak_gpu_gb"):
        lines.append("peak GPU memory: " + ", ".join(f"{k} {v} GB" for k, v in m["peak_gpu_gb"].items()))
    mem = m.get("host_memory_gb") or {}
    if "anon" in mem:
        lines.append(f"host memory: peak {mem['peak']:.1f} GB resident; now {mem['resident']:.1f} GB = {mem['anon']:.1f} GB "
                     f"anonymous + {mem['file']:.1f} GB file pages (memory-mapped artifacts: shared with the page cache, "
                     f"reclaimable)")
    elif "peak" in mem:
        lines.append(f"host memory: peak {mem['peak']:.1f} GB resident")
    if m.get("loads"):
        lines.append("artifact loads: " + ", ".join(_load_text(k, v) for k, v in m["loads"].items()))
        lines.append("(GB: 2^30 bytes; +GB: anonymous memory a stage's runs or a load left resident)")
    return "\n".join(lines)


def recorded_state(doc: dict) -> str | None:
    """The run status a metrics.json records (OK, DEGRADED, FAILED), None when it records none;
    a status of a shape no run writes (a list, a number, a mapping without its status) is
    ``UNREADABLE (...)``, which is not OK: nothing can tell what that run did."""
    status = doc.get("status")
    if status is None:
        return None
    if isinstance(status, str):  # a blank one is no state a run writes
        return status.split(":")[0].strip() or "UNREADABLE (a blank status)"
    if not isinstance(status, dict):
        return f"UNREADABLE (a {type(status).__name__} where the run writes its status)"
    state = status.get("status")
    if isinstance(state, str):
        return state.strip() or "UNREADABLE (a blank status)"
    headline = status.get("headline")
    if isinstance(headline, str) and headline.strip():
        return headline.split(":")[0].strip()
    return "UNREADABLE (a status without its state or headline)"
