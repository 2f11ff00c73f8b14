import json

import bm25s
import numpy as np
import pytest
from lexrag.artifacts import ArtifactError
from lexrag.config import LexicalConfig
from lexrag.index.analyzer import GERMAN_STOPWORDS, Analyzer
from lexrag.index.bm25_build import build_bm25
from lexrag.index.lexical import BM25Index
from lexrag.testing import LAW_DOCS

DOCS = LAW_DOCS  # nine German legal sentences


def test_analyzer_follows_the_paper():
    assert len(GERMAN_STOPWORDS) == 86
    a = Analyzer()
    toks = a("Die Kündigungen der Mietverträge, z.B. nach Art. 271_a OR!")
    assert "die" not in toks and "der" not in toks
    assert "z" not in toks and "b" not in toks  # 1-char tokens dropped
    assert "kundig" in toks or "kündig" in toks  # Snowball German stem
    assert "271" in toks and "a" not in toks  # underscore splits
    assert a("KÜNDIGUNG") == a("kündigung")


def test_streamed_scores_equal_bm25s_index(tmp_path):
    cfg = LexicalConfig()
    idx = build_bm25([DOCS[:4], DOCS[4:]], tmp_path / "bm25", cfg)
    a = Analyzer()
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method)
    ref.index([a(d) for d in DOCS], show_progress=False)
    for q in ["Kündigung Treu und Glauben", "Schaden Ersatz", "Frist Beschwerde Bundesgericht Tagen"]:
        toks = [t for t in a(q)]
        mine = idx.retriever.get_scores([idx.retriever.vocab_dict[t] for t in toks if t in idx.retriever.vocab_dict])
        theirs = ref.get_scores([t for t in toks if t in ref.vocab_dict])
        np.testing.assert_allclose(mine, theirs, rtol=1e-5)



@pytest.mark.parametrize("method", ["lucene", "atire"])
def test_query_scores_equal_bm25s_and_a_boost_weights_a_word(tmp_path, method):
    idx = build_bm25([DOCS], tmp_path / "bm25", LexicalConfig(method=method))
    vocab, a = idx.retriever.vocab_dict, Analyzer()
    q = "Kündigung Kündigung Mieter Schaden"
    ids = [vocab[t] for t in a(q) if t in vocab]
    # a repeated term counts once with dedup, twice without, as bm25s scores the id list
    np.testing.assert_allclose(idx.scores(q, cache=False), idx.retriever.get_scores_from_ids(list(dict.fromkeys(ids))), rtol=1e-5)
    np.testing.assert_allclose(idx.scores(q, dedup=False, cache=False), idx.retriever.get_scores_from_ids(ids), rtol=1e-5)
    half = idx.scores("Kündigung^0.5 Mieter", cache=False)
    np.testing.assert_allclose(half, 0.5 * idx.scores("Kündigung", cache=False) + idx.scores("Mieter", cache=False), rtol=1e-5)
    assert idx.scores("Kündigung^0 Zzzz", cache=False) is None  # a zero weight drops the word; nothing else is indexed
    assert idx.query_terms("Mieter^0.25 Mieter") == {vocab[a("Mieter")[0]]: 1.0}  # with dedup a term keeps its largest weight

@pytest.mark.parametrize("method", ["robertson", "atire"])
def test_other_bm25_variants_match_bm25s(tmp_path, method):
    cfg = LexicalConfig(method=method)
    idx = build_bm25([DOCS], tmp_path / method, cfg)
    a = Analyzer()
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=method)
    ref.index([a(d) for d in DOCS], show_progress=False)
    toks = a("Mieter Kündigung Vermieter Sache")
    mine = idx.retriever.get_scores([idx.retriever.vocab_dict[t] for t in toks])
    np.testing.assert_allclose(mine, ref.get_scores(toks), rtol=1e-5)


def test_search_save_and_load(tmp_path):
    build_bm25([DOCS], tmp_path / "bm25", corpus_id="abc")
    params = json.loads((tmp_path / "bm25" / "params.json").read_text())
    assert params["n_docs"] == 9 and params["params"]["k1"] == 1.5 and params["params"]["stemmer"] == "german"
    idx = BM25Index.load(tmp_path / "bm25", corpus_id="abc")
    ids, scores = idx.search("Wann kann der Arbeitgeber fristlos kündigen?", k=3)
    assert ids[0] == 2
    assert list(scores) == sorted(scores, reverse=True)
    ids, _ = idx.search("Pflichtteil Erbanspruch", k=100)
    assert list(ids) == [8]  # only documents that match at all
    assert idx.search("xyzzy unbekannt", k=5)[0].size == 0
    assert idx.search("", k=5)[0].size == 0


def test_load_refuses_other_config_or_corpus(tmp_path):
    build_bm25([DOCS], tmp_path / "bm25", corpus_id="abc")
    with pytest.raises(ArtifactError, match=r"k1: artifact has 1.5, config wants 0.9"):
        BM25Index.load(tmp_path / "bm25", LexicalConfig(k1=0.9))
    with pytest.raises(ArtifactError, match=r"stemmer: artifact has 'german', config wants ''"):
        BM25Index.load(tmp_path / "bm25", LexicalConfig(stemmer=""))
    with pytest.raises(ArtifactError, match="built over corpus .abc., the loaded corpus is .*corpus.chunk_rows"):
        BM25Index.load(tmp_path / "bm25", corpus_id="other")
    with pytest.raises(ArtifactError, match="not found"):
        BM25Index.load(tmp_path / "missing")


def test_empty_corpus_is_refused(tmp_path):
    with pytest.raises(ArtifactError, match="empty corpus"):
        build_bm25([], tmp_path / "x")


# Compounds and their parts, so that the corpus' own counts split them (min_count 1 below).
COMPOUND_DOCS = [
    "Der Mietvertrag endet mit der Kündigung durch den Vermieter.",
    "Die Miete ist nach dem Vertrag am Ende jedes Monats zu bezahlen.",
    "Ein Vertrag kommt durch übereinstimmende Willensäusserung zustande.",
    "Der Arbeitsvertrag verpflichtet den Arbeitnehmer zur Arbeit.",
    "Die Kündigungsfrist beträgt einen Monat; die Frist beginnt mit der Kündigung.",
    "Die Arbeit wird im Betrieb geleistet.",
]


def test_decompounder_splits_by_corpus_counts(tmp_path):
    from lexrag.index.decompound import Decompounder

    counts = {"miete": 40, "vertrag": 90, "arbeit": 50, "kündigung": 30, "frist": 60, "kauf": 20,
              "kaufvertrag": 5000, "haftpflicht": 12, "versicherung": 70, "versicherungsvertrag": 8}
    d = Decompounder(counts, min_part=4, min_count=5)
    assert d.split("mietvertrag") == ("miet", "vertrag")  # modifier without its final -e
    assert d.split("arbeitsvertrag") == ("arbeit", "vertrag")  # linking s
    assert d.split("kündigungsfrist") == ("kündigung", "frist")
    # the head (a word of the corpus) split again
    assert d.split("haftpflichtversicherungsvertrag") == ("haftpflicht", "versicherung", "vertrag")
    assert d.split("kaufvertrag") == ()  # used more often whole than its parts
    assert d.split("vertrag") == () and d.split("2019abcd2020") == ()  # too short; not a word
    assert Decompounder(counts, min_count=100).split("mietvertrag") == ()  # parts too rare
    # a word splits the same whether it comes alone or inside a longer compound first (the build
    # and a query meet words in different orders)
    words = {"haus": 50, "garten": 50, "zaun": 50, "farbe": 50, "topf": 50, "deckel": 50, "gartenzaunfarbetopfdeckel": 6,
             "zaunfarbetopfdeckel": 6, "farbetopfdeckel": 6, "topfdeckel": 6}
    first_long, first_short = Decompounder(words), Decompounder(words)
    long_parts = first_long.split("hausgartenzaunfarbetopfdeckel")
    assert len(long_parts) == 4  # three cuts at most
    assert first_long.split("zaunfarbetopfdeckel") == first_short.split("zaunfarbetopfdeckel") == ("zaun", "farb", "topf", "deckel")
    assert first_short.split("hausgartenzaunfarbetopfdeckel") == long_parts
    path = d.save(tmp_path)
    again = Decompounder.load(tmp_path)
    assert again.params() == d.params() and again.split("mietvertrag") == ("miet", "vertrag")
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ArtifactError, match="decompound.json: not a decompounding lexicon"):
        Decompounder.load(tmp_path)
    path.unlink()
    with pytest.raises(ArtifactError, match="decompound.json: missing"):
        Decompounder.load(tmp_path)


def test_decompounded_index_matches_bm25s_and_finds_parts(tmp_path):
    cfg = LexicalConfig(decompound_min_count=1)
    idx = build_bm25([COMPOUND_DOCS[:2], COMPOUND_DOCS[2:]], tmp_path / "dc", cfg)
    a = idx.analyzer
    assert a("Mietvertrag") == ["mietvertrag", "miet", "vertrag"]  # the compound stays, its parts follow
    assert a("Kündigungsfrist")[1:] == a("Kündigung Frist")
    # the streamed build scores exactly as bm25s over the analyzer's token lists
    ref = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method)
    ref.index([a(d) for d in COMPOUND_DOCS], show_progress=False)
    for q in ["Vertrag Kündigung", "Frist Arbeit", "Mietvertrag Miete"]:
        toks = [t for t in a(q) if t in ref.vocab_dict]
        np.testing.assert_allclose(idx.retriever.get_scores([idx.retriever.vocab_dict[t] for t in toks]),
                                   ref.get_scores(toks), rtol=1e-5)
    # a question about the "Vertrag" finds the lease and the employment contract; without
    # decompounding only the paragraphs that have the word alone
    assert set(idx.search("Vertrag", k=10)[0]) == {0, 1, 2, 3}
    plain = build_bm25([COMPOUND_DOCS], tmp_path / "plain", LexicalConfig(decompound=False))
    assert set(plain.search("Vertrag", k=10)[0]) == {1, 2}
    # the loaded index splits queries with the counts it was built with
    loaded = BM25Index.load(tmp_path / "dc", cfg)
    assert loaded.analyzer("Arbeitsvertrag") == a("Arbeitsvertrag")
    np.testing.assert_allclose(loaded.scores("Vertrag"), idx.scores("Vertrag"))


def test_load_refuses_index_built_without_decompounding(tmp_path):
    build_bm25([DOCS], tmp_path / "plain", LexicalConfig(decompound=False))
    with pytest.raises(ArtifactError, match=r"decompound: artifact has None, config wants \{'min_part': 4, 'min_count': 5\}"):
        BM25Index.load(tmp_path / "plain", LexicalConfig())
    build_bm25([DOCS], tmp_path / "dc", LexicalConfig())
    (tmp_path / "dc" / "decompound.json").unlink()
    with pytest.raises(ArtifactError, match="decompound.json"):
        BM25Index.load(tmp_path / "dc", LexicalConfig())


def test_question_weight_counts_the_asked_sentence_again(tmp_path):
    idx = build_bm25([DOCS], tmp_path / "bm25", corpus_id="abc")
    story = "Der Mieter hat die Mietsache übernommen und den Vermieter verklagt. Kann der Arbeitgeber fristlos kündigen?"
    once, twice = idx.scores(story), idx.scores(story, question_weight=2)
    asked = idx.scores("Kann der Arbeitgeber fristlos kündigen?")
    np.testing.assert_allclose(twice, once + asked, rtol=1e-5)  # the question's terms once more
    assert idx.top(once, 1)[0][0] != 2 and idx.top(twice, 1)[0][0] == 2  # the asked-about paragraph now leads
    np.testing.assert_allclose(idx.scores("Schaden Ersatz", question_weight=3), idx.scores("Schaden Ersatz"))  # no question: no change
    lc = LexicalConfig(question_weight=2)
    np.testing.assert_allclose(idx.query_scores(story, lc), twice)
    # the asked sentence runs back to the previous sentence end, not to an abbreviation's dot
    from lexrag.index.lexical import _QUESTION

    assert _QUESTION.findall("Der Mieter zahlt nicht. Gilt Art. 257d Abs. 1 OR, z.B. bei Verzug?") == \
        [" Gilt Art. 257d Abs. 1 OR, z.B. bei Verzug?"]
    assert _QUESTION.findall("Welche Ansprüche hat A (Art. 41 ff. OR)?\nUnd B?") == ["Welche Ansprüche hat A (Art. 41 ff. OR)?", "Und B?"]
    assert _QUESTION.findall("Eine Geschichte.\nWie ist sie zu beurteilen?") == ["Wie ist sie zu beurteilen?"]


def test_score_cache_serves_repeated_questions_read_only_and_bounded(tmp_path, monkeypatch):
    idx = build_bm25([DOCS], tmp_path / "bm25", corpus_id="abc")
    calls = []
    real = idx._accumulate
    monkeypatch.setattr(idx, "_accumulate", lambda w: calls.append(dict(w)) or real(w))
    q = "Wann kann der Arbeitgeber fristlos kündigen?"
    first = idx.scores(q)
    assert idx.scores(q) is first and len(calls) == 1  # the stages after BM25 get the same vector
    with pytest.raises(ValueError):
        first[0] = 1.0  # shared, so no caller may change it
    assert idx.scores(q, question_weight=2) is not first and len(calls) == 2  # other settings, other key
    idx.search("Pflichtteil Erbanspruch", 5, cache=False)
    idx.search("Pflichtteil Erbanspruch", 5, cache=False)
    assert len(calls) == 4 and len(idx._cache) == 2  # asked once (feedback): not kept
    idx.cache_size = 2
    idx.scores("Verjährung zehn Jahre")  # a third question pushes out the oldest
    assert list(idx._cache) == [(q, True, 2), ("Verjährung zehn Jahre", True, 1)]
    np.testing.assert_array_equal(idx.scores(q), first)  # scored again, the same numbers
    assert len(calls) == 6
    from lexrag.index.lexical import SCORE_CACHE_BYTES

    assert BM25Index.load(tmp_path / "bm25").cache_size == SCORE_CACHE_BYTES // (4 * 9)


def test_a_run_scores_each_question_once_however_many_stages_ask(demo_artifacts, demo_queries, monkeypatch):
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries

    cfg = load_config(overrides={"runtime.progress": False, "statutes.enabled": True, "articles.enabled": True,
                                 "feedback.enabled": True})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    scored = []
    real = art.bm25._accumulate
    monkeypatch.setattr(art.bm25, "_accumulate", lambda w: scored.append(tuple(w.items())) or real(w))
    queries = load_queries(demo_queries)
    run_pipeline(queries, art, cfg)
    # the BM25, statute and article stages (and the graph's preference) all read the question's
    # scores; only feedback's expanded question is scored besides it
    assert len(scored) == len(set(scored)) <= 2 * len(queries)
    assert len(scored) > len(queries)  # feedback did run


def test_a_run_longer_than_the_score_cache_scores_each_question_once(demo_artifacts, demo_queries, monkeypatch):
    """Without a time budget the walk goes chunk by chunk through the stages that share one model
    at most, so a question's BM25 scores are still cached when the next stage asks, however many
    questions the run has (here a cache of four vectors, one chunk's, for 22 questions)."""
    from lexrag.config import load_config
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries

    cfg = load_config(overrides={"runtime.progress": False, "runtime.batch_size": 4, "statutes.enabled": True,
                                 "articles.enabled": True, "feedback.enabled": True})
    art = Artifacts.from_folder(demo_artifacts, cfg)
    art.bm25.cache_size = 4
    scored = []
    real = art.bm25._accumulate
    monkeypatch.setattr(art.bm25, "_accumulate", lambda w: scored.append(tuple(w.items())) or real(w))
    queries = load_queries(demo_queries)
    chunked = run_pipeline(queries, art, cfg)
    assert len(scored) == len(set(scored)) > len(queries)
    cfg.runtime.time_budget_s = 1e6  # with a budget, stage by stage: the projection counts stage by stage
    stagewise = run_pipeline(queries, art, cfg)
    assert stagewise.predictions == chunked.predictions and stagewise.ranked == chunked.ranked


def test_call_order_goes_chunk_by_chunk_within_runs_of_one_model():
    from types import SimpleNamespace as S

    from lexrag.pipeline.run import call_order

    st = [S(needs=("llm",)), S(needs=("bm25",)), S(), S(needs=("llm",)), S(needs=("semantic",)), S(needs=("graph",)),
          S(needs=("reranker",))]
    assert call_order(st, 5, 2, by_chunk=False) == [(i, c) for i in range(7) for c in (0, 2, 4)]
    assert call_order(st, 5, 2, by_chunk=True) == (
        [(i, c) for c in (0, 2, 4) for i in range(4)] + [(i, c) for c in (0, 2, 4) for i in (4, 5)] + [(6, 0), (6, 2), (6, 4)])


def test_top_keeps_the_lowest_ids_of_scores_tied_at_the_kth_place():
    scores = np.array([0.0, 2.0, 1.0, 1.0, 3.0, 1.0, 0.0, 1.0], dtype=np.float32)
    ids, vals = BM25Index.top(scores, 3)
    assert ids.tolist() == [4, 1, 2] and vals.tolist() == [3.0, 2.0, 1.0]  # 2 of the four tied at 1.0: the lowest id
    assert BM25Index.top(scores, 10)[0].tolist() == [4, 1, 2, 3, 5, 7]  # only positive scores
    assert BM25Index.top(np.zeros(5, dtype=np.float32), 3)[0].tolist() == [] and BM25Index.top(None, 3)[0].tolist() == []


def _random_csc(rng, n_docs: int, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSC index whose contributions take a few values only, so ties are everywhere."""
    cols = [np.sort(rng.choice(n_docs, size=int(rng.integers(1, n_docs // 3)), replace=False)) for _ in range(n_terms)]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in cols])]).astype(np.int32)
    indices = np.concatenate(cols).astype(np.int32)
    data = rng.choice(np.array([0.25, 0.5, 1.0, 1.7], dtype=np.float32), size=len(indices))
    return data, indices, indptr


def test_the_numba_and_numpy_kernels_give_the_same_bits_and_the_same_top_k_with_ties():
    pytest.importorskip("numba")
    from lexrag.index import bm25_kernel as K

    if K.BACKEND != "numba":
        pytest.skip("numba switched off (LEXRAG_BM25_BACKEND=numpy)")
    rng = np.random.default_rng(7)
    data, indices, indptr = _random_csc(rng, 3000, 60)
    paths = set()
    for trial in range(60):
        terms = rng.choice(60, size=int(rng.integers(1, 12)), replace=False)
        if trial % 3 == 0:  # short queries: one of the shortest columns
            terms = terms[:1] if np.diff(indptr)[terms[0]] * K.LONG_FACTOR <= 3000 else np.argsort(np.diff(indptr))[:1]
        weights = {int(t): float(rng.choice([1.0, 0.5, 1 / 3, 2.0])) for t in terms}
        a, touched = K.accumulate(data, indices, indptr, weights, 3000, backend="numba")
        b, none = K.accumulate(data, indices, indptr, weights, 3000, backend="numpy")
        assert none is None and a.dtype == b.dtype == np.float32
        assert a.tobytes() == b.tobytes()  # the same float32 additions in the same order
        paths.add(touched is None)
        if touched is not None:  # a short query lists what it touched; a long one leaves top_k to scan every score
            np.testing.assert_array_equal(np.sort(touched), np.flatnonzero(b > 0))
        for k in (1, 7, 100, 5000):
            expect = sorted(np.flatnonzero(b > 0), key=lambda d: (-b[d], d))[:k]  # the order (-score, doc id)
            for got, _ in (K.top_k(a, k, touched, backend="numba"), K.top_k(a, k, backend="numba"),
                           K.top_k(b, k, backend="numpy"), K.top_k(b, k, touched, backend="numpy")):
                assert got.tolist() == [int(d) for d in expect], (trial, k)
    assert paths == {True, False}  # both the listing and the scanning path were compared
    queries = [{int(t): float(rng.choice([1.0, 0.5])) for t in rng.choice(60, size=int(rng.integers(0, 8)), replace=False)}
               for _ in range(30)]  # some without terms
    for threads in (1, 2):
        for w, (docs, scores) in zip(queries, K.top_k_many(data, indices, indptr, queries, 3000, 25, threads)):
            scores_np, _ = K.accumulate(data, indices, indptr, w, 3000, backend="numpy")
            one = K.top_k(scores_np, 25, backend="numpy")
            assert docs.tolist() == one[0].tolist() and scores.tobytes() == one[1].tobytes()


def test_a_long_query_over_many_documents_keeps_its_top_k_exactly_with_ties():
    """Over enough documents the scan of every score starts from a bar found by counting a sample:
    the top k (ties at the k-th place by the lowest ids) is still the one a full sort gives."""
    pytest.importorskip("numba")
    from lexrag.index import bm25_kernel as K

    if K.BACKEND != "numba":
        pytest.skip("numba switched off (LEXRAG_BM25_BACKEND=numpy)")
    rng = np.random.default_rng(11)
    n = 40_000
    data, indices, indptr = _random_csc(rng, n, 30)
    for trial in range(12):
        weights = {int(t): 1.0 for t in rng.choice(30, size=int(rng.integers(4, 12)), replace=False)}
        scores, touched = K.accumulate(data, indices, indptr, weights, n, backend="numba")
        assert touched is None  # the long path
        for k in (10, 100, 300):
            expect = np.lexsort((np.arange(n), -scores))[:k]
            expect = expect[scores[expect] > 0]
            assert K.top_k(scores, k)[0].tolist() == expect.tolist(), (trial, k)


def test_search_many_gives_each_query_its_own_search_in_order(tmp_path):
    idx = build_bm25([DOCS], tmp_path / "bm25", corpus_id="abc")
    texts = ["Wann kann der Arbeitgeber fristlos kündigen?", "Pflichtteil Erbanspruch", "zzz unbekannt", "Verjährung"] * 5
    many = idx.search_many(texts, 3, threads=2)
    assert len(many) == len(texts) and not idx._cache  # asked once each: nothing kept
    for text, (docs, scores) in zip(texts, many):
        one_docs, one_scores = idx.search(text, 3)
        assert docs.tolist() == one_docs.tolist() and scores.tobytes() == one_scores.tobytes()


def test_word_term_is_a_words_own_stem_else_its_rarest_part_however_often_asked(tmp_path, monkeypatch):
    import lexrag.index.lexical as lexical

    monkeypatch.setattr(lexical, "WORD_TERM_CACHE", 2)  # the kept answers are dropped and found again
    idx = build_bm25([COMPOUND_DOCS], tmp_path / "dc", LexicalConfig(decompound_min_count=1))

    def spelled_out(word):  # the docstring's definition, over the analyzer's whole output
        stems = idx.analyzer(word)
        vocab, indptr = idx.retriever.vocab_dict, idx.retriever.scores["indptr"]
        held = [(t, int(indptr[vocab[t] + 1] - indptr[vocab[t]])) for t in stems if t in vocab]
        return None if not held else held[0] if held[0][0] == stems[0] else min(held, key=lambda h: (h[1], h[0]))

    words = ["Vertrag", "Mietvertrag", "Mietfrist", "Miet-Frist", "Verträge", "der", "Zebra", "", "Frist-"]
    assert idx.word_term("Vertrag") == ("vertrag", 4)  # held whole: four documents, the compounds' parts among them
    assert idx.word_term("Mietfrist") == ("frist", 1)  # not held whole: its rarer part
    assert idx.word_term("der") is None and idx.word_term("Zebra") is None
    for _ in range(3):
        assert [idx.word_term(w) for w in words] == [spelled_out(w) for w in words]
        assert idx.word_term("Vertrag") == idx.word_term("Vertrag") == ("vertrag", 4)  # asked again at once: kept
    kept = idx._kept_word_term.cache_info()
    assert kept.currsize <= 2 and kept.hits >= 3
