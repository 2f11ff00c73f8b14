"""What a config field is: its spec (default, help text and, for a number, its valid range; for a
string, its choices), the upper bounds of the numbers that size an allocation, the range check
every section passes, and the keys that moved or were removed (a config that still sets one is
told where it went or why)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

__all__ = ["field_spec", "check_ranges", "MOVED", "REMOVED", "MAX_KEPT", "MAX_ROWS", "MAX_BATCH", "MAX_TOKENS",
           "MAX_CHARS", "MAX_REPEAT", "MAX_ROUNDS", "MAX_PQ_M"]


def field_spec(default: Any, help: str, range: tuple[float | None, float | None] | None = None,
               choices: tuple[str, ...] | None = None, **kw: Any) -> Any:
    """A config field: its default, its help text and, for a number, its valid range (for a
    string, its choices).  The built-in sections make theirs with it, and so does a section
    registered beside them (:func:`lexrag.config.register_section`)."""
    meta = {"help": help, **({"range": range} if range is not None else {}), **({"choices": choices} if choices else {})}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


# Upper bounds of the fields whose value sizes an allocation (an array per query, a batch, a buffer): a value past one
# is a slip (an extra digit, 10**18) that would end in a MemoryError or a native crash deep in a stage, so the config is
# refused first, naming the field and the bound.  Each is far above any real use: a submission holds at most 200
# citations a query, and no run keeps, reranks or judges 100,000 candidates a query.
MAX_KEPT = 100_000  # documents, candidates or citations kept, searched or judged per query (top_k, depth, max_k ...)
MAX_ROWS = 10_000_000  # rows buffered at once (corpus.chunk_rows, semantic.shard_size)
MAX_BATCH = 16_384  # items per batch (a GPU batch of 16,384 sequences is past any card's memory already)
MAX_TOKENS = 1_048_576  # tokens of a sequence or an answer (the longest model contexts are 1M)
MAX_CHARS = 10_000_000  # characters of a text kept (a question, an answer, a candidate shown)
MAX_REPEAT = 1_000  # times a question's terms are repeated
MAX_ROUNDS = 1_000  # agent rounds, and planner queries a round (each one an LLM call)
MAX_PQ_M = 4_096  # PQ sub-quantizers: at most the vector's dimension (BGE-M3: 1,024)


# keys that moved to another section: a config written for the old place is told the new one
MOVED = {"graph.preference_variants": "query.preference_variants"}
# keys (and graph signals, and values of a key: "section.field=value") that were removed: a config that sets one is
# told why, not left to guess why the key is unknown.  The first seven because no measurement ever supported them;
# the relative count because it never paid, now an experiment beside the others (scripts/experiment_count.py); the
# rest are internal limits and weights that no preset set and no measurement chose, now constants of the modules that
# use them (tests/test_transfer.py holds the values here to those)
_UNMEASURED = "; never measured to help"
_RELATIVE = ("the relative count (what scores at least a share of the first score) never paid nested and left the "
             "config for scripts/experiment_count.py (docs/results.md)")
REMOVED = {
    "seeds.expand_decisions": "a decision named without a consideration expanded to all its considerations"
                              + _UNMEASURED,
    "graph.signals.popular": "the question's BM25 hits weighted by how often the court cites them" + _UNMEASURED,
    "fusion.head": "the fused top n reordered by a second fusion with other weights (measured on exam: no change)"
                   + _UNMEASURED,
    "fusion.head_boost": "the cross-signal boost of the fusion.head reorder" + _UNMEASURED,
    "fusion.head_weights": "the signal weights of the fusion.head reorder" + _UNMEASURED,
    "ranker.blend": "the learned order mixed with the fused one by reciprocal ranks (ranker.reorder=false keeps the "
                    "fused order)" + _UNMEASURED,
    "ranker.article_form": "a law paragraph written as its whole article where the ranker's article model judged the "
                           "article the likelier gold (count.articles_first emits the article beside its paragraphs)"
                           + _UNMEASURED,
    "corpus.max_error_examples": "now fixed at 20: bad rows quoted in the build report",
    "lexical.code_vote_depth": "now fixed at 50: law paragraphs that vote in the statute vote",
    "statutes.learned_codes": "now fixed at 2: codes the learned statute model adds at most",
    "statutes.vote_depth": "now fixed at 100: law paragraphs that vote for their codes in the agreement",
    "articles.sum_weight": "now fixed at 0.3: an article scores its best paragraph plus this times the others",
    "feedback.term_weight": "now fixed at 1: each expansion term counts once",
    "graph.alpha": "now fixed at 0.4: the paper's probability that PPR follows a citation",
    "graph.docs_per_node": "now fixed at 2: documents a graph signal emits per node",
    "graph.hits_max_nodes": "now fixed at 2000: the size cap of the HITS subgraph",
    "verify.expand_weight": "now fixed at 0.5: a neighbour's share of the P(Yes) of the item that brought it",
    "agent.evidence_items": "now fixed at 8: kept items shown to the planner",
    "agent.evidence_chars": "now fixed at 160: characters of each kept item's text shown to the planner",
    "llm.json_retries": "now fixed at 1: repair calls for an answer that is not the JSON asked for",
    "count.method=relative": _RELATIVE,
    "count.threshold": _RELATIVE + "; its --thresholds are this share",
    "count.relative_min_k": _RELATIVE + "; it emits at least one citation",
    "lexical.query_dedup": "now fixed at True: each query term counts once",
    "feedback.docs": "now fixed at 10: top documents the expansion terms come from",
    "feedback.terms": "now fixed at 15: expansion terms added",
    "articles.top_k": "now fixed at 100: documents kept in the bm25_article signal",
    "semantic.top_k": "now fixed at 100: the paper's documents kept per semantic signal",
    "rerank.top_n": "now fixed at 300: the paper's fused candidates reranked",
    "graph.community_resolution": "now fixed at 1.0: the paper's resolution whose communities the community signal "
                                  "uses (graph.resolutions must hold it)",
    "graph.leiden_seed": "now fixed at 42: the random seed of Leiden, so graph builds repeat",
    "prior.top_k": "now fixed at 100: documents kept per prior signal",
}



def check_ranges(sections: list[tuple[str, Any]]) -> None:
    """Every numeric field of the ``(name, section)`` pairs within its range and every string with
    choices one of them (the field's metadata), named in the error."""
    import math
    import typing

    from lexrag.errors import ConfigError, short

    for sec_name, section in sections:
        hints = typing.get_type_hints(type(section))
        for f in dataclasses.fields(section):
            tp, v, name = hints[f.name], getattr(section, f.name), f"{sec_name}.{f.name}"
            choices = f.metadata.get("choices")
            for i, x in enumerate((v if isinstance(v, list) else [v]) if choices else ()):  # a list field: each item
                if isinstance(x, str) and f"{name}={x}" in REMOVED:
                    raise ConfigError(f"{name}={x} was removed ({REMOVED[f'{name}={x}']}): choose "
                                      f"{', '.join(choices[:-1])} or {choices[-1]}")
                if x not in choices:
                    raise ConfigError(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, got {short(x)}")
                if isinstance(v, list) and x in v[:i]:  # a name given twice is a slip (a set of kinds), never meant
                    raise ConfigError(f"{name} names {short(x)} twice; give each once")
            if tp not in (int, float):
                continue
            if tp is float and not math.isfinite(v):
                raise ConfigError(f"{name} must be a finite number, got {v!r}")
            lo, hi = f.metadata.get("range", (0, None))
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                # a count below its least is told that least; past an upper bound (a count's is a cap on memory), both ends
                below = tp is int and lo is not None and v < lo
                want = f"between {lo} and {hi}" if lo is not None and hi is not None and not below else (
                    f">= {lo}" if lo is not None and (below or hi is None) else f"<= {hi}")
                raise ConfigError(f"{name} must be {want}, got {v!r}")

