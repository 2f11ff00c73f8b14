"""The English route: the laws' English texts, keyed by their German citations, as a BM25 index of
its own (``--laws-en``, the ``bm25_en`` artifact) that English questions are searched in as written."""

from __future__ import annotations

import json

import pytest
from lexrag.config import load_config
from lexrag.queries import Query

# English texts of three paragraphs of the tiny corpus, one key it lacks, one key given twice
TINY_LAWS_EN = """citation,text,title
Art. 41 Abs. 1 OR,"Any person who unlawfully causes loss or damage to another is obliged to provide compensation.",Tort
Art. 2 Abs. 2 ZGB,The manifest abuse of a right is not protected by law.,Abuse of rights
Art. 8 ZGB,"The burden of proving an alleged fact rests on the person who derives rights from that fact.",Burden of proof
Art. 999 OR,No such article.,Nothing
Art. 8 ZGB,Another text of the same key.,Burden of proof
"""


@pytest.fixture
def english_artifacts(tmp_path, tiny_inputs):
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    en = tmp_path / "laws_en.csv"
    en.write_text(TINY_LAWS_EN, encoding="utf-8")
    build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art", courts=courts, laws_en=en)
    return tmp_path / "art"


def test_english_texts_keyed_by_german_citations_become_their_own_index(english_artifacts):
    from lexrag.index.corpus import Corpus
    from lexrag.index.english import EnglishIndex

    params = json.loads((english_artifacts / "bm25_en" / "params.json").read_text(encoding="utf-8"))
    assert params["n_docs"] == 3 and params["license_id"] == "unknown" and "private" in params["licence"]
    assert params["coverage"] == {"laws_with_english": 3, "laws": 7}
    assert (params["report"]["malformed"], params["report"]["duplicates"]) == (1, 1)  # Art. 999 OR; Art. 8 ZGB again
    corpus = Corpus(english_artifacts / "corpus")
    index = EnglishIndex.load(english_artifacts / "bm25_en", corpus)
    ids, _ = index.search("Who bears the burden of proof for an alleged fact?", 5)
    assert corpus.citations[int(ids[0])] == "Art. 8 ZGB"  # a corpus document: the German citation is what is emitted
    ids, _ = index.search("abuse of a right", 5)
    assert corpus.citations[int(ids[0])] == "Art. 2 Abs. 2 ZGB"


def test_english_questions_get_the_bm25_en_signal_and_german_ones_do_not(english_artifacts):
    from lexrag.pipeline import Artifacts, run_pipeline

    cfg = load_config(None, {"runtime.progress": False, "english.enabled": True, "count.k": 2})
    art = Artifacts.from_folder(english_artifacts, cfg)
    qs = [Query("en", "Who bears the burden of proof for an alleged fact in a civil case?"),
          Query("de", "Wer trägt die Beweislast für eine behauptete Tatsache?")]
    res = run_pipeline(qs, art, cfg)
    en = next(r for r in res.signals if r.signal == "bm25_en")
    assert set(en.hits) == {"en"} and art.corpus.citations[en.hits["en"][0][0]] == "Art. 8 ZGB"
    assert "Art. 8 ZGB" in res.predictions["en"]
    without = load_config(None, {"runtime.progress": False, "count.k": 2})
    assert all(r.signal != "bm25_en" for r in run_pipeline(qs, Artifacts.from_folder(english_artifacts, without), without).signals)


def test_without_the_artifact_the_english_stage_is_said_missing_and_the_run_goes_on(english_artifacts):
    import shutil

    from lexrag.eval.status import run_status
    from lexrag.pipeline import Artifacts, run_pipeline

    shutil.rmtree(english_artifacts / "bm25_en")
    cfg = load_config(None, {"runtime.progress": False, "english.enabled": True})
    art = Artifacts.from_folder(english_artifacts, cfg, degrade=True)
    assert art.bm25_en is None and "bm25_en" in art.missing
    res = run_pipeline([Query("en", "Who bears the burden of proof?")], art, cfg)
    row = next(r for r in run_status(cfg, art, res).rows if r.stage == "english")
    assert row.state == "missing" and "lexrag-bm25-en" in row.fix, (row.why, row.fix)


def test_an_english_file_of_other_keys_is_refused_with_one_line(tmp_path, tiny_inputs):
    from lexrag.errors import CsvInputError
    from lexrag.pipeline.build import build_artifacts

    laws, courts = tiny_inputs
    en = tmp_path / "laws_en.csv"
    en.write_text("citation,text,title\nArt. 1 CO,The contract is concluded.,Conclusion\n", encoding="utf-8")
    with pytest.raises(CsvInputError, match="none of its 1 rows is a law paragraph of the corpus") as e:
        build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art", courts=courts, laws_en=en)
    assert "\n" not in str(e.value)
    en.write_text("key,english\nArt. 8 ZGB,x\n", encoding="utf-8")
    with pytest.raises(CsvInputError, match="--laws-en .*missing column"):
        build_artifacts(load_config(None, {"runtime.progress": False}), laws, tmp_path / "art2", courts=courts, laws_en=en)


def test_the_english_index_is_rebuilt_over_itself_and_another_artifact_inside_is_still_refused(english_artifacts, tmp_path):
    """bm25_en keeps its BM25 index in ``index/`` with a params.json its own file list holds: a
    rebuild into the same folder replaces it (before: refused as "holds another artifact"); an
    artifact of another build left inside it is still refused by name."""
    from lexrag.errors import ArtifactError
    from lexrag.io.publish import check_replaceable

    dest = english_artifacts / "bm25_en"
    check_replaceable(dest)  # its own index/params.json
    stray = dest / "cache"
    stray.mkdir()
    (stray / "params.json").write_text(json.dumps({"artifact": "llm_cache"}), encoding="utf-8")
    with pytest.raises(ArtifactError, match="holds another artifact"):
        check_replaceable(dest)


@pytest.mark.parametrize("damage", ["params_edited", "not_json"])
def test_a_damaged_index_inside_bm25_en_names_the_bm25_en_rebuild(english_artifacts, damage):
    """The inner index is loaded as a BM25 index: its refusals named the German index's rebuild
    (build_datasets.py --only bm25), which leaves bm25_en as it is.  (Its other files are in
    bm25_en's own file list: their damage is named by bm25_en's check.)"""
    from lexrag.artifacts import rebuild_hint
    from lexrag.errors import ArtifactError
    from lexrag.index.corpus import Corpus
    from lexrag.index.english import EnglishIndex

    inner = english_artifacts / "bm25_en" / "index"
    if damage == "params_edited":
        doc = json.loads((inner / "params.json").read_text(encoding="utf-8"))
        doc["n_docs"] += 1
        (inner / "params.json").write_text(json.dumps(doc), encoding="utf-8")
    else:
        (inner / "params.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(ArtifactError) as e:
        EnglishIndex.load(english_artifacts / "bm25_en", Corpus(english_artifacts / "corpus"))
    text = str(e.value)
    assert str(inner) in text and text.endswith(rebuild_hint("bm25_en")) and "--only bm25)" not in text, text
    assert ("edited after the build" if damage == "params_edited" else "not valid JSON") in text, text
