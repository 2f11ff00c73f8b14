import json
import igraph as ig
import numpy as np
import pytest
import scipy.sparse as sp
from lexrag.artifacts import ArtifactError
from lexrag.index.corpus import Corpus, build_corpus
from lexrag.index.graph import CitationGraph, build_graph, leiden_levels
from lexrag.index.prior import TrainingPrior, build_prior
from lexrag.stages.graph_signals import (
    bibliographic_coupling,
    co_citation,
    community_members,
    hits,
    nodes_to_docs,
    personalized_pagerank,
    seed_vector,
    siblings,
    top_nodes,
)

# A hand-made graph: a->b (2), a->c, b->c, c->a, d->c (3), b->e; e cites nothing (dangling).
EDGES = [(0, 1, 2.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 1.0), (3, 2, 3.0), (1, 4, 1.0)]
N = 5


def hand_graph(doc_node=None, doc_cited=None, communities=None):
    src = np.array([e[0] for e in EDGES])
    dst = np.array([e[1] for e in EDGES])
    w = np.array([e[2] for e in EDGES], np.float32)
    adj = sp.csr_matrix((w, (src, dst)), shape=(N, N))
    doc_node = np.arange(N, dtype=np.int32) if doc_node is None else np.asarray(doc_node, np.int32)
    doc_cited = np.zeros(len(doc_node), np.int32) if doc_cited is None else np.asarray(doc_cited, np.int32)
    comm = np.zeros((1, N), np.int32) if communities is None else np.asarray([communities], np.int32)
    return CitationGraph(list("abcde"), np.zeros(N, np.int8), adj, comm, [1.0], doc_node, doc_cited, {})


def numpy_ppr(alpha, r, iters=500):
    a = np.zeros((N, N))
    for s, d, w in EDGES:
        a[s, d] = w
    out = a.sum(1)
    p = np.divide(a, out[:, None], out=np.zeros_like(a), where=out[:, None] > 0)
    x = r.copy()
    for _ in range(iters):
        x = (1 - alpha) * r + alpha * (p.T @ x + x[out == 0].sum() * r)
    return x


def test_ppr_matches_igraph_and_numpy_power_iteration():
    g = hand_graph()
    r = np.array([0.7, 0, 0, 0.3, 0])
    mine = personalized_pagerank(g, np.array([0, 3]), np.array([0.7, 0.3]), alpha=0.4)
    G = ig.Graph(n=N, edges=[(s, d) for s, d, _ in EDGES], directed=True)
    ref = np.array(G.personalized_pagerank(damping=0.4, reset=r.tolist(), weights=[w for *_, w in EDGES]))
    np.testing.assert_allclose(mine, ref, atol=1e-7)
    np.testing.assert_allclose(mine, numpy_ppr(0.4, r), atol=1e-7)


def test_hits_matches_igraph_on_the_candidate_subgraph():
    g = hand_graph()
    sub, hub, auth = hits(g, np.array([0]))
    assert list(sub) == [0, 1, 2]  # seed a, its neighbours b, c
    G = ig.Graph(n=N, edges=[(s, d) for s, d, _ in EDGES], directed=True)
    G.es["weight"] = [w for *_, w in EDGES]
    H = G.induced_subgraph([0, 1, 2])
    np.testing.assert_allclose(hub, H.hub_score(weights="weight"), atol=1e-6)
    np.testing.assert_allclose(auth, H.authority_score(weights="weight"), atol=1e-6)


def test_coupling_and_cocitation_by_hand():
    g = hand_graph()
    # seed b (node 1) cites c (w 1) and e (w 1); who else cites c or e?  a (1*A[a,c]=1) and d (3)
    c = bibliographic_coupling(g, np.array([1]), np.array([1.0]))
    in_c = 1 + 1 + 3  # in-strength of c
    assert c[0] == pytest.approx(1 / np.log(2 + in_c))
    assert c[3] == pytest.approx(3 / np.log(2 + in_c))
    assert c[2] == 0 and c[4] == 0
    # seed c (node 2) is cited by a, b, d; what else do they cite?  a->b (2), b->e (1)
    cc = co_citation(g, np.array([2]), np.array([1.0]))
    out_a, out_b = 3, 2
    assert cc[1] == pytest.approx(2 / np.log(2 + out_a))
    assert cc[4] == pytest.approx(1 / np.log(2 + out_b))
    assert cc[3] == 0
    assert [n for n, _ in top_nodes(cc, np.array([2]), 10)] == [1, 4]  # the seed left out, zeros never listed
    assert [n for n, _ in top_nodes(cc, np.array([1, 2]), 1)] == [4]


def test_community_members_and_siblings():
    g = hand_graph(communities=[0, 0, 1, 0, 1])
    members = community_members(g, np.array([0]), np.array([1.0]), level=0)
    # community 0 = {a, b, d}; a is the seed; b is cited (in-strength 2), d never is
    assert [n for n, _ in members] == [1]
    g = hand_graph(doc_node=[0, 0, 0, 1, 2, 3, 4], doc_cited=[0, 5, 1, 0, 0, 0, 0])
    g.kind[:] = 1  # decisions
    sib = siblings(g, [(0, 1.0), (3, 0.5)])
    assert [d for d, _ in sib] == [1, 2]  # other docs of node 0, most cited first
    g.kind[0] = 0  # node 0 a law article: its paragraphs are not emitted unless asked for
    assert siblings(g, [(0, 1.0)]) == []
    assert [d for d, _ in siblings(g, [(0, 1.0)], kinds=("law",))] == [1, 2]


def test_nodes_to_docs_prefers_lexical_match_then_citations():
    g = hand_graph(doc_node=[0, 0, 0, 1, 2, 3, 4], doc_cited=[0, 5, 1, 0, 0, 0, 0])
    assert [d for d, _ in nodes_to_docs(g, [(0, 1.0)], per_node=2)] == [1, 2]
    pref = np.array([0, 0, 9.0, 0, 0, 0, 0])
    assert [d for d, _ in nodes_to_docs(g, [(0, 1.0), (1, 0.5)], pref, per_node=1)] == [2, 3]
    nodes, w = seed_vector(g, [(1, 2.0), (2, 2.0), (3, 4.0)])
    assert dict(zip(nodes.tolist(), w.tolist())) == {0: 0.5, 1: 0.5}


@pytest.mark.parametrize("method", ["igraph", "leidenalg"])
def test_leiden_levels_are_nested_and_repeatable(method):
    src, dst, w = [], [], []
    for c in range(4):
        for i in range(10):
            for j in range(i + 1, 10):
                src.append(c * 10 + i)
                dst.append(c * 10 + j)
                w.append(5.0 if (i < 5) == (j < 5) else 1.0)
        src.append(c * 10)
        dst.append(((c + 1) % 4) * 10)
        w.append(0.5)
    args = (40, np.array(src), np.array(dst), np.array(w, np.float32), [0.05, 1.0, 3.0])
    lv = leiden_levels(*args, seed=1, method=method)
    for level in range(2):
        for fine in set(lv[level + 1]):
            assert len(set(lv[level][lv[level + 1] == fine])) == 1
    assert len(set(lv[2])) == 8 and len(set(lv[1])) == 4
    np.testing.assert_array_equal(lv, leiden_levels(*args, seed=1, method=method))
    assert np.bincount(lv[2]).tolist() == sorted(np.bincount(lv[2]).tolist(), reverse=True)  # largest first


COURTS = """citation,text
BGE 145 II 32 E. 3.1,"Die Beschwerde ist innert 30 Tagen einzureichen (Art. 100 Abs. 1 BGG; BGE 144 II 1 E. 2 mit Hinweisen)."
BGE 145 II 32 E. 3.2,"Treu und Glauben (Art. 2 Abs. 1 ZGB) gilt auch hier; vgl. BGE 144 II 1 E. 2 und Urteil 5A_800/2019 E. 2."
5A_800/2019 E. 2.,"Die Beweislast richtet sich nach Art. 8 ZGB; vgl. BGE 145 II 32 E. 3.1 sowie BGE 145 II 32 E. 3.1."
BGE 144 II 1 E. 2,"Die Frist beginnt mit der Eröffnung (Art. 100 Abs. 1 BGG)."
"""
LAWS = """citation,text,title
Art. 100 Abs. 1 BGG,"Die Beschwerde ist innert 30 Tagen einzureichen.",BGG
Art. 2 Abs. 1 ZGB,"Treu und Glauben.",ZGB
Art. 2 Abs. 2 ZGB,"Rechtsmissbrauch.",ZGB
Art. 8 ZGB,"Beweislast.",ZGB
"""


@pytest.fixture
def tiny_graph(tmp_path):
    (tmp_path / "laws.csv").write_text(LAWS, encoding="utf-8")
    (tmp_path / "courts.csv").write_text(COURTS, encoding="utf-8")
    build_corpus(tmp_path / "corpus", tmp_path / "laws.csv", tmp_path / "courts.csv")
    corpus = Corpus(tmp_path / "corpus")
    g = build_graph(corpus, tmp_path / "graph", resolutions=(0.5, 1.0, 2.0), corpus_id="c1")
    return corpus, g, tmp_path


def test_build_graph_edges_and_citation_counts(tiny_graph):
    corpus, g, tmp = tiny_graph
    edges = {(g.names[s], g.names[d]): w for (s, d), w in zip(zip(*g.adj.nonzero()), g.adj.data)}
    assert edges == {
        ("BGE 145 II 32", "Art. 100 BGG"): 1, ("BGE 145 II 32", "BGE 144 II 1"): 2,
        ("BGE 145 II 32", "Art. 2 ZGB"): 1, ("BGE 145 II 32", "5A_800/2019"): 1,
        ("5A_800/2019", "Art. 8 ZGB"): 1, ("5A_800/2019", "BGE 145 II 32"): 2,
        ("BGE 144 II 1", "Art. 100 BGG"): 1,
    }
    cited = {corpus.citations[d]: int(c) for d, c in enumerate(g.doc_cited) if c}
    assert cited == {"Art. 100 Abs. 1 BGG": 2, "Art. 2 Abs. 1 ZGB": 1, "Art. 8 ZGB": 1,
                     "BGE 144 II 1 E. 2": 2, "5A_800/2019 E. 2.": 1, "BGE 145 II 32 E. 3.1": 2}
    loaded = CitationGraph.load(tmp / "graph", len(corpus), corpus_id="c1", resolutions=[0.5, 1.0, 2.0])
    assert loaded.names == g.names and (loaded.adj != g.adj).nnz == 0
    np.testing.assert_array_equal(loaded.communities, g.communities)


def test_worker_processes_build_the_same_graph_as_one_process(tmp_path):
    """References are read by worker processes one row group at a time; nodes, edges,
    communities and citation counts are those of one pass in document order."""
    import random

    from lexrag.config import CorpusConfig

    rnd = random.Random(0)
    laws = [f"Art. {a} Abs. {p} {code}" for code in ("OR", "ZGB", "GebV SchKG") for a in range(1, 30) for p in (1, 2)]
    decisions = [f"BGE {140 + i % 9} {rnd.choice(['I', 'II', 'IV'])} {10 + i}" if i % 3 else f"{i % 9 + 1}C_{i}/2020"
                 for i in range(120)]
    (tmp_path / "laws.csv").write_text("citation,text,title\n" + "".join(f"{c},Text.,T\n" for c in laws), encoding="utf-8")
    rows = []
    for d in decisions:
        for e in range(1, 6):
            refs = [rnd.choice(laws) if rnd.random() < 0.4 else f"{rnd.choice(decisions)} E. {rnd.randint(1, 5)}"
                    for _ in range(rnd.randint(0, 5))]
            rows.append(f'{d} E. {e},"Erwägung ({"), (".join(refs)}) und Art. 8 und 9 ZGB sowie CC."\n')
    (tmp_path / "courts.csv").write_text("citation,text\n" + "".join(rows), encoding="utf-8")
    build_corpus(tmp_path / "corpus", tmp_path / "laws.csv", tmp_path / "courts.csv", CorpusConfig(chunk_rows=97))
    corpus = Corpus(tmp_path / "corpus")
    one = build_graph(corpus, tmp_path / "one", corpus_id="c1", workers=1)
    two = build_graph(corpus, tmp_path / "two", corpus_id="c1", workers=2)
    assert one.params["n_references"] > 1000 and one.params["files"] == two.params["files"]


def test_french_and_italian_considerations_cite_the_german_codes(tmp_path):
    (tmp_path / "laws.csv").write_text(LAWS, encoding="utf-8")
    (tmp_path / "courts.csv").write_text(COURTS + """6B_1/2020 E. 1.,"Selon l'art. 8 CC et l'art. 100 al. 1 LTF, le recours est recevable."
6B_2/2020 E. 1.,"Secondo l'art. 2 cpv. 1 CC, ognuno è tenuto ad agire secondo la buona fede."
""", encoding="utf-8")
    abbrev = tmp_path / "abbrev.json"
    abbrev.write_text(json.dumps([{"id": "ZGB", "abbrev": {"de": "ZGB", "fr": "CC", "it": "CC"}},
                                  {"id": "BGG", "abbrev": {"de": "BGG", "fr": "LTF", "it": "LTF"}}]), encoding="utf-8")
    build_corpus(tmp_path / "corpus", tmp_path / "laws.csv", tmp_path / "courts.csv", abbreviations=abbrev)
    g = build_graph(Corpus(tmp_path / "corpus"), tmp_path / "graph", resolutions=(1.0,), corpus_id="c1")
    edges = {(g.names[s], g.names[d]) for s, d in zip(*g.adj.nonzero())}
    assert {("6B_1/2020", "Art. 8 ZGB"), ("6B_1/2020", "Art. 100 BGG"), ("6B_2/2020", "Art. 2 ZGB")} <= edges
    assert not any(n.endswith((" CC", " LTF")) for n in g.names)  # one node per article, whatever the language
    assert g.params["code_aliases"] == 2  # CC (the file's and the built-in English one agree) and LTF
    # the corpus rebuilt without the abbreviations keeps its identity, but the graph read the court through them
    build_corpus(tmp_path / "corpus", tmp_path / "laws.csv", tmp_path / "courts.csv")
    plain = Corpus(tmp_path / "corpus")
    with pytest.raises(ArtifactError, match="other law-code aliases.*rebuild"):
        CitationGraph.load(tmp_path / "graph", len(plain), corpus_id="c1", aliases=plain.aliases_digest)
    params = json.loads((tmp_path / "graph" / "params.json").read_text())
    del params["aliases"]  # a graph built before the aliases: loads, with a warning
    del params["params_sha256"]  # (and before params.json recorded its own digest)
    (tmp_path / "graph" / "params.json").write_text(json.dumps(params))
    assert CitationGraph.load(tmp_path / "graph", len(plain), corpus_id="c1", aliases=plain.aliases_digest).names == g.names


def test_graph_load_refuses_mismatch(tiny_graph):
    corpus, g, tmp = tiny_graph
    with pytest.raises(ArtifactError, match="built over corpus 'c1'"):
        CitationGraph.load(tmp / "graph", len(corpus), corpus_id="other")
    with pytest.raises(ArtifactError, match="covers 8 documents, the corpus has 9"):
        CitationGraph.load(tmp / "graph", 9)
    with pytest.raises(ArtifactError, match="resolutions"):
        CitationGraph.load(tmp / "graph", len(corpus), resolutions=[1.0])


def test_prior_is_leave_one_query_out(tmp_path):
    f = tmp_path / "train.csv"
    f.write_text(
        "query_id,query,gold_citations\n"
        "t1,a,Art. 100 Abs. 1 BGG;Art. 8 ZGB;Art. 2 Abs. 1 ZGB\n"
        "t2,b,Art. 100 Abs. 1 BGG;Art. 8 ZGB\n"
        "t3,c,Art. 100 Abs. 1 BGG;Art. 41 Abs. 1 OR\n",
        encoding="utf-8",
    )
    build_prior(f, tmp_path / "prior")
    p = TrainingPrior.load(tmp_path / "prior")
    assert len(p) == 3
    # for an unseen query: BGG in 3 of 3, Art. 8 ZGB in 2 of 3
    assert p.frequent(min_count=2) == [("Art. 100 Abs. 1 BGG", 1.0), ("Art. 8 ZGB", 2 / 3)]
    # scoring t2 itself: its gold is removed; Art. 8 ZGB is then in 1 of 2 others -> below min_count
    assert p.frequent("t2", min_count=2) == [("Art. 100 Abs. 1 BGG", 1.0)]
    co = dict(p.cocited([("Art. 100 Abs. 1 BGG", 1.0)], min_count=2))
    assert co == {"Art. 8 ZGB": pytest.approx(2 / 3), "Art. 2 Abs. 1 ZGB": pytest.approx(1 / 3), "Art. 41 Abs. 1 OR": pytest.approx(1 / 3)}
    co_t1 = dict(p.cocited([("Art. 100 Abs. 1 BGG", 1.0)], query_id="t1", min_count=2))
    assert "Art. 2 Abs. 1 ZGB" not in co_t1  # only t1 co-cites it
    assert co_t1["Art. 8 ZGB"] == pytest.approx(1 / 2)


def test_graph_without_links_has_singleton_communities(tmp_path):
    (tmp_path / "laws.csv").write_text(LAWS, encoding="utf-8")
    build_corpus(tmp_path / "corpus", tmp_path / "laws.csv")
    corpus = Corpus(tmp_path / "corpus")
    g = build_graph(corpus, tmp_path / "graph", resolutions=(1.0,))
    assert g.adj.nnz == 0 and len(set(g.communities[0])) == g.n == 3
    nodes, w = seed_vector(g, [(0, 1.0)])
    assert community_members(g, nodes, w, level=0) == []


def test_a_graph_build_without_its_extra_names_the_pip_extra(tmp_path, monkeypatch, demo_artifacts):
    import lexrag.errors
    from lexrag.errors import ArtifactError
    from lexrag.index.corpus import Corpus
    from lexrag.index.graph import build_graph

    real = lexrag.errors.installed
    monkeypatch.setattr(lexrag.errors, "installed", lambda m: m != "leidenalg" and real(m))
    with pytest.raises(ArtifactError, match=r"needs leidenalg, which is not installed: pip install 'lexrag\[graph\]'"):
        build_graph(Corpus(demo_artifacts / "corpus"), tmp_path / "graph")
    assert not (tmp_path / "graph").exists()
