"""Weighted reciprocal rank fusion with a cross-signal boost; the seed-fusion and fusion stages."""

from __future__ import annotations

from typing import Mapping, Sequence

from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

__all__ = ["reciprocal_rank_fusion", "fuse", "SeedFusion", "Fusion", "BOOST_PAIRS"]

# The family pairs the cross-signal boost applies to: a document that a content family (lexical,
# semantic, seeds) and the citation graph both find.  The training prior (family "prior") is not
# among them: what earlier questions cited is no independent evidence of a question's content.
BOOST_PAIRS = (("lexical", "graph"), ("semantic", "graph"), ("seed", "graph"))


def reciprocal_rank_fusion(
    runs: Sequence[Ranking],
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
    default_weight: float = 1.0,
    depth: int | None = None,
    boost: float = 1.0,
    boost_exclude: frozenset[str] | set[str] = frozenset(),
    signal: str = "fused",
    boost_pairs: Sequence[tuple[str, str]] = BOOST_PAIRS,
) -> Ranking:
    """Fuse rankings: ``score(d) = sum_s w_s / (k + r_s(d))`` with 1-based ranks ``r_s``.

    Reciprocal rank fusion after Cormack, Clarke and Buettcher (SIGIR 2009), k = 60; weighted
    per signal as in the Hybrid GraphRAG paper.  A document found by both families of one of
    ``boost_pairs`` (:data:`BOOST_PAIRS`: a content family and the graph) has its fused score
    multiplied by ``boost`` (paper: 5.0); signals in ``boost_exclude`` do not count towards it (siblings: being another
    paragraph of a lexical hit is not independent evidence).  Ties break by doc_id so results
    repeat exactly.  ``depth`` keeps the top
    documents per query.
    """
    weights = weights or {}
    fused: dict[str, dict[int, float]] = {}
    families: dict[str, dict[int, set[str]]] = {}
    for run in runs:
        w = float(weights.get(run.signal, default_weight))
        for qid, hits in run.hits.items():
            acc = fused.setdefault(qid, {})
            fam = families.setdefault(qid, {})
            for rank, (doc, _) in enumerate(hits, start=1):
                acc[doc] = acc.get(doc, 0.0) + w / (rrf_k + rank)
                if run.signal not in boost_exclude:
                    fam.setdefault(doc, set()).add(run.family)
    out = Ranking(signal=signal, family="fused")
    for qid, acc in fused.items():
        if boost != 1.0:
            for doc, fams in families.get(qid, {}).items():
                if any(a in fams and b in fams for a, b in boost_pairs):
                    acc[doc] *= boost
        ranked = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))
        if depth is not None:
            ranked = ranked[:depth]
        out.hits[qid] = ranked
    return out


def _restrict(signals, query_ids: list[str]) -> list[Ranking]:
    keep = set(query_ids)
    return [Ranking(r.signal, r.family, {q: h for q, h in r.hits.items() if q in keep}) for r in signals]


def fuse(signals, cfg, query_ids: list[str], boost: float, signal: str = "fused", weights: Mapping[str, float] | None = None,
         depth: int | None = -1) -> Ranking:
    """Weighted RRF of ``signals`` for ``query_ids`` with the config's weights (or ``weights``),
    depth (or ``depth``; None keeps all) and ``boost``."""
    fc = cfg.fusion
    return reciprocal_rank_fusion(
        _restrict(signals, query_ids), rrf_k=fc.rrf_k, weights=fc.weights if weights is None else weights,
        default_weight=fc.default_weight, depth=fc.depth if depth == -1 else depth, boost=boost,
        boost_exclude=frozenset(fc.boost_exclude), signal=signal,
    )


class SeedFusion:
    """The content signals fused without boost: the candidates whose top ``graph.seed_k`` seed
    the graph and prior signals."""

    name = "seed_fusion"
    family = "fused"
    phase = Phase.SEED_FUSION
    essential = True
    signals = ()
    needs: tuple[str, ...] = ()

    def enabled(self, cfg, art) -> bool:
        return art.graph is not None or art.prior is not None

    def run(self, batch, ctx):
        return fuse(batch.signals.values(), ctx.cfg, batch.query_ids, 1.0, signal="seed_fused")


class Fusion:
    """Every signal fused by weighted RRF with the cross-signal boost (paper: 5.0)."""

    name = "fusion"
    family = "fused"
    phase = Phase.FUSION
    essential = True
    signals = ()
    needs: tuple[str, ...] = ()

    def enabled(self, cfg, art) -> bool:
        return True

    def run(self, batch, ctx):
        fc = ctx.cfg.fusion
        found = [s.signal for s in batch.signals.values() if any(s.hits.values())]
        if found and not any(float(fc.weights.get(s, fc.default_weight)) > 0 for s in found):
            ctx.note("fusion_all_zero", "every signal that found documents has fusion weight 0 (fusion.weights, "
                     "fusion.default_weight): the fused order is document-id order, not a ranking")
        return fuse(batch.signals.values(), ctx.cfg, batch.query_ids, fc.boost)


register_stage(SeedFusion())
register_stage(Fusion())
