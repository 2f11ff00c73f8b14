"""``lexrag.Searcher``: load once, ask many questions; hits carry rank, citation, score, document
and text, and agree with what ``run_pipeline`` ranks and emits for the same question."""

from __future__ import annotations

import pytest

import lexrag
from lexrag.config import load_config
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import Query

Q = "Wer haftet für den Schaden aus einem Vertrag?"


@pytest.fixture(scope="module")
def searcher(demo_artifacts):
    with lexrag.Searcher.load(demo_artifacts, "lexical", {"runtime.progress": False}) as s:
        yield s


def test_search_returns_ranked_hits_with_the_text_of_their_corpus_document(searcher):
    hits = searcher.search(Q, k=5)
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert len({h.citation for h in hits}) == 5
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    corpus = searcher.artifacts.corpus
    for h in hits:
        assert corpus.citations[h.doc_id] == h.citation and h.text == corpus.texts([h.doc_id])[0] and h.text


def test_search_and_answer_agree_with_a_run_of_the_same_question(searcher, demo_artifacts):
    cfg = load_config("lexical", {"runtime.progress": False})
    res = run_pipeline([Query("x", Q)], Artifacts.from_folder(demo_artifacts, cfg), cfg)
    assert searcher.answer(Q) == res.predictions["x"]
    ranked = [h.citation for h in searcher.search(Q, k=50)]
    corpus_keys = [c for c in res.ranked["x"] if c in set(searcher.artifacts.corpus.citations)]
    assert ranked == corpus_keys[: len(ranked)]  # the run's ranking less the whole articles it adds


def test_batch_search_answers_each_question_in_order(searcher):
    other = "Beschwerdefrist beim Bundesgericht"
    both = searcher.batch_search([Q, other], k=3)
    assert [[h.citation for h in hs] for hs in both] == [[h.citation for h in searcher.search(t, k=3)] for t in (Q, other)]
    assert searcher.batch_search([], k=3) == []


def test_bad_arguments_are_named(searcher, demo_artifacts):
    with pytest.raises(ValueError, match="k=0"):
        searcher.search(Q, k=0)
    with pytest.raises(TypeError, match="list of questions"):
        searcher.batch_search(Q)
    s = lexrag.Searcher.load(demo_artifacts)
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.search(Q)


def test_many_calls_reuse_the_loaded_context(searcher, monkeypatch):
    # a call neither makes a new context nor releases the models (the per-call gc.collect of a fresh run)
    import lexrag.pipeline.context as context

    monkeypatch.setattr(context, "make_context", lambda *a, **k: pytest.fail("a call made a new context"))
    released = []
    monkeypatch.setattr(searcher._ctx.models, "release", lambda *a: released.append(a))
    for _ in range(3):
        searcher.search(Q, k=1)
    assert released == []


def test_each_question_s_notes_are_its_own_not_the_sum_of_the_searcher_s_earlier_ones(searcher):
    """A searcher's context serves many runs: a run's counts and notes start from nothing (before,
    three unanswerable questions in a row were noted as "3 queries got no citation: q1, q1, q1")."""
    for _ in range(3):
        assert searcher.answer("zzzz qqqq xyzzy") == []
    said = [n for n in searcher.artifacts.notes if "got no citation" in n]
    assert len(said) == 1 and said[0].startswith("1 query got no citation"), said
