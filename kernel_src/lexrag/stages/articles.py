"""Article-level ranking: exam answers cite articles and paragraphs; an article is scored from its
paragraphs (the best one plus a share of the rest) and the paragraphs of the best articles form
the ``bm25_article`` signal.
"""

from __future__ import annotations

import weakref

import numpy as np

from lexrag.ranking import Ranking, best_first
from lexrag.stages.base import OptionalBM25Stage, register_stage

__all__ = ["Articles", "article_scores", "TOP_K"]

TOP_K = 100  # documents kept in the bm25_article signal
SUM_WEIGHT = 0.3  # an article scores its best paragraph plus this times its other paragraphs' scores


class _ArticleIndex:
    """Per document its article (the corpus ``parent`` of a law paragraph) as an integer id."""

    def __init__(self, corpus):
        ids: dict[str, int] = {}
        self.article = np.fromiter((ids.setdefault(p, len(ids)) if s == "law" else -1
                                    for p, s in zip(corpus.parents, corpus.sources)), dtype=np.int64, count=len(corpus))
        self.n = len(ids)
        # the law paragraphs grouped by article, so per-article max and sum are two reduceat calls
        law = np.flatnonzero(self.article >= 0)
        self.order = law[np.argsort(self.article[law], kind="stable")]
        grouped = self.article[self.order]
        self.starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(grouped) else grouped
        self.group_article = grouped[self.starts]


_ARTICLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def article_scores(index: _ArticleIndex, scores: np.ndarray, sum_weight: float = SUM_WEIGHT) -> np.ndarray:
    """An article's score from its paragraphs: the best paragraph plus ``sum_weight`` times the others."""
    best = np.zeros(index.n)
    total = np.zeros(index.n)
    if len(index.order):
        grouped = np.asarray(scores, dtype=np.float64)[index.order]
        best[index.group_article] = np.maximum.reduceat(grouped, index.starts)
        total[index.group_article] = np.add.reduceat(grouped, index.starts)
    return best + sum_weight * (total - best)


class Articles(OptionalBM25Stage):
    """Article-level ranking: paragraphs scored by BM25, articles scored from their paragraphs, the
    paragraphs of the best articles emitted (best article first; inside it, by paragraph score), so
    a strong article brings its key-only paragraphs too."""

    name = "articles"
    reads = ("articles", "lexical", "query")  # query: preference_variants
    signals = ("bm25_article",)

    def run(self, batch, ctx):
        ac, lc, art = ctx.cfg.articles, ctx.cfg.lexical, ctx.art
        index = _ARTICLES.get(art.corpus) or _ARTICLES.setdefault(art.corpus, _ArticleIndex(art.corpus))
        out = Ranking("bm25_article", "lexical")
        for q in batch.queries:
            scores = art.bm25.query_scores(q.preferred_text(ctx.cfg.query.preference_variants), lc)
            if scores is None:
                continue
            a = article_scores(index, scores, SUM_WEIGHT)
            top = np.flatnonzero(a > 0)
            top = best_first(top, a[top])[: ac.top_articles]
            if len(top) == 0:
                continue
            rank = np.full(index.n, -1, dtype=np.int64)
            rank[top] = np.arange(len(top))
            docs = np.flatnonzero((index.article >= 0) & (rank[np.maximum(index.article, 0)] >= 0))
            docs = docs[np.lexsort((docs, -scores[docs], rank[index.article[docs]]))][:TOP_K]
            n = len(docs)
            out.add(q.query_id, docs, np.linspace(1.0, 1.0 / n, n))  # the order is the signal
        return [out]


register_stage(Articles())
