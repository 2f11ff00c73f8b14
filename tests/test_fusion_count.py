import pytest
from lexrag.ranking import Ranking, RankingError
from lexrag.stages.count import choose_count, elbow_count
from lexrag.stages.fusion import reciprocal_rank_fusion


def run(signal, family, docs):
    r = Ranking(signal, family)
    r.add("q", docs, [1.0 / (i + 1) for i in range(len(docs))])
    return r


def test_rrf_by_hand():
    a = run("bm25_query", "lexical", [1, 2, 3])
    b = run("citation_seeds", "seed", [3, 4])
    fused = reciprocal_rank_fusion([a, b], rrf_k=60, weights={"citation_seeds": 4.0})
    got = dict(fused.hits["q"])
    assert got[1] == pytest.approx(1 / 61)
    assert got[2] == pytest.approx(1 / 62)
    assert got[3] == pytest.approx(1 / 63 + 4 / 61)
    assert got[4] == pytest.approx(4 / 62)
    assert [d for d, _ in fused.hits["q"]] == [3, 4, 1, 2]


def test_default_weight_depth_and_ties():
    a = run("x", "lexical", [5, 6])
    b = run("y", "lexical", [6, 5])
    fused = reciprocal_rank_fusion([a, b], rrf_k=0, default_weight=2.0, depth=1)
    assert fused.hits["q"] == [(5, pytest.approx(2 / 1 + 2 / 2))]  # tie broken by doc id


def test_cross_signal_boost_only_for_content_and_graph():
    lex = run("bm25_query", "lexical", [1, 2])
    graph = run("ppr", "graph", [2, 3])
    fused = dict(reciprocal_rank_fusion([lex, graph], rrf_k=60, boost=5.0).hits["q"])
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(5.0 * (1 / 62 + 1 / 61))
    assert fused[3] == pytest.approx(1 / 62)


def test_ranking_validation_names_signal_and_query():
    r = Ranking("bm25_query", "lexical", {"q1": [(1, 2.0), (1, 1.0)]})
    with pytest.raises(RankingError, match="'bm25_query', query 'q1': a document appears twice"):
        r.validate()
    with pytest.raises(RankingError, match="not sorted"):
        Ranking("s", "lexical", {"q": [(1, 1.0), (2, 3.0)]}).validate()
    with pytest.raises(RankingError, match="outside"):
        Ranking("s", "lexical", {"q": [(10, 1.0)]}).validate(n_docs=5)
    with pytest.raises(RankingError, match="unknown family"):
        Ranking("s", "magic").validate()


def test_elbow_by_hand():
    # a sharp drop after the third score
    assert elbow_count([10, 9.5, 9, 2, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2], min_k=1) == 3
    assert elbow_count([10, 9.5, 9, 2, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2], min_k=5) == 5
    assert elbow_count([10, 9.5, 9, 2, 1.8], min_k=1, max_k=2) == 2
    assert elbow_count([], min_k=8) == 0
    assert elbow_count([3, 3, 3], min_k=1) == 3
    assert elbow_count([5, 1], min_k=8, max_k=50) == 2  # never more than there are


def test_choose_count():
    assert choose_count([5, 4, 3], "fixed", 2, 8, 50) == 2
    assert choose_count([5, 4, 3], "fixed", 10, 8, 50) == 3
    with pytest.raises(ValueError, match="unknown count method"):
        choose_count([1], "magic", 1, 1, 1)


def test_boost_exclude_keeps_a_signal_out_of_the_boost():
    lex = run("bm25_query", "lexical", [1, 2])
    sib = run("siblings", "graph", [2])
    fused = dict(reciprocal_rank_fusion([lex, sib], rrf_k=60, boost=5.0, boost_exclude={"siblings"}).hits["q"])
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
