"""A validation run: pipeline over a gold file, metrics JSON and a per-query CSV."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from lexrag.io.outputs import (check_makeable, check_output_file, check_outside_artifacts, check_plain_output, claim_folder,
                            replace_text)
from lexrag.io.csvio import csv_text
from lexrag.errors import ConfigError, CsvInputError
from lexrag.config import Config, section_names
from lexrag.eval.metrics import evaluate, per_query_table
from lexrag.eval.runs import write_run_file
from lexrag.eval.status import run_status
from lexrag.eval.submission import outside_corpus, write_submission
from lexrag.pipeline import Artifacts, RunResult, SignalCache, run_pipeline
from lexrag.queries import load_gold, load_queries
from lexrag.registry import ARTIFACTS

log = logging.getLogger(__name__)
# what a validation run writes into its out_dir (checked before the run)
OUTPUTS = ("submission.csv", "per_query.csv", "metrics.json", "agent_trace.jsonl", "variants.jsonl", "signals.parquet",
           "signal_analysis.json", "report.html")

__all__ = ["validate_run", "format_metrics", "ablation_table",
           "incremental_ablation", "stage_switches", "incremental_steps", "STAGE_LABELS"]

# how a stage is named in an ablation row (other stages by their name)
STAGE_LABELS = {"bm25": "BM25", "citation_seeds": "citation seeds", "llm_seeds": "LLM seeds", "dense": "semantic",
                "rerank": "reranker", "rewrite": "LLM rewrite", "verify": "verification", "agent": "agentic loop",
                "articles": "article ranking", "feedback": "feedback (PRF)", "ranker": "learned ranker"}
# the count methods that read what a stage made (the LLM's estimate and the calibration, the ranker's
# probabilities): the rows before use a fixed count, the last row switches the method on
COUNT_ROWS = {"adaptive": "+adaptive count", "expected_f1": "+learned count"}


def _part_fields() -> dict[str, str]:
    """Loaded part -> the Artifacts attribute holding it: each artifact's own (one registered later
    too), and the dense index the semantic part loads."""
    return {**{a.name: a.attr for a in ARTIFACTS if a.attr and a.name != "corpus"}, "semantic": "dense"}


def _switch_sections(cfg: Config) -> list[str]:
    return [n for n in section_names(cfg) if hasattr(getattr(cfg, n), "enabled")]


def _with(cfg: Config, on: dict[str, bool]) -> Config:
    c = copy.deepcopy(cfg)
    for sec, v in on.items():
        getattr(c, sec).enabled = v
    return c


def stage_switches(cfg: Config) -> dict[str, list[str]]:
    """Each stage the config asks for (:func:`lexrag.stages.base.asked_for`) -> the config sections
    whose ``enabled`` it needs, read from the stage's own ``enabled``: the sections that, switched
    off alone, switch it off.  Stages no section switches (fusion, count) are left out."""
    from lexrag.stages.base import _AllLoaded, asked_for

    every = _AllLoaded()
    sections = [sec for sec in _switch_sections(cfg) if getattr(cfg, sec).enabled]
    out = {}
    for s in asked_for(cfg):
        need = [sec for sec in sections if not s.enabled(_with(cfg, {sec: False}), every)]
        if need:
            out[s.name] = need
    return out


def incremental_steps(cfg: Config) -> list[dict]:
    """The incremental ablation of ``cfg``, generated from its stages' declarations: the first row
    runs BM25 alone (every other stage's section off), each later row switches on the sections of
    one more stage (the essential ones first, then pipeline order), until the row is ``cfg``'s own
    retrieval; a stage is taken out of order when the next one would switch on another stage too,
    and stages no section separates share a row.  With a count that reads a stage
    (:data:`COUNT_ROWS`: adaptive, expected_f1) the last row switches it on (earlier rows use a
    fixed count).  Each step: ``run`` (its name), ``adds`` (stage names) and ``overrides`` (dotted
    config keys from ``cfg``)."""
    from lexrag.stages.base import asked_for

    switches = stage_switches(cfg)
    sections = sorted({sec for need in switches.values() for sec in need})
    own = cfg.count.method if cfg.count.method in COUNT_ROWS else None  # a count that reads a stage: its own last row
    fixed = {"count.method": "fixed"} if own else {}

    def asked(on: set[str]) -> set[str]:
        return {s.name for s in asked_for(_with(cfg, {sec: sec in on for sec in sections})) if s.name in switches}

    def step(name: str, adds: list[str], on: set[str]) -> dict:
        return {"run": name, "adds": adds, "overrides": {**{f"{sec}.enabled": sec in on for sec in sections}, **fixed}}

    # the core first (the essential stages: BM25, citation seeds), then the rest in pipeline order
    order = [s.name for s in sorted(every_stage(), key=lambda s: not s.essential) if s.name in switches]
    first = "bm25" if "bm25" in switches else order[0]
    on = set(switches[first])
    done = asked(on)
    steps = [step(" + ".join(STAGE_LABELS.get(n, n) for n in sorted(done, key=order.index)), sorted(done, key=order.index), on)]
    while len(done) < len(switches):
        remaining = [n for n in order if n not in done]
        pick = next((n for n in remaining if asked(on | set(switches[n])) - done == {n}), remaining[0])
        on |= set(switches[pick])
        adds = sorted(asked(on) - done, key=order.index)
        done |= set(adds)
        steps.append(step("+" + " +".join(STAGE_LABELS.get(n, n) for n in adds), adds, set(on)))
    if own:
        steps.append({"run": COUNT_ROWS[own], "adds": ["count"], "overrides": {**steps[-1]["overrides"], "count.method": own}})
    return steps


def every_stage():
    from lexrag.stages.base import registered_stages

    return registered_stages()


def format_metrics(metrics: dict, title: str = "") -> str:
    """A small aligned table of the metrics (for the demo and notebooks)."""
    keys = ["macro_f1", "precision", "recall", "recall@10", "recall@100", "ndcg@10", "map@10"]
    lines = [title] if title else []
    lines.append(f"{'metric':<12} value")
    for k in keys:
        if k in metrics:
            lines.append(f"{k:<12} {metrics[k]:.4f}")
    lines.append(f"{'queries':<12} {metrics.get('n_queries')}")
    return "\n".join(lines)


def validate_run(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path,
                 paths=None, inputs: Sequence[tuple[str, str | Path | None]] = ()) -> tuple[dict, RunResult]:
    """Run over ``queries_path`` (which has ``gold_citations``) and write into ``out_dir``:
    ``submission.csv``, ``metrics.json`` (metrics, config, timings, skipped stages, model loads,
    cost per stage: LLM calls, prompt and generated tokens, seconds), ``per_query.csv`` and
    ``variants.jsonl`` (each query's variants with their origin, LLM concepts and citations) and
    ``agent_trace.jsonl`` (one record per agentic-loop round: queries written, items kept, tokens,
    seconds; empty when the loop is off), ``signal_analysis.json`` (gold found per signal family and
    only by it, recall per citation kind, Macro F1 per course) and ``signals.parquet`` (every
    signal's ranking per query: the run file). No output may be ``queries_path`` or one of the
    other ``inputs`` (pairs of what and path, such as the config file)."""
    out = Path(out_dir)
    check_makeable(out, "out_dir")
    check_outside_artifacts(out, "out_dir", "the outputs would go with it; write them elsewhere", ConfigError)
    root = Path(artifacts.corpus_dir).parent.resolve() if artifacts.corpus_dir else None
    if root is not None and (out.resolve() == root or root in out.resolve().parents):  # as `lexrag run --out` refuses it
        raise ConfigError(f"out_dir {out_dir} is or lies inside the artifacts folder {root} the run reads (a build "
                          "replaces what is there); write the outputs elsewhere")
    out.mkdir(parents=True, exist_ok=True)
    claim_folder(out, "out_dir", ConfigError)  # held until the process ends: the notebook's plots and report too
    read = {Path(given).resolve(): (what, given) for what, given in (("queries", queries_path), *inputs)
            if given is not None and Path(given).is_file()}
    for name in OUTPUTS:  # before the run: a link, FIFO, device or folder among them is refused, not replaced or blocked on
        check_plain_output(out / name, "out_dir:")
        if (out / name).is_dir():
            raise ConfigError(f"out_dir {out_dir}: {name} there is a folder, where the run writes a file; move it, or "
                              "write the outputs to another folder")
        if (out / name).resolve() in read:
            what, given = read[(out / name).resolve()]
            raise ConfigError(f"out_dir {out_dir}: its {name} would overwrite {what} {given}; write the outputs "
                              "to another folder")
        if (out / name).is_file():  # one that cannot be replaced (immutable, a read-only disk): said before any is
            check_output_file(out / name, "out_dir:", error=ConfigError)
    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    if not gold:
        raise CsvInputError(f"{queries_path}: no query has gold citations (the gold_citations cells are empty), so there is "
                            "nothing to score; give a file with gold, or run `python -m lexrag run` for predictions only")
    outside = outside_corpus(artifacts.corpus, [c for cs in gold.values() for c in cs])
    if outside:  # no run can find them: they are misses whatever it does
        log.warning("%s: %d of %d gold citations are not citations of the corpus (e.g. %s): they count as misses; the "
                    "artifacts may lack their text (or be of another corpus)", queries_path, len(outside),
                    sum(len(cs) for cs in gold.values()), "; ".join(repr(c) for c in outside[:3]))
    result = run_pipeline(queries, artifacts, cfg, paths=paths)
    metrics = evaluate(gold, result.predictions, result.ranked)
    write_submission(out / "submission.csv", result.predictions, result.query_ids)
    rows = per_query_table(gold, result.predictions, result.ranked)
    replace_text(out / "per_query.csv", csv_text(rows))
    n = max(len(result.query_ids), 1)
    totals = result.cost_totals()
    status = run_status(cfg, artifacts, result)
    doc = {"status": status.to_dict(), "metrics": metrics, "queries": str(queries_path), "gold_outside_corpus": len(outside),
           "timings_s": result.timings,
           "degraded": result.degraded, "skipped": result.skipped, "dropped": result.dropped,
           "failed": result.failed, "model_loads": result.model_loads,
           "cost": {"total": totals, "per_query_mean": {s: {k: v / n for k, v in a.items()} for s, a in totals.items()},
                    "per_query": result.costs},
           "config": cfg.to_dict()}
    replace_text(out / "agent_trace.jsonl", "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in result.traces))
    replace_text(out / "variants.jsonl", "".join(
        json.dumps({"query_id": q.query_id, "variants": {k: {"text": v.text, "origin": v.origin} for k, v in q.variants.items()},
                    "concepts": q.concepts, "llm_citations": q.llm_citations}, ensure_ascii=False) + "\n" for q in result.states))
    replace_text(out / "metrics.json", json.dumps(doc, indent=2, ensure_ascii=False))
    from lexrag.eval.cv import read_groups
    from lexrag.eval.report import signal_analysis

    analysis = signal_analysis(result, gold, artifacts.corpus, read_groups(queries_path))
    write_run_file(out / "signals.parquet", result, artifacts.corpus)
    replace_text(out / "signal_analysis.json", json.dumps(analysis, indent=2, ensure_ascii=False))
    return metrics, result


def _parts_left(cfg: Config, art: Artifacts) -> Artifacts:
    """``art`` without the loaded parts no stage ``cfg`` asks for needs (so switching a stage off
    also drops, e.g., BM25's choice of a graph node's document when no stage reads BM25)."""
    from lexrag.stages.base import asked_for, needs_of

    needed = {n for s in asked_for(cfg) for n in needs_of(s, cfg)}
    return dataclasses.replace(art, **{f: None for n, f in _part_fields().items() if n not in needed and getattr(art, f) is not None})


def ablation_table(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path) -> list[dict]:
    """Metrics of the full run and of the run with each stage the config asks for switched off in
    turn (its own section: of the sections it needs, the one that switches off fewest other
    stages; :func:`stage_switches`).  Artifacts are loaded once; a part no remaining stage needs
    is dropped too.  Writes ``ablation.csv`` (one row per run, with the change in Macro F1 and
    Recall@100 against the full run) and returns the rows."""
    out = _claimed(out_dir)
    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)

    cache = SignalCache()  # each signal computed once across the rows

    def measure(name: str, c: Config, art: Artifacts) -> dict:
        return _measure(name, c, art, queries, gold, cache=cache)

    rows = [measure("full", cfg, artifacts)]
    switches = stage_switches(cfg)
    for stage, need in switches.items():
        if not next(s for s in every_stage() if s.name == stage).enabled(cfg, artifacts):
            continue  # absent here (no artifact or model): nothing to switch off
        own = min(need, key=lambda sec: (sum(sec in n for n in switches.values()), sec))
        c = _with(cfg, {own: False})
        rows.append(measure(f"without {STAGE_LABELS.get(stage, stage)}", c, _parts_left(c, artifacts)))
    for r in rows:
        r["delta_macro_f1"] = r["macro_f1"] - rows[0]["macro_f1"]
        r["delta_recall@100"] = r["recall@100"] - rows[0]["recall@100"]
    replace_text(out / "ablation.csv", csv_text(rows))
    return rows


def _claimed(out_dir: str | Path) -> Path:
    """``out_dir``, made and claimed for this process (:func:`lexrag.io.outputs.claim_folder`) before any work."""
    out = Path(out_dir)
    check_makeable(out, "out_dir")
    out.mkdir(parents=True, exist_ok=True)
    claim_folder(out, "out_dir", ConfigError)
    return out


def _measure(name: str, c: Config, art: Artifacts, queries, gold, paths=None, cache=None) -> dict:
    """One ablation row: the run's metrics, Macro F1's 95% bootstrap interval over queries, seconds."""
    from lexrag.eval.stats import bootstrap_ci

    res = run_pipeline(queries, art, c, paths=paths, cache=cache)
    m = evaluate(gold, res.predictions, res.ranked)
    lo, hi = bootstrap_ci([r["f1"] for r in per_query_table(gold, res.predictions, res.ranked)])
    n = max(len(res.query_ids), 1)
    return {"run": name, "macro_f1": m["macro_f1"], "ci_low": lo, "ci_high": hi,
            **{k: m[k] for k in ("precision", "recall", "recall@10", "recall@100", "ndcg@10")},
            "seconds": round(res.timings["total"], 2), "seconds_per_query": round(res.timings["total"] / n, 4)}


def _apply(cfg: Config, overrides: dict) -> Config:
    c = copy.deepcopy(cfg)
    for key, v in overrides.items():
        sec, fld = key.split(".", 1)
        setattr(getattr(c, sec), fld, v)
    return c


def incremental_ablation(cfg: Config, artifacts: Artifacts, queries_path: str | Path, out_dir: str | Path,
                         paths=None, cache: SignalCache | None = None) -> list[dict]:
    """The stages the config asks for added one after the other (:func:`incremental_steps`: BM25
    alone, then one row per stage, then the adaptive count when the config has one); a stage whose
    artifact or model is absent here is listed as such and its row not run.  Signals are computed
    once (a shared :class:`SignalCache`): a row reuses every signal an earlier row computed with
    the same inputs.  Each row has Macro F1 with a 95% bootstrap interval over queries, precision,
    recall, the change in Macro F1 against the row before with a paired permutation p-value,
    Recall@100, nDCG@10 and seconds per query.  Writes ``incremental.csv`` and
    ``incremental_per_query.csv`` (per-query F1 of every row)."""
    from lexrag.eval.stats import bootstrap_ci, paired_p_value

    out = _claimed(out_dir)
    queries = load_queries(queries_path, cfg.query.max_chars)
    gold = load_gold(queries_path)
    cache = cache or SignalCache()
    stages = {s.name: s for s in every_stage()}
    rows: list[dict] = []
    per_query: dict[str, dict[str, float]] = {}
    prev = None
    for st in incremental_steps(cfg):
        c = _apply(cfg, st["overrides"])
        absent = [n for n in st["adds"] if n != "count" and not stages[n].enabled(c, artifacts)]
        if absent:
            why = "absent (no LLM)" if any("llm" in (getattr(stages[n], "needs", None) or ()) for n in absent) \
                else "absent (no artifact or model)"
            rows.append({"run": st["run"], "status": why})
            continue
        res = run_pipeline(queries, artifacts, c, paths=paths, cache=cache)
        table = {r["query_id"]: r for r in per_query_table(gold, res.predictions, res.ranked)}
        f1 = [table[q]["f1"] for q in sorted(table)]
        per_query[st["run"]] = {q: table[q]["f1"] for q in table}
        m = evaluate(gold, res.predictions, res.ranked)
        lo, hi = bootstrap_ci(f1)
        row = {"run": st["run"], "status": "ran", "macro_f1": m["macro_f1"], "ci_low": lo, "ci_high": hi,
               "precision": m["precision"], "recall": m["recall"], "recall@100": m["recall@100"], "ndcg@10": m["ndcg@10"],
               "seconds_per_query": round(res.timings["total"] / max(len(res.query_ids), 1), 4)}
        if prev is not None:
            row["delta_macro_f1"] = row["macro_f1"] - prev[0]["macro_f1"]
            row["p_value"] = paired_p_value(prev[1], f1)
        else:
            row["delta_macro_f1"], row["p_value"] = 0.0, float("nan")
        rows.append(row)
        prev = (row, f1)
    fields = ["run", "status", "macro_f1", "ci_low", "ci_high", "delta_macro_f1", "p_value", "precision", "recall",
              "recall@100", "ndcg@10", "seconds_per_query"]
    replace_text(out / "incremental.csv", csv_text(rows, fields))
    names = list(per_query)
    replace_text(out / "incremental_per_query.csv",
                 csv_text([{"query_id": q, **{n: per_query[n].get(q, "") for n in names}} for q in sorted(gold)], ["query_id", *names]))
    log.info("incremental ablation: %d stage computations, %d reuses", sum(cache.computed.values()), cache.reused)
    return rows
