"""Pseudo-relevance feedback (RM3-style) for long narrative questions: the ``bm25_prf`` signal.

The question's German text (or the question) is searched with BM25; from the texts of the top
:data:`FEEDBACK_DOCS` documents the :data:`FEEDBACK_TERMS` terms that weigh most there (term frequency
in those documents times the term's IDF in the corpus, words of the question excluded) are added to
the question, and the expanded text is searched again.  Exam questions are case stories whose legal vocabulary is thin;
the statute text found first supplies it.  Off by default; the kaggle preset turns it on with the
statute stages, where grouped CV says they help together.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from lexrag.ranking import Ranking
from lexrag.stages.base import OptionalBM25Stage, register_stage

__all__ = ["Feedback", "expansion_terms", "FEEDBACK_DOCS", "FEEDBACK_TERMS"]

FEEDBACK_DOCS = 10  # top documents of the first search the expansion terms come from
FEEDBACK_TERMS = 15  # expansion terms added to the question
TERM_WEIGHT = 1  # times each expansion term is repeated in the expanded query (its weight against the question's)


def expansion_terms(index, texts: list[str], question_tokens: set[str], n_terms: int) -> list[str]:
    """The ``n_terms`` analyzed terms weighing most in ``texts`` (tf x idf), question terms left out."""
    vocab = index.retriever.vocab_dict
    indptr = np.asarray(index.retriever.scores["indptr"])
    n_docs = max(int(index.retriever.scores.get("num_docs", 1)), 1)
    tf: Counter = Counter()
    for t in texts:
        tf.update(index.analyzer(t))
    weights = {}
    for term, f in tf.items():
        if term in question_tokens or term not in vocab:
            continue
        j = vocab[term]
        df = int(indptr[j + 1] - indptr[j]) if j + 1 < len(indptr) else 0
        weights[term] = f * math.log(1 + n_docs / (1 + df))
    return [t for t, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]]


class Feedback(OptionalBM25Stage):
    name = "feedback"
    # config sections its output depends on (the signal cache keys on them; query: preference_variants)
    reads = ("feedback", "lexical", "query")
    signals = ("bm25_prf",)

    def run(self, batch, ctx):
        lc, art = ctx.cfg.lexical, ctx.art
        out = Ranking("bm25_prf", "lexical")
        for q in batch.queries:
            text = q.preferred_text(ctx.cfg.query.preference_variants)
            ids, _ = art.bm25.query_search(text, lc, FEEDBACK_DOCS)
            if len(ids) == 0:
                continue
            terms = expansion_terms(art.bm25, art.corpus.texts(ids.tolist()), set(art.bm25.analyzer(text)), FEEDBACK_TERMS)
            if not terms:
                continue
            expanded = text + (" " + " ".join(terms)) * TERM_WEIGHT
            docs, scores = art.bm25.search(expanded, lc.top_k, dedup=False, question_weight=lc.question_weight, cache=False)
            out.add(q.query_id, docs, scores)
        return [out]


register_stage(Feedback())
