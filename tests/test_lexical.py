import json

import bm25s
import numpy as np
import pytest
from lexrag.artifacts import ArtifactError
from lexrag.config import LexicalConfig
from lexrag.index.lexical import GERMAN_STOPWORDS, Analyzer, BM25Index, build_bm25

# Nine German legal-like sentences, bm25s-style inline corpus.
DOCS = [
    "Der Vermieter muss die Mietsache in einem zum vorausgesetzten Gebrauch tauglichen Zustand übergeben.",
    "Der Mieter kann die Kündigung anfechten, wenn sie gegen Treu und Glauben verstösst.",
    "Der Arbeitgeber kann das Arbeitsverhältnis aus wichtigen Gründen fristlos auflösen.",
    "Wer einem andern widerrechtlich Schaden zufügt, wird ihm zum Ersatze verpflichtet.",
    "Die Beschwerde ist innert 30 Tagen beim Bundesgericht einzureichen.",
    "Der Käufer muss die gekaufte Sache prüfen und Mängel sofort anzeigen.",
    "Die Verjährung beträgt zehn Jahre, wenn das Gesetz nichts anderes bestimmt.",
    "Ein Ehegatte kann die Scheidung verlangen, wenn die Ehegatten getrennt gelebt haben.",
    "Der Pflichtteil beträgt die Hälfte des gesetzlichen Erbanspruchs.",
]


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
    with pytest.raises(ArtifactError, match="built over corpus 'abc'"):
        BM25Index.load(tmp_path / "bm25", corpus_id="other")
    with pytest.raises(ArtifactError, match="not found"):
        BM25Index.load(tmp_path / "missing")


def test_empty_corpus_is_refused(tmp_path):
    with pytest.raises(ArtifactError, match="empty corpus"):
        build_bm25([], tmp_path / "x")
