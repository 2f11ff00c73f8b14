"""How many citations to emit per query (the count stage): a fixed k, the elbow of the score
curve, or the paper's adaptive count

    |S_q| = clip(w_llm * n_LLM + w_elbow * n_elbow + w_cal * n_cal, min_k, max_k)

with n_LLM the count the LLM estimated in concept extraction (``estimated_citations``), n_elbow
the elbow of the final score curve and n_cal the number of citations whose score, relative to the
query's top score, reaches the threshold ``lexrag calibrate`` fitted on a validation file for the
stage that made the final order (:class:`Calibration`).  A component that is missing for a query
(no concept extraction, no calibration) is left out and the remaining weights are rescaled, so
the count stays a weighted mean of what is known."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from lexrag.artifacts import read_params
from lexrag.errors import ArtifactError
from lexrag.ranking import Ranking
from lexrag.stages.base import Phase, register_stage

log = logging.getLogger(__name__)

__all__ = [
    "elbow_count", "choose_count", "adaptive_count", "calibrated_count", "expected_f1_count", "curve_cut",
    "unique_citations", "with_whole_articles", "with_articles_first", "emitted_order", "relative_count",
    "Count", "Calibration",
]


def elbow_count(scores: Sequence[float], min_k: int = 1, max_k: int | None = None) -> int:
    """Number of top scores kept before the sorted score curve bends most (the "kneedle" point).

    The curve of the first ``max_k`` scores is scaled to the unit square; the knee is the
    point farthest below the chord from the first to the last point, and the scores before it
    are kept (a sharp drop after the third score keeps three).  The result is clipped to
    ``[min_k, max_k]`` and never exceeds the number of scores.
    """
    s = np.asarray(scores, dtype=np.float64)
    if max_k is not None:
        s = s[:max_k]
    n = len(s)
    if n == 0:
        return 0
    if n <= 2 or s[0] == s[-1]:
        k = n
    else:
        x = np.linspace(0.0, 1.0, n)
        y = (s - s[-1]) / (s[0] - s[-1])
        chord = 1.0 - x
        k = max(int(np.argmax(chord - y)), 1)
    lo = min(min_k, n)
    return int(min(max(k, lo), n if max_k is None else min(max_k, n)))


def choose_count(scores: Sequence[float], method: str, k: int, min_k: int, max_k: int) -> int:
    if method == "fixed":
        return min(k, len(scores))
    if method == "elbow":
        return elbow_count(scores, min_k=min_k, max_k=max_k)
    raise ValueError(f"unknown count method {method!r} (fixed | elbow | adaptive)")


def adaptive_count(n_llm: float | None, n_elbow: float | None, n_cal: float | None, w_llm: float = 0.4,
                   w_elbow: float = 0.3, w_cal: float = 0.3, min_k: int = 8, max_k: int = 50) -> int:
    """round(weighted mean of the known counts), clipped to ``[min_k, max_k]``; with every count
    known and the weights summing to 1 this is the paper's formula.  No known count: ``min_k``."""
    parts = [(w, float(n)) for w, n in ((w_llm, n_llm), (w_elbow, n_elbow), (w_cal, n_cal)) if n is not None and w > 0]
    if not parts:
        return int(min_k)
    k = sum(w * n for w, n in parts) / sum(w for w, _ in parts)
    return int(min(max(int(np.floor(k + 0.5)), min_k), max_k))


def expected_f1_count(probabilities: Sequence[float], min_k: int = 1, max_k: int = 50) -> int:
    """The cut of a ranked list that maximises expected F1 if each candidate is gold with its
    probability (in list order): ``2 * sum(p[:k]) / (k + sum(p))``, the expected gold count in
    the denominator, over ``min_k..max_k``."""
    p = np.asarray(probabilities, dtype=np.float64)
    n = min(len(p), max_k)
    if n == 0:
        return 0
    ks = np.arange(1, n + 1)
    ef1 = 2 * np.cumsum(p[:n]) / (ks + p.sum())
    lo = min(max(min_k, 1), n)
    return int(lo + np.argmax(ef1[lo - 1:]))


def calibrated_count(scores: Sequence[float], threshold: float) -> int | None:
    """How many scores reach ``threshold`` times the top score (None when the top score is not
    positive: nothing to be relative to)."""
    s = np.asarray(scores, dtype=np.float64)
    if len(s) == 0 or not s[0] > 0:
        return None
    return int(np.count_nonzero(s / s[0] >= threshold - 1e-12))


def curve_cut(citations: Sequence[str], scores: Sequence[float], threshold: float, max_k: int) -> list[str]:
    """The citations a score-curve threshold emits: those reaching ``threshold`` times the top
    score, at least one and at most ``max_k`` (what ``calibrate`` fits and evaluates)."""
    return list(citations[: relative_count(scores, threshold, 1, max_k)])


@dataclass
class Calibration:
    """Relative score thresholds per stage that made the final order (``fused``, ``rerank``,
    ``verify``, ``agent``) and a ``default`` for any other; written by ``lexrag calibrate``."""

    thresholds: dict[str, float]
    default: float
    doc: dict

    def threshold(self, source: str) -> float:
        return self.thresholds.get(source, self.default)

    @classmethod
    def load(cls, folder: str | Path, corpus_id: str | None = None) -> "Calibration":
        doc = read_params(folder, "calibration")
        t, d = doc.get("thresholds"), doc.get("default")
        if not isinstance(t, dict) or not all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in t.values()) \
                or not isinstance(d, (int, float)) or not 0 <= d <= 1:
            raise ArtifactError(f"{Path(folder) / 'params.json'}: 'thresholds' must map stages to numbers in [0, 1] and "
                                f"'default' be one; rerun `python -m lexrag calibrate`")
        from lexrag.stages.base import registered_stages

        stages = ["fused", *sorted(st.name for st in registered_stages())]  # what can make a query's final order
        unknown = sorted(str(k) for k in t if k not in stages)
        if unknown:  # a misspelt stage would never be read: its threshold silently replaced by the default
            raise ArtifactError(f"{Path(folder) / 'params.json'}: thresholds for {', '.join(unknown)[:80]}, which is no "
                                f"stage (fused, or a stage's name: {', '.join(stages[1:])[:200]}); rerun "
                                "`python -m lexrag calibrate`")
        if corpus_id and doc.get("corpus_id") not in (None, corpus_id):
            raise ArtifactError(f"calibration at {folder} was fitted on another corpus ({doc.get('corpus_id')}, this one is "
                                f"{corpus_id}); rerun `python -m lexrag calibrate` on these artifacts")
        return cls({str(k): float(v) for k, v in t.items()}, float(d), doc)


def with_whole_articles(citations: Sequence[str], scores: Sequence[float], after: int,
                        start: int = 0) -> tuple[list[str], list[float]]:
    """The citation order with each law article also cited as a whole ("Art. 41 OR") right after
    the ``after``-th of its paragraphs ("Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR"), with the score
    of the citation it follows; ``after`` 0 changes nothing.  Exam answers and the competition's
    training gold cite whole articles where a consideration cites paragraphs.

    ``start`` keeps the first ``start`` slots as ranked: no article string is inserted among
    them.  The articles whose ``after``-th paragraph stands there follow right after them, in
    the order of those paragraphs, and from then on each article follows its ``after``-th
    paragraph.  So the top of the list keeps the paragraph precision while the depth also holds
    the whole articles (on lexam_dev the paragraph is the gold form more often at every rank).

    An article string that comes earlier in the order stays where it is; one that comes later
    moves up to the insertion point.  Each output position depends only on the input up to it,
    so the result for the first k citations is a prefix of the result for all of them (the
    emitted list and the full ranking agree).  The inserted strings are the paragraphs'
    ``citations.parent``: the one place where an output string is formatted rather than taken
    from the corpus."""
    from lexrag.citations import parent

    cits, out_scores = list(citations), list(scores)
    if after <= 0:
        return cits, out_scores
    emitted: set[str] = set()
    seen: dict[str, int] = {}
    pending: list[str] = []  # articles due while the first `start` slots are still being filled
    out: list[tuple[str, float]] = []
    for c, s in zip(cits, out_scores):
        if c in emitted:  # an article string already inserted above
            continue
        out.append((c, s))
        emitted.add(c)
        whole = parent(c) if c.startswith("Art") else c
        if whole != c and whole not in emitted:
            seen[whole] = seen.get(whole, 0) + 1
            if seen[whole] == after:
                pending.append(whole)
        if len(out) >= start:
            for whole in pending:
                if whole not in emitted:
                    out.append((whole, s))
                    emitted.add(whole)
            pending = []
    return [c for c, _ in out], [s for _, s in out]


def with_articles_first(citations: Sequence[str], scores: Sequence[float], depth: int) -> tuple[list[str], list[float]]:
    """The citation order with each law article of which the first ``depth`` citations hold two or
    more paragraphs also cited as a whole ("Art. 62 ZPO") right before the first of them, with its
    score; ``depth`` 0 changes nothing.  Two paragraphs of one article near the top say the question
    is about the article, which exam answers cite whole; the paragraphs stay, one slot later.  An
    article string already in the order moves up to that place; one already above stays.  What
    is inserted depends on the first ``depth`` citations only, so the first k of the result are
    the same whether the order is cut before or after (the emitted list and the full ranking
    agree).  Like :func:`with_whole_articles`, the inserted strings are ``citations.parent``."""
    from lexrag.citations import parent

    cits, out_scores = list(citations), list(scores)
    if depth <= 0:
        return cits, out_scores
    head: dict[str, int] = {}
    for c in cits[:depth]:
        whole = parent(c) if c.startswith("Art") else c
        if whole != c:
            head[whole] = head.get(whole, 0) + 1
    due = {a for a, n in head.items() if n >= 2}
    if not due:
        return cits, out_scores
    out: list[tuple[str, float]] = []
    emitted: set[str] = set()
    for c, s in zip(cits, out_scores):
        whole = parent(c) if c.startswith("Art") else c
        if whole in due and whole not in emitted:
            out.append((whole, s))
            emitted.add(whole)
        if c not in emitted:
            out.append((c, s))
            emitted.add(c)
    return [c for c, _ in out], [s for _, s in out]


def emitted_order(citations: Sequence[str], scores: Sequence[float], cc) -> tuple[list[str], list[float]]:
    """A query's distinct citations in the form the count section asks (``cc``: :class:`CountConfig`):
    whole articles first where the head holds two of their paragraphs (``articles_first``), then
    after their n-th paragraph (``whole_articles``).  The one place both are applied: the run's
    emitted list and full ranking, and ``lexrag fuse``."""
    cits, sc = with_articles_first(citations, scores, cc.articles_first)
    return with_whole_articles(cits, sc, cc.whole_articles, cc.whole_articles_from)


def relative_count(scores: Sequence[float], threshold: float, min_k: int, max_k: int) -> int:
    """How many citations score at least ``threshold`` times the first one, clipped to
    ``[min_k, max_k]`` and to the list (a first score that is not positive: ``min_k``): the cut
    ``calibrate`` fits and scripts/experiment_count.py measures."""
    n = calibrated_count(scores, threshold)
    return int(min(max(n if n is not None else min_k, min_k), max_k, len(scores)))


def unique_citations(hits, corpus) -> tuple[list[int], list[str], list[float]]:
    """The first document of each distinct citation string, in ranking order."""
    seen: dict[str, tuple[int, float]] = {}
    for doc, score in hits:
        c = corpus.citations[doc]
        if c not in seen:
            seen[c] = (doc, score)
    return [d for d, _ in seen.values()], list(seen), [s for _, s in seen.values()]


class Count:
    """Cut each query's final order at ``count.method``'s number of distinct citations."""

    name = "count"
    family = "final"
    phase = Phase.COUNT
    essential = True
    signals = ()
    needs: tuple[str, ...] = ()
    uses = ("calibration",)  # read by count.method=adaptive (its n_cal term); the artifacts record it missing then

    def enabled(self, cfg, art) -> bool:
        return True

    def run(self, batch, ctx):
        cc = ctx.cfg.count
        cal = getattr(ctx.art, "calibration", None)
        out = Ranking("final", "final")
        fallback: dict[str, str] = {}  # expected_f1 queries cut at count.k instead -> the stage that made their order
        short: list[int] = []  # lengths of final orders shorter than a fixed count.k asks for
        none: list[str] = []  # questions that nothing matched: an empty row in the submission
        for q in batch.queries:
            docs, _, scores = unique_citations(batch.current.get(q.query_id, []), ctx.art.corpus)
            if cc.method == "adaptive":
                n_llm = q.concepts.get("estimated_citations") if q.concepts else None
                if not isinstance(n_llm, int) or isinstance(n_llm, bool) or n_llm < 1:
                    n_llm = None  # no estimate, or not a usable one (0, negative)
                else:
                    n_llm = min(n_llm, cc.max_k)  # a wild estimate (10**400) weighs as the upper clip
                n_elbow = elbow_count(scores, min_k=1, max_k=cc.max_k) if scores else None
                source = batch.current_by.get(q.query_id, "fused")
                n_cal = calibrated_count(scores, cal.threshold(source)) if cal is not None else None
                k = min(adaptive_count(n_llm, n_elbow, n_cal, cc.w_llm, cc.w_elbow, cc.w_cal, cc.min_k, cc.max_k), len(scores))
                q.add_cost("count", n_llm=n_llm or 0, n_elbow=n_elbow or 0, n_cal=n_cal or 0, k=k)
            elif cc.method == "expected_f1":
                by = batch.current_by.get(q.query_id, "fused")
                if by == "ranker":
                    k = expected_f1_count(batch.relevance.get(q.query_id, scores)[: len(scores)], 1, cc.max_k)
                else:  # the ranker is missing, was dropped, or a later stage reordered with scores of its own
                    fallback[q.query_id] = by
                    k = min(cc.k, len(scores))
                q.add_cost("count", k=k)
            else:
                k = choose_count(np.asarray(scores), cc.method, cc.k, cc.min_k, cc.max_k)
            if (cc.method == "fixed" or q.query_id in fallback) and 0 < len(scores) < cc.k:  # none at all: nothing found
                short.append(len(scores))
            if not scores and q.text.strip():  # an empty question is warned about where it is read
                none.append(q.query_id)
            out.hits[q.query_id] = list(zip(docs[:k], scores[:k]))
        if fallback:  # not what the config asked: the count row is partial for them, said once with the run's total
            got = ctx.partial.get(self.name, {}).get("count_fallback", ("", []))[1]
            ids = got + list(fallback)
            makers = ctx.tallies.setdefault("count_fallback_by", set())
            makers.update(fallback.values())
            ctx.note("count_fallback", f"fell back to count.k={cc.k} for {len(ids)} "
                     f"{'query' if len(ids) == 1 else 'queries'}: no ranker probabilities (count.method=expected_f1 "
                     f"reads the learned ranker's; their order came from {', '.join(sorted(makers))}): {', '.join(ids[:5])}"
                     + (" ..." if len(ids) > 5 else ""), stage=self.name, query_ids=ids)
        tally = ctx.tallies.setdefault("count_short", {"short": 0, "most": 0})
        if short:  # said, not silent: a count.k beyond the candidate lists is cut by them (one note a run)
            tally["short"] += len(short)
            tally["most"] = max(tally["most"], *short)
            ctx.note("count_short", f"count.k={cc.k}: {tally['short']} queries have fewer distinct "
                     f"citations in their final order (at most {tally['most']}) and keep all they have; each signal keeps "
                     f"its top_k documents (lexical.top_k={ctx.cfg.lexical.top_k}) and fusion keeps "
                     f"fusion.depth={ctx.cfg.fusion.depth}: raise those for longer lists")
        nothing = ctx.tallies.setdefault("count_none", {"ids": []})
        if none:  # an empty row is said, not left for the user to find in the submission
            nothing["ids"] += none
            ids = nothing["ids"]
            ctx.note("count_none", f"{len(ids)} {'query' if len(ids) == 1 else 'queries'} got no citation: nothing in the artifacts "
                     f"matched them (words or a script the corpus does not hold?): {', '.join(ids[:5])}"
                     + (" ..." if len(ids) > 5 else ""))
        return out


register_stage(Count())
