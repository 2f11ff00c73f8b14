import pytest
from conftest import DEMO
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


def test_the_prior_is_its_own_family_and_the_boost_names_the_pairs_it_applies_to():
    from lexrag.signals import PRIOR_SIGNALS, family_of
    from lexrag.stages.fusion import BOOST_PAIRS
    from lexrag.stages.graph import PriorSignals

    assert PriorSignals.family == "prior" and {family_of(s) for s in PRIOR_SIGNALS} == {"prior"}
    assert ("lexical", "graph") in BOOST_PAIRS and not any("prior" in pair for pair in BOOST_PAIRS)
    lex = run("bm25_query", "lexical", [1, 2])
    prior = run("prior_frequent", "prior", [2])
    graph = run("ppr", "graph", [1])
    fused = dict(reciprocal_rank_fusion([lex, prior, graph], rrf_k=60, boost=5.0).hits["q"])
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)  # content x prior: no boost
    assert fused[1] == pytest.approx(5.0 * (1 / 61 + 1 / 61))  # content x graph: boosted
    both = dict(reciprocal_rank_fusion([lex, prior], rrf_k=60, boost=5.0, boost_pairs=[("lexical", "prior")]).hits["q"])
    assert both[2] == pytest.approx(5.0 * (1 / 62 + 1 / 61))  # a pair named is boosted


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


def test_the_removed_head_reorder_is_named_as_removed():
    from lexrag.config import ConfigError, load_config

    for key, value in (("fusion.head", 30), ("fusion.head_weights.prior_frequent", 2.0), ("fusion.head_boost", 1.0)):
        with pytest.raises(ConfigError, match="was removed"):
            load_config(None, {key: value})


def test_an_article_with_two_paragraphs_in_the_head_is_emitted_whole_before_them():
    from lexrag.stages.count import with_articles_first

    cits = ["Art. 62 Abs. 1 ZPO", "Art. 8 ZGB", "Art. 62 Abs. 2 ZPO", "Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR", "Art. 62 ZPO"]
    scores = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    out, s = with_articles_first(cits, scores, 3)
    # ZPO 62 has two paragraphs in the first three: whole, right before the first; OR 41's pair lies below the head
    assert out == ["Art. 62 ZPO", "Art. 62 Abs. 1 ZPO", "Art. 8 ZGB", "Art. 62 Abs. 2 ZPO", "Art. 41 Abs. 1 OR", "Art. 41 Abs. 2 OR"]
    assert s == [6.0, 6.0, 5.0, 4.0, 3.0, 2.0]  # the article takes the score of its first paragraph; the later copy is gone
    assert with_articles_first(cits, scores, 5)[0][:6] == ["Art. 62 ZPO", "Art. 62 Abs. 1 ZPO", "Art. 8 ZGB", "Art. 62 Abs. 2 ZPO",
                                                          "Art. 41 OR", "Art. 41 Abs. 1 OR"]
    assert with_articles_first(cits, scores, 2) == (cits, scores)  # one paragraph of each in the head: nothing
    assert with_articles_first(cits, scores, 0) == (cits, scores)  # off
    court = ["BGE 145 II 32 E. 3.1", "BGE 145 II 32 E. 3.2", "Art. 8 ZGB"]  # decisions are never made whole
    assert with_articles_first(court, [3.0, 2.0, 1.0], 3)[0] == court
    # what is inserted depends on the head only: any cut of the full order is the order of the cut
    full = with_articles_first(cits, scores, 3)[0]
    for k in range(3, len(cits) + 1):
        assert with_articles_first(cits[:k], scores[:k], 3)[0] == [c for c in full if c in set(cits[:k]) | {"Art. 62 ZPO"}]


def test_the_relative_count_keeps_what_scores_near_the_first():
    from lexrag.stages.count import relative_count

    scores = [10.0, 9.0, 8.1, 5.0, 4.9, 1.0]
    assert relative_count(scores, 0.8, 1, 50) == 3  # 10, 9 and 8.1 reach 0.8 x 10
    assert relative_count(scores, 0.45, 1, 50) == 5
    assert relative_count(scores, 0.45, 1, 4) == 4  # at most max_k
    assert relative_count(scores, 0.99, 2, 50) == 2  # at least min_k
    assert relative_count(scores[:1], 0.5, 3, 50) == 1  # never more than the list
    assert relative_count([0.0, 0.0], 0.5, 1, 50) == 1  # no positive first score: min_k
    assert relative_count([], 0.5, 1, 50) == 0


def test_the_curve_count_experiment_and_articles_first_shape_what_is_emitted(demo_artifacts, demo_queries):
    import importlib.util

    from lexrag.citations import parent
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries
    from lexrag.stages.count import relative_count, unique_citations

    # the curve count (once count.method: relative) is an experiment now: scripts/experiment_count.py
    spec = importlib.util.spec_from_file_location("experiment_count", DEMO.parent / "scripts" / "experiment_count.py")
    experiment = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(experiment)
    queries = load_queries(demo_queries)
    cfg = load_config(str(DEMO / "config.yaml"), {"count.k": 300})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    res = run_pipeline(queries, art, cfg)
    cut = {q.query_id: experiment.curve_cut(res, art.corpus, q.query_id, cfg.count, 0.9, 8) for q in queries}
    for q in queries:
        _, cits, scores = unique_citations(res.current.hits.get(q.query_id, []), art.corpus)
        assert cut[q.query_id] == cits[: relative_count(scores, 0.9, 1, 8)]
    assert len({len(p) for p in cut.values()}) > 1  # a count per query
    base = run_pipeline(queries, art, load_config(str(DEMO / "config.yaml"), {"count.k": 5}))
    first = run_pipeline(queries, art, load_config(str(DEMO / "config.yaml"), {"count.articles_first": 3, "count.k": 5}))
    inserted = 0
    for q in queries:
        head = [parent(c) for c in base.ranked[q.query_id][:3] if c.startswith("Art.") and parent(c) != c]
        due = {a for a in head if head.count(a) >= 2}
        assert {c for c in first.ranked[q.query_id] if c not in base.ranked[q.query_id]} == due
        assert first.predictions[q.query_id] == first.ranked[q.query_id][:5]  # the emitted list is the ranking's head
        inserted += len(due)
    assert inserted > 0
