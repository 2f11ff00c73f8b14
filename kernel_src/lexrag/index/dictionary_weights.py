"""How the German senses of an English key share its weight in the search text: BM25's boost
syntax (``Haft^0.5``), under each ``dictionary.weighting`` (:func:`weighted`)."""

from __future__ import annotations

from lexrag.config.sections import WEIGHTINGS

__all__ = ["weighted", "boost"]


def boost(word: str, w: float) -> str:
    """``word`` at weight ``w`` in BM25's boost syntax, never below 0.001 (the syntax takes no exponent)."""
    return f"{word}^{max(w, 0.001):.2g}"


def weighted(senses: list[str], weighting: str = "uniform", index=None, top_stems: dict[str, int] | None = None) -> list[str]:
    """The words of an English key's German senses in BM25's boost syntax (``Haft^0.33``).

    - ``uniform``: each of the n senses 1/n;
    - ``indexed``: only the senses the index holds a word of, each 1/n of those n (a sense no
      document holds finds nothing, yet took its share from the others);
    - ``structured``: the indexed senses, each 1/n scaled by idf(key) / idf(sense), where the key's
      document frequency is the mean of its senses' (Darwish and Oard's probabilistic structured
      query, approximated over the index's precomputed term weights): the key's senses count as
      one word of one idf, so a rare, wrong sense ("unit" -> Kraftwerksblock) cannot outweigh
      the common, right one (Einheit) through its idf; a sense rarer than the key is capped at
      weight 1 (a single word's), so the senses may sum to more than 1;
    - ``first_pass``: the indexed senses, each in proportion to 1 + the number of the first search's
      top documents that hold it (``top_stems``: term -> documents; Ballesteros and Croft's
      disambiguation by the documents the whole question finds: the sense that fits the other
      words' senses wins).
    A word stands for its :meth:`~lexrag.index.lexical.BM25Index.word_term` (its own stem, else its
    rarest indexed part: a compound whose parts are indexed is held); a sense's document frequency
    is its rarest word's, its count in the top documents its scarcest word's.  One sense keeps
    weight 1; no weight is written below 0.001 (BM25's boost syntax takes no exponent)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"dictionary weighting {weighting!r}: choose one of {', '.join(WEIGHTINGS)}")
    if weighting == "first_pass" and top_stems is None:
        raise ValueError("dictionary weighting 'first_pass' counts senses in the first search's top documents: give top_stems")
    weights = [1.0 / len(senses)] * len(senses)
    if weighting != "uniform" and len(senses) > 1:
        terms = [[h for w in sense.split() if (h := index.word_term(w)) is not None] for sense in senses]  # (term, df)
        held = [i for i, t in enumerate(terms) if t]
        if held:
            senses, terms = [senses[i] for i in held], [terms[i] for i in held]
            weights = [1.0 / len(senses)] * len(senses)
            if weighting == "first_pass":
                hits = [1 + min(top_stems.get(term, 0) for term, _ in t) for t in terms]
                weights = [h / sum(hits) for h in hits]
            if weighting == "structured":
                dfs = [min(df for _, df in t) for t in terms]
                key_idf = index.idf(sum(dfs) / len(dfs))
                weights = [min(1.0, w * key_idf / i) if (i := index.idf(d)) > 0 else w for w, d in zip(weights, dfs)]
    if len(senses) == 1 and weights[0] == 1.0:
        return senses[0].split()
    return [boost(word, w) for sense, w in zip(senses, weights) for word in sense.split()]
