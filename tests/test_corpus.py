import json

import pyarrow.parquet as pq
import pytest
from lexrag.artifacts import DIGEST, ArtifactError
from lexrag.index.corpus import Corpus, CorpusError, build_corpus, guess_lang


def test_builds_unified_corpus(tmp_path, tiny_inputs):
    laws, courts = tiny_inputs
    report = build_corpus(tmp_path / "corpus", laws, courts)
    t = pq.read_table(tmp_path / "corpus" / "corpus.parquet").to_pylist()
    assert report["n_docs"] == len(t) == 10
    assert [r["doc_id"] for r in t] == list(range(10))
    row = {r["citation"]: r for r in t}
    assert row["Art. 1 Abs. 2 OR"]["source"] == "law"
    assert row["Art. 1 Abs. 2 OR"]["parent"] == "Art. 1 OR"
    assert row["Art. 1 Abs. 2 OR"]["title"] == "Obligationenrecht"
    assert row["BGE 145 II 32 E. 3.1"]["source"] == "bge"
    assert row["BGE 145 II 32 E. 3.1"]["parent"] == "BGE 145 II 32"
    assert row["5A_800/2019 E. 2."]["source"] == "docket"
    assert row["5A_800/2019 E. 2."]["lang"] == "de"
    params = json.loads((tmp_path / "corpus" / "params.json").read_text())
    assert params["artifact"] == "corpus" and params["n_docs"] == 10 and set(params["sources"]) == {"laws.csv", "courts.csv"}
    c = Corpus(tmp_path / "corpus")
    assert len(c) == 10 and c.docs_of("Art. 8 ZGB") == [3]
    assert [len(b) for b in c.iter_texts(batch_rows=4)] == [4, 4, 2]
    texts = [t for b in c.iter_texts() for t in b]
    assert c.texts([9, 0, 3]) == [texts[9], texts[0], texts[3]]
    assert c.texts([8]) == ["Treu und Glauben (Art. 2 Abs. 1 ZGB) gilt auch im Verfahren."]


def test_bad_rows_are_counted_and_named_never_silently_lost(tmp_path):
    data = (
        "citation,text\n"
        "BGE 145 II 32 E. 3.1,gut\n"                   # line 2 ok
        "BGE 145 II 32 E. 3.1,gut\n"                   # line 3 exact duplicate
        "BGE 145 II 32 E. 3.1,anderer Text\n"          # line 4 same citation, other text: kept
        ",ohne Zitat\n"                                 # line 5 empty citation
        "1B_1/2020 E. 1,a,b\n"                          # line 6 too many fields
        "kein Zitat,Text\n"                             # line 7 not a court citation
        "Art. 1 OR,Gesetz im Gerichtsfile\n"           # line 8 law in court file
    ).encode("utf-8") + "2C_5/2021 E. 3,Gebühr für Zürich\n".encode("cp1252")  # line 9 cp1252
    f = tmp_path / "courts.csv"
    f.write_bytes(data)
    laws = tmp_path / "laws.csv"
    laws.write_text("citation,text,title\nArt. 8 ZGB,,ZGB\n", encoding="utf-8")
    report = build_corpus(tmp_path / "c", laws, f)
    law_r, court_r = report["files"]
    assert law_r["written"] == 1 and law_r["empty_text"] == 1
    assert court_r["rows_read"] == 8
    assert court_r["written"] == 3
    assert court_r["duplicates"] == 1
    assert court_r["malformed"] == 4
    assert court_r["encoding_repaired"] == 1
    assert court_r["rows_read"] == court_r["written"] + court_r["duplicates"] + court_r["malformed"]
    by_line = {e["line"]: e for e in court_r["examples"]}
    assert "empty citation" in by_line[5]["reason"]
    assert "expected 2 fields, got 3" in by_line[6]["reason"]
    assert "not a court citation" in by_line[7]["reason"] and "not a court citation" in by_line[8]["reason"]
    assert by_line[9]["kind"] == "encoding"
    texts = pq.read_table(tmp_path / "c" / "corpus.parquet").column("text").to_pylist()
    assert "Gebühr für Zürich" in texts and "anderer Text" in texts
    saved = json.loads((tmp_path / "c" / "build_report.json").read_text())
    assert saved["files"][1]["malformed"] == 4


def test_bom_and_multiline_text(tmp_path):
    f = tmp_path / "laws.csv"
    f.write_bytes("\ufeffcitation,text,title\nArt. 1 OR,\"Zeile eins\nZeile zwei\",OR\n".encode("utf-8"))
    report = build_corpus(tmp_path / "c", f)
    assert report["n_docs"] == 1
    assert pq.read_table(tmp_path / "c" / "corpus.parquet").column("text")[0].as_py() == "Zeile eins\nZeile zwei"


def test_unusable_files_raise_clear_errors(tmp_path):
    missing_col = tmp_path / "a.csv"
    missing_col.write_text("zitat,text\nArt. 1 OR,x\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"a\.csv: missing column\(s\) citation"):
        build_corpus(tmp_path / "c", missing_col)
    empty = tmp_path / "e.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match="e.csv: empty file"):
        build_corpus(tmp_path / "c", empty)
    with pytest.raises(CorpusError, match="nope.csv: file not found"):
        build_corpus(tmp_path / "c", tmp_path / "nope.csv")


def test_loading_refuses_unfinished_or_foreign_artifact(tmp_path, tiny_inputs):
    with pytest.raises(ArtifactError, match="not found"):
        Corpus(tmp_path / "nothing")
    laws, _ = tiny_inputs
    build_corpus(tmp_path / "c", laws)
    (tmp_path / "c" / "params.json").unlink()
    with pytest.raises(ArtifactError, match="build did not finish"):
        Corpus(tmp_path / "c")


def test_guess_lang():
    assert guess_lang("Das Bundesgericht prüft die Rüge nicht, wenn sie nicht begründet ist.") == "de"
    assert guess_lang("Le Tribunal fédéral examine le recours et les griefs qui sont invoqués.") == "fr"
    assert guess_lang("Il Tribunale federale esamina il ricorso che non è motivato.") == "it"
    assert guess_lang("12345") == ""


def test_law_keys_without_text_join_the_corpus(tmp_path, tiny_inputs):
    laws, courts = tiny_inputs
    keys = tmp_path / "keys.txt"
    keys.write_text("Art. 8 ZGB\nArt. 221 Abs. 1 StPO\nArt.  2 ISLK-V\nkein Schlüssel\n\n", encoding="utf-8")
    report = build_corpus(tmp_path / "c", laws, courts, law_keys=keys)
    k = report["files"][1]
    assert (k["file"], k["rows_read"], k["written"], k["duplicates"], k["malformed"]) == ("keys.txt", 4, 2, 1, 1)
    c = Corpus(tmp_path / "c")
    assert "Art. 221 Abs. 1 StPO" in c.citations and "Art.  2 ISLK-V" in c.citations  # as written
    assert c.index.resolve("Art. 221 Abs. 1 lit. b StPO") == ["Art. 221 Abs. 1 StPO"]
    assert c.index.resolve("Art. 2 ISLK-V") == ["Art.  2 ISLK-V"]


def test_abbreviations_let_questions_cite_codes_in_other_languages(tmp_path, tiny_inputs):
    from lexrag.artifacts import corpus_id

    laws, courts = tiny_inputs
    abbrev = tmp_path / "abbrev-translations.json"
    abbrev.write_text(json.dumps([
        {"id": "OR", "abbrev": {"de": "OR", "fr": "CO", "it": "CO"}},
        {"id": "BGG", "abbrev": {"de": "BGG", "fr": "LTF", "it": "LTF"}},
        {"id": "StGB", "abbrev": {"de": "StGB", "fr": "CP", "it": "CP"}},  # no StGB paragraph here
        {"id": "0.101", "abbrev": {"de": "0.101", "fr": "0.101", "it": "0.101"}},
        {"id": "x", "abbrev": {"fr": "LX"}},  # no German abbreviation: skipped
    ]), encoding="utf-8")
    plain = build_corpus(tmp_path / "plain", laws, courts)
    report = build_corpus(tmp_path / "c", laws, courts, abbreviations=abbrev)
    assert report["code_aliases"] == 2 and "code_aliases" not in plain
    assert json.loads((tmp_path / "c" / "code_aliases.json").read_text()) == {"CO": "OR", "LTF": "BGG"}
    assert corpus_id(tmp_path / "c") == corpus_id(tmp_path / "plain")  # no document changed: the indexes stay valid
    c = Corpus(tmp_path / "c")
    assert c.index.resolve_text("Must the appeal (Art. 100 al. 1 LTF) follow Art. 1 Abs. 2 CO?") == ["Art. 100 Abs. 1 BGG",
                                                                                               "Art. 1 Abs. 2 OR"]
    assert Corpus(tmp_path / "plain").index.resolve_text("Art. 100 al. 1 LTF, Art. 8 CC") == ["Art. 8 ZGB"]  # English ones are built in
    # rebuilt without the file: no stale aliases
    build_corpus(tmp_path / "c", laws, courts)
    assert not (tmp_path / "c" / "code_aliases.json").exists()


@pytest.mark.parametrize("content, message", [
    (b"[{\"id\": \"OR\", \"abbrev\": {\"de\": \"OR\"}", r"abbr\.json: not valid JSON \(line 1, column"),
    (b"{\"OR\": \"CO\"}", r"abbr\.json: expected a JSON list"),
    (b"[{\"id\": \"OR\", \"abbrev\": {\"de\": \"OR\"}}, {\"id\": \"ZGB\", \"abbrev\": [\"CC\"]}]", r"abbr\.json: entry 2 "),
    ("[{\"id\": \"OR\", \"abbrev\": {\"de\": \"Öko\"}}]".encode("latin-1"), r"abbr\.json: not UTF-8 text"),
])
def test_a_bad_abbreviations_file_is_named_and_nothing_is_written(tmp_path, tiny_inputs, content, message):
    laws, _ = tiny_inputs
    bad = tmp_path / "abbr.json"
    bad.write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        build_corpus(tmp_path / "c", laws, abbreviations=bad)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("content, message", [
    ('{"CO": "OR"', "not a JSON object of alias"),  # truncated
    ('["CO"]', "not a JSON object of alias"),
    ('{"CO": 1}', "not a JSON object of alias"),
])
def test_a_damaged_alias_file_is_refused(tmp_path, tiny_inputs, content, message):
    laws, _ = tiny_inputs
    abbrev = tmp_path / "a.json"
    abbrev.write_text(json.dumps([{"id": "OR", "abbrev": {"de": "OR", "fr": "CO"}}]), encoding="utf-8")
    build_corpus(tmp_path / "c", laws, abbreviations=abbrev)
    (tmp_path / "c" / "code_aliases.json").write_text(content, encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"code_aliases\.json: \d+ bytes"):  # its recorded size and hash first
        Corpus(tmp_path / "c")
    params = json.loads((tmp_path / "c" / "params.json").read_text())
    del params["files"]["code_aliases.json"]  # an artifact whose hashes do not cover the file: its contents are checked
    del params[DIGEST]  # (one from before params.json recorded its own digest)
    (tmp_path / "c" / "params.json").write_text(json.dumps(params))
    with pytest.raises(ArtifactError, match=f"code_aliases\\.json: {message}"):
        Corpus(tmp_path / "c")


def _index_state(index):
    return index.by_key, index.children, index.codes, index.aliases, index.extract_codes


def test_citation_lookups_come_from_the_keys_the_build_parsed(tmp_path, tiny_inputs):
    """The corpus keeps each citation's lookup key and law code (citation_keys.parquet), so
    loading builds the same lookups as parsing every citation again, and a corpus built before
    that file existed still loads by parsing."""
    from lexrag.citations.index import CitationIndex
    from lexrag.index.corpus import KEYS_FILE

    laws, courts = tiny_inputs
    extra = tmp_path / "more.csv"  # a repeated citation (other text), whitespace and a trailing dot
    extra.write_text("citation,text\nBGE 145 II 32 E. 3.1,anders\n5A_800/2019  E. 3.,x\n1C_1/2020,y\n", encoding="utf-8")
    folder = tmp_path / "corpus"
    build_corpus(folder, laws, courts, abbreviations=None)
    c = Corpus(folder)
    assert (folder / KEYS_FILE).is_file()
    assert _index_state(c.index) == _index_state(CitationIndex(c.citations, c.aliases))
    build_corpus(tmp_path / "c2", laws, extra)
    c2 = Corpus(tmp_path / "c2")
    assert _index_state(c2.index) == _index_state(CitationIndex(c2.citations, c2.aliases))
    for cit in set(c2.citations) | {"nothing"}:
        assert c2.docs_of(cit) == [i for i, s in enumerate(c2.citations) if s == cit]
    (folder / KEYS_FILE).unlink()  # an older corpus: lookups by parsing
    params = json.loads((folder / "params.json").read_text())
    del params["files"][KEYS_FILE]
    del params[DIGEST]  # nor the digest params.json now records of itself
    (folder / "params.json").write_text(json.dumps(params))
    old = Corpus(folder)
    assert _index_state(old.index) == _index_state(c.index)


# --- statute headings (--headings) ------------------------------------------------------------------

TINY_HEADINGS = """citation,article_heading,path
Art. 1 OR,Abschluss des Vertrages,Erste Abteilung: Allgemeine Bestimmungen > Die Entstehung durch Vertrag
Art. 41 Abs. 1 OR,Haftung aus unerlaubter Handlung,Die Entstehung durch unerlaubte Handlungen
Art. 2 Abs. 1 ZGB,  Handeln   nach Treu und Glauben ,Einleitung
Art. 2 Abs. 2 ZGB,Rechtsmissbrauch,Einleitung
Art. 999 OR,Gibt es nicht,Nirgends
kein Zitat,Kopf,Pfad
Art. 2 Abs. 2 ZGB,Anderer Kopf,Einleitung
Art. 8 ZGB,,
"""


def test_headings_join_the_corpus_as_two_columns_by_key_else_by_article(tmp_path, tiny_inputs):
    laws, courts = tiny_inputs
    heads = tmp_path / "headings.csv"
    heads.write_text(TINY_HEADINGS, encoding="utf-8")
    report = build_corpus(tmp_path / "corpus", laws, courts, headings=heads)
    rows = {r["citation"]: r for r in pq.read_table(tmp_path / "corpus" / "corpus.parquet").to_pylist()}
    assert (rows["Art. 1 Abs. 2 OR"]["heading"], rows["Art. 1 Abs. 2 OR"]["path"]) == (
        "Abschluss des Vertrages", "Erste Abteilung: Allgemeine Bestimmungen > Die Entstehung durch Vertrag")  # by its article
    assert rows["Art. 2 Abs. 1 ZGB"]["heading"] == "Handeln nach Treu und Glauben"  # whitespace collapsed
    assert rows["Art. 2 Abs. 2 ZGB"]["heading"] == "Rechtsmissbrauch"  # the first of a key given twice
    assert rows["Art. 8 ZGB"]["heading"] == rows["Art. 8 ZGB"]["path"] == ""  # a row with neither: skipped
    assert rows["BGE 145 II 32 E. 3.1"]["heading"] == ""  # court considerations have none
    h = report["headings"]
    assert (h["rows"], h["law_docs"], h["law_docs_with_heading"], h["law_docs_without"], h["rows_matching_no_document"]) == (
        5, 7, 5, 2, 1)
    read = h["read"]
    assert (read["malformed"], read["same_key"], read["empty_text"]) == (1, 1, 1)
    assert {e["line"] for e in read["examples"]} == {7, 8}
    params = json.loads((tmp_path / "corpus" / "params.json").read_text())
    assert params["sources"]["headings.csv"] == h["sha256"] and params["params"]["schema"][-2:] == ["heading", "path"]
    c = Corpus(tmp_path / "corpus")
    assert c.has_headings and c.missing_fields(["text", "heading"]) == []
    doc = c.docs_of("Art. 1 Abs. 2 OR")[0]
    assert c.field_texts([doc], ["text", "heading", "heading"]) == [
        "Die Willensäusserung kann eine ausdrückliche oder stillschweigende sein. Abschluss des Vertrages Abschluss des Vertrages"]


def test_a_corpus_built_without_headings_is_the_same_bytes_and_reads_them_as_empty(tmp_path, tiny_inputs):
    laws, courts = tiny_inputs
    build_corpus(tmp_path / "a", laws, courts)
    heads = tmp_path / "headings.csv"
    heads.write_text(TINY_HEADINGS, encoding="utf-8")
    build_corpus(tmp_path / "h", laws, courts, headings=heads)
    build_corpus(tmp_path / "b", laws, courts)
    for name in ("corpus.parquet", "texts.bin", "text_offsets.npy", "citation_keys.parquet", "build_report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "texts.bin").read_bytes() == (tmp_path / "h" / "texts.bin").read_bytes()
    plain = json.loads((tmp_path / "a" / "params.json").read_text())
    assert plain["params"]["schema"] == ["doc_id", "citation", "text", "title", "source", "parent", "lang"]
    assert "headings" not in json.loads((tmp_path / "a" / "build_report.json").read_text())
    c = Corpus(tmp_path / "a")
    assert not c.has_headings and c.missing_fields(["text", "heading", "path", "heading"]) == ["heading", "path"]
    assert [t for b in c.iter_texts(fields=["text", "heading"]) for t in b] == [t for b in c.iter_texts() for t in b]
    with pytest.raises(ArtifactError, match="no column of the corpus"):
        c.missing_fields(["text", "marginalie"])


def test_bm25_finds_a_paragraph_by_its_heading_only_when_built_with_it(tmp_path, tiny_inputs):
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_index

    laws, courts = tiny_inputs
    heads = tmp_path / "headings.csv"
    heads.write_text(TINY_HEADINGS, encoding="utf-8")
    build_corpus(tmp_path / "corpus", laws, courts, headings=heads)
    c = Corpus(tmp_path / "corpus")
    doc = c.docs_of("Art. 2 Abs. 2 ZGB")[0]
    for fields, found in ((["citation", "title", "text"], False), (["citation", "title", "text", "heading", "heading", "path"], True)):
        cfg = load_config(None, {"lexical.fields": fields, "lexical.decompound": False})
        index = build_index("bm25", cfg, tmp_path / "corpus", tmp_path / f"bm25-{len(fields)}", corpus=c)
        s = index.scores("Rechtsmissbrauch")
        assert (s is not None and int(s.argmax()) == doc) is found


@pytest.mark.parametrize("text, message", [
    ("citation,heading,path\nArt. 1 OR,Kopf,Pfad\n", "missing column"),
    ("citation,article_heading,path\nkein Zitat,Kopf,Pfad\n", "no usable row"),
    ("citation,article_heading,path\n", "no usable row"),
])
def test_a_headings_file_that_cannot_be_used_is_refused_before_the_corpus_is_written(tmp_path, tiny_inputs, text, message):
    laws, courts = tiny_inputs
    heads = tmp_path / "headings.csv"
    heads.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=message) as e:
        build_corpus(tmp_path / "corpus", laws, courts, headings=heads)
    assert "--headings" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "corpus" / "corpus.parquet").exists()
