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

    run_path, metrics_path = _run_files(args.run)
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


def add_fuse_command(sub) -> None:
    f = sub.add_parser("fuse", help="re-fuse a saved validation run with other fusion settings and score the fused order "
                                    "(no stage runs again)")
    f.add_argument("run", help="a validation run's out_dir (or its signals.parquet)")
    f.add_argument("--set", action="append", metavar="fusion.FIELD=VALUE",
                   help="a fusion or count setting to compare with the run's own (repeatable)")
    f.add_argument("--queries", help="the gold file (default: the one the run's metrics.json names)")
    f.add_argument("--k", type=int, help="cut the fused order at k citations (default: count.k)")
    f.set_defaults(func=cmd_fuse)
