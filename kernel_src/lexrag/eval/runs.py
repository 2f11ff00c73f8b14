"""Saved runs: the run file a validation run writes (``signals.parquet``: every signal's ranking
per query, the fused and current orders, the citations written), read back by another process,
and ``lexrag fuse``: re-fuse a saved run with other fusion settings and score the fused order,
without running a stage again (the stages before fusion are what cost: BM25 and dense search
over the whole corpus, the LLM)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lexrag.config import Config, load_config, parse_overrides
from lexrag.errors import ConfigError, CsvInputError
from lexrag.eval.metrics import evaluate
from lexrag.ranking import Ranking

if TYPE_CHECKING:  # pragma: no cover
    from lexrag.pipeline import RunResult

__all__ = ["write_run_file", "read_run_file", "RunFile", "fuse_again", "add_fuse_command"]

log = logging.getLogger(__name__)
RUN_FILE = "signals.parquet"


def write_run_file(path: str | Path, result: RunResult, corpus) -> Path:
    """Every signal's ranking per query (and the fused, current and final orders) as one parquet
    table: query_id, signal, family, rank (1-based), doc_id, citation, score.  The fused order is
    the signal ``fused``, the order the count cut is ``current`` (its family says which stage made
    it: ``fused`` or ``rerank``), the citations written are ``final``; :func:`read_run_file`
    reads it back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, list] = {k: [] for k in ("query_id", "signal", "family", "rank", "doc_id", "citation", "score")}
    current = Ranking("current", result.current.family, result.current.hits)
    for r in [*result.signals, result.fused, current]:
        for qid, hits in r.hits.items():
            for rank, (d, sc) in enumerate(hits, start=1):
                for k, v in zip(cols, (qid, r.signal, r.family, rank, int(d), corpus.citations[d], float(sc))):
                    cols[k].append(v)
    for qid, cits in result.predictions.items():
        for rank, c in enumerate(cits, start=1):
            for k, v in zip(cols, (qid, "final", "final", rank, -1, c, 0.0)):
                cols[k].append(v)
    pq.write_table(pa.table(cols), path, compression="zstd")
    return Path(path)


@dataclass
class RunFile:
    """A run read back from its run file (:func:`write_run_file`): every signal's ranking, the
    fused and current orders, and the citations written per query."""

    signals: list[Ranking]
    fused: Ranking
    current: Ranking
    predictions: dict[str, list[str]]
    citations: dict[int, str] = field(default_factory=dict)  # doc_id -> its citation, for every ranked document


def read_run_file(path: str | Path) -> RunFile:
    """The run saved at ``path``, so another process can re-fuse, re-cut or score it without
    running the stages again; a file of another shape is one :class:`CsvInputError` naming it."""
    import pyarrow.parquet as pq

    want = ("query_id", "signal", "family", "rank", "doc_id", "citation", "score")
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise CsvInputError(f"{path}: not a run file (a signals.parquet a validation run wrote): {e}") from None
    if table.column_names[: len(want)] != list(want):
        raise CsvInputError(f"{path}: columns {table.column_names}, a run file has {', '.join(want)}")
    cols = {k: table.column(k).to_pylist() for k in want}
    rankings: dict[str, Ranking] = {}
    predictions: dict[str, list[tuple[int, str]]] = {}
    citations: dict[int, str] = {}
    for qid, sig, fam, rank, doc, cit, score in zip(*(cols[k] for k in want)):
        if sig == "final":
            predictions.setdefault(qid, []).append((rank, cit))
            continue
        citations[doc] = cit
        rankings.setdefault(sig, Ranking(sig, fam)).hits.setdefault(qid, []).append((rank, doc, score))
    for r in rankings.values():
        r.hits = {q: [(d, s) for _, d, s in sorted(h)] for q, h in r.hits.items()}
    fused, current = rankings.pop("fused", Ranking("fused", "fused")), rankings.pop("current", None)
    if current is not None:  # under the name of the stage that made it, as RunResult.current
        current = Ranking("fused" if current.family == "fused" else "rerank", current.family, current.hits)
    return RunFile(signals=list(rankings.values()), fused=fused, current=current or fused,
                   predictions={q: [c for _, c in sorted(v)] for q, v in predictions.items()}, citations=citations)


class _Citations:
    """What :func:`lexrag.stages.count.unique_citations` reads of a corpus, from a run file."""

    def __init__(self, citations: dict[int, str]):
        self.citations = citations


def fuse_again(run: RunFile, cfg: Config, gold: dict[str, list[str]], k: int) -> dict:
    """Re-fuse the run's signals with ``cfg``'s fusion settings and score the fused order: its
    distinct citations (with whole articles as ``count.articles_first`` and ``count.whole_articles`` ask), the first ``k``
    emitted.  The same function scores the run's own settings, so two rows compare like with
    like; the stages after fusion (reranker, learned ranker, agentic loop, an adaptive count) are
    not run again."""
    from lexrag.stages.count import emitted_order, unique_citations
    from lexrag.stages.fusion import fuse

    qids = sorted(set(run.fused.hits) | set(gold))
    fused = fuse(run.signals, cfg, qids, cfg.fusion.boost)
    corpus = _Citations(run.citations)
    ranked: dict[str, list[str]] = {}
    for q in qids:
        _, cits, scores = unique_citations(fused.hits.get(q, []), corpus)
        ranked[q] = emitted_order(cits, scores, cfg.count)[0]
    return {**evaluate(gold, {q: r[:k] for q, r in ranked.items()}, ranked), "same_as_saved": all(
        [d for d, _ in fused.hits.get(q, [])] == [d for d, _ in run.fused.hits.get(q, [])] for q in run.fused.hits)}


def _run_files(given: str) -> tuple[Path, Path]:
    """(run file, metrics.json) of a validation out_dir, or of a run file given by its path."""
    p = Path(given)
    run = p / RUN_FILE if p.is_dir() else p
    if not run.is_file():
        raise CsvInputError(f"{given}: no {RUN_FILE} there; give a validation run's out_dir (the validation notebook "
                            "writes one) or its signals.parquet")
    return run, run.parent / "metrics.json"


def cmd_fuse(args: argparse.Namespace) -> str:
    """``lexrag fuse``: its report (the CLI prints it)."""
    from lexrag.eval.expect import read_metrics_file
    from lexrag.queries import load_gold

    from lexrag.eval.trec import trec_kind

    given = args.run if isinstance(args.run, list) else [args.run]
    if any(trec_kind(g) == "run" for g in given if Path(g).is_file()):
        return fuse_trec_runs(given, args)
    if len(given) > 1:
        raise ConfigError(f"fuse: {len(given)} runs given; several are fused only as TREC run files (QUERY_ID Q0 DOCNO RANK "
                          "SCORE TAG), a validation run's out_dir is re-fused alone")
    if args.out or args.weights:
        raise ConfigError("--out and --weights are for TREC run files; a validation run's out_dir is re-fused with --set")
    run_path, metrics_path = _run_files(given[0])
    run = read_run_file(run_path)
    changes = parse_overrides(args.set)
    unknown = sorted(set(changes) - {"fusion", "count"})
    if unknown:
        raise ConfigError(f"--set {unknown[0]}.…: a saved run is re-fused only, so fusion.* and count.* can change "
                          "(for other stages, run the pipeline again)")
    doc = read_metrics_file(metrics_path) if metrics_path.is_file() else {}
    saved = doc.get("config") if isinstance(doc.get("config"), dict) else None
    if saved is None:
        raise ConfigError(f"{metrics_path}: missing or without the run's config, which the saved run is compared "
                          "under; give the out_dir a validation run wrote")
    queries = args.queries or doc.get("queries")
    if not queries:
        raise ConfigError(f"{metrics_path} names no queries file: give the gold file with --queries FILE.csv")
    if not args.queries and not Path(queries).is_file():
        raise ConfigError(f"{metrics_path} names the queries file {queries}, which is not found from here (a path "
                          "relative to where the run started?): give it with --queries FILE.csv")
    gold = load_gold(queries)
    if not gold:
        raise CsvInputError(f"{queries}: no query has gold citations, so there is nothing to score")
    base = load_config(None, saved)
    new = load_config(None, {sec: {**saved.get(sec, {}), **vals} if sec in changes else vals
                             for sec, vals in {**saved, **changes}.items()})
    k = args.k or new.count.k
    rows = [("saved settings", fuse_again(run, base, gold, k))]
    if changes:
        rows.append(("with --set", fuse_again(run, new, gold, k)))
    out = [f"{run_path}: {len(run.signals)} signals, {len(gold)} gold queries ({queries}); the fused order cut at k = {k}",
           f"{'':<16} {'macro_f1':>8} {'recall@10':>9} {'recall@100':>10} {'ndcg@10':>8}"]
    out += [f"{name:<16} {m['macro_f1']:>8.4f} {m['recall@10']:>9.4f} {m['recall@100']:>10.4f} {m['ndcg@10']:>8.4f}"
            for name, m in rows]
    if not rows[0][1]["same_as_saved"]:
        out.append("note: the saved settings re-fused do not give the run's saved fused order (a run of another version?): "
                   "compare the rows with each other only")
    after = [s for s, on in (("the reranker", base.rerank.enabled), ("the learned ranker", base.ranker.enabled),
                             ("the agentic loop", base.agent.enabled), ("the adaptive count", base.count.method != "fixed"))
             if on]
    if after:
        out.append(f"note: {', '.join(after)} of the run are not run again: these rows score the fused order, not its "
                   f"output (its macro_f1 was {doc.get('metrics', {}).get('macro_f1', float('nan')):.4f})")
    return "\n".join(out)


def fuse_trec_runs(given: list[str], args: argparse.Namespace) -> str:
    """``lexrag fuse A.trec B.trec ...``: the runs fused by weighted reciprocal ranks (``fusion.rrf_k``
    of ``--set``), written to ``--out`` as a TREC run and, with ``--queries``, scored with each run."""
    from lexrag.eval.trec import read_qrels, read_trec_run, rrf_fuse, trec_kind, write_trec_run
    from lexrag.queries import load_gold

    bad = [g for g in given if not Path(g).is_file() or trec_kind(g) != "run"]
    if bad:
        raise CsvInputError(f"{bad[0]}: not a TREC run file (QUERY_ID Q0 DOCNO RANK SCORE TAG); runs to fuse are all TREC runs")
    changes = parse_overrides(args.set)
    if set(changes) - {"fusion"} or set(changes.get("fusion", {})) - {"rrf_k"}:
        raise ConfigError("--set: TREC runs are fused with fusion.rrf_k only (weights: --weights)")
    cfg = load_config(None, changes)
    weights = [1.0] * len(given)
    if args.weights:
        try:
            weights = [float(w) for w in args.weights.split(",")]
        except ValueError:
            raise ConfigError(f"--weights {args.weights}: comma-separated numbers, one per run") from None
        if len(weights) != len(given):
            raise ConfigError(f"--weights: {len(weights)} numbers for {len(given)} runs")
    runs = [read_trec_run(g) for g in given]
    fused = rrf_fuse(runs, weights, cfg.fusion.rrf_k)
    out = [f"fused {len(given)} TREC runs ({', '.join(given)}), weights {weights}, rrf_k {cfg.fusion.rrf_k}: "
           f"{len(fused)} queries"]
    if args.out:
        from lexrag.io.outputs import check_output_file

        check_output_file(args.out, "--out", {f"run {i}": g for i, g in enumerate(given, 1)}, {}, "fused.trec", ConfigError)
        n = write_trec_run(args.out, fused, "lexrag-fused")
        out.append(f"wrote {args.out}: {n} lines")
    if args.queries:
        gold = read_qrels(args.queries) if trec_kind(args.queries) == "qrels" else load_gold(args.queries)
        if not gold:
            raise CsvInputError(f"{args.queries}: no query has gold citations, so there is nothing to score")
        k = args.k or cfg.count.k
        out.append(f"scored on {len(gold)} gold queries of {args.queries}, the first k = {k} of each ranking as the prediction")
        out.append(f"{'':<24} {'macro_f1':>8} {'recall@10':>9} {'recall@100':>10} {'ndcg@10':>8}")
        for name, r in [*zip(given, runs), ("fused", fused)]:
            ranked = {q: [c for c, _ in h] for q, h in r.items()}
            m = evaluate(gold, {q: v[:k] for q, v in ranked.items()}, ranked)
            out.append(f"{Path(name).name[:24]:<24} {m['macro_f1']:>8.4f} {m['recall@10']:>9.4f} {m['recall@100']:>10.4f} "
                       f"{m['ndcg@10']:>8.4f}")
    elif not args.out:
        raise ConfigError("fuse: give --out FILE to write the fused run and/or --queries GOLD to score it")
    return "\n".join(out)


def add_fuse_command(sub, common=None) -> None:
    f = sub.add_parser("fuse", help="re-fuse a saved validation run with other fusion settings and score the fused order "
                                    "(no stage runs again), or fuse TREC run files", parents=[common] if common else [],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Re-fuse a validation run's saved signals with other fusion or count settings and "
                                   "score the fused order, or fuse TREC runs (of lexrag run --run-file or any other "
                                   "system) by weighted reciprocal ranks.",
                       epilog="examples:\n  lexrag fuse out/demo --set fusion.rrf_k=30\n  lexrag fuse a.trec b.trec "
                              "--weights 1,0.5 --out fused.trec --queries val.csv")
    f.add_argument("run", nargs="+", help="a validation run's out_dir (or its signals.parquet), or TREC run files")
    f.add_argument("--set", action="append", metavar="fusion.FIELD=VALUE",
                   help="a fusion or count setting to compare with the run's own (repeatable); TREC runs: fusion.rrf_k")
    f.add_argument("--queries", help="the gold file, a CSV or TREC qrels (default for a validation run: the one its "
                   "metrics.json names)")
    f.add_argument("--k", type=int, help="cut the fused order at k citations (default: count.k)")
    f.add_argument("--weights", help="TREC runs: one weight per run, comma-separated (default: 1 each)")
    f.add_argument("--out", help="TREC runs: write the fused run here")
    f.set_defaults(func=cmd_fuse)
