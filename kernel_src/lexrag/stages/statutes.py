"""The statute stage: the BM25 ranking of the question restricted to the paragraphs of the codes
it names (:func:`lexrag.index.statutes.statute_codes`, at most ``statutes.max_codes``, in the order
the question names them) is the signal ``bm25_statute``.  It is fused like any other signal, so it
boosts those codes' paragraphs without filtering anything out.  The codes the statute vote and the
learned model agree on (:func:`lexrag.index.statutes.agreed_codes`) give a second signal,
``bm25_statute_agreed``, deeper (``statutes.agreed_top_k``) and at half weight by default: a code
both predictors rank high is a gold code about twice as often as the codes of ``bm25_statute``.
"""

from __future__ import annotations

import numpy as np

from lexrag.index.statutes import agreed_codes, detector_for, predicted_codes, statute_codes
from lexrag.ranking import Ranking, best_first
from lexrag.stages.base import OptionalBM25Stage, register_stage

__all__ = ["Statutes"]


class Statutes(OptionalBM25Stage):
    name = "statutes"
    # config sections its output depends on (the signal cache keys on them; query: preference_variants)
    reads = ("statutes", "lexical", "prior", "query")
    signals = ("bm25_statute", "bm25_statute_agreed")

    def run(self, batch, ctx):
        sc, lc, art = ctx.cfg.statutes, ctx.cfg.lexical, ctx.art
        det = detector_for(art.corpus)
        out = Ranking("bm25_statute", "lexical")
        agreed = Ranking("bm25_statute_agreed", "lexical")
        for q in batch.queries:
            text = " ".join(v.text for v in q.variants.values())
            predicted = predicted_codes(det, text, sc, art.prior, q.query_id)
            codes = statute_codes(det, text, sc, predicted=predicted)
            if not codes and not (sc.agree > 0 and sc.learned and art.prior is not None):
                continue  # nothing named, nothing to agree on: no BM25 pass
            scores = art.bm25.query_scores(q.preferred_text(ctx.cfg.query.preference_variants), lc)
            if scores is None:
                continue
            both = agreed_codes(det, text, sc, art.prior, scores=scores, predicted=predicted)
            for ranking, these, k in ((out, codes, sc.top_k), (agreed, both, sc.agreed_top_k)):
                keep = np.flatnonzero(det.mask(these) & (scores > 0)) if these else np.empty(0, dtype=np.int64)
                if len(keep):
                    top = best_first(keep, scores[keep])[:k]
                    ranking.add(q.query_id, top, scores[top])
        return [out, agreed]


register_stage(Statutes())
