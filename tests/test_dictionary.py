"""The dictionary artifact and the dict_de translation: phrase-first lookup on a tiny Ding file
written here, legal and Swiss senses first, ß -> ss, citations kept, German questions left alone,
a missing or damaged dictionary refused in one line."""

from __future__ import annotations

import gzip

import pytest

from lexrag.errors import ArtifactError
from lexrag.index.dictionary import Dictionary, build_dictionary
from lexrag.index.language import is_english
from lexrag.testing import write_dictd

DING = """# Version :: test 2026-12-02
# a comment line
Untersuchungshaft {f}; U-Haft {f} [jur.] | jdn. in Untersuchungshaft nehmen :: pre-trial detention [Am.]; detention pending trial | to remand sb. in custody
Haft {f} [jur.] :: detention; custody
Vertrag {m} [jur.] | Verträge {pl} :: contract | contracts
Kontrakt {m} [econ.] :: contract
Zivilgesetzbuch {n} /ZGB/ [Schw.] [jur.]; Bürgerliches Gesetzbuch {n} /BGB/ [Dt.] [jur.] :: Civil Code
Schadenersatz {m}; Schadensersatz {m} :: damages
Gefahr {f} | Gefahren {pl} :: danger; risk | dangers
Flucht {f} :: flight
Fluchtgefahr {f} [jur.] :: risk of flight; danger of flight
Strasse {f}; Straße {f} :: street
Gehsteig {m} [Dt.]; Trottoir {n} [Schw.] :: pavement
this line has no separator
Haus {n} :: house :: maison
bis {prp; +Akk.} :: until; till {tilled; tilled}
A | B :: misaligned
"""


@pytest.fixture
def dictionary(tmp_path) -> Dictionary:
    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    return build_dictionary(src, tmp_path / "dictionary")


def test_the_longest_phrase_is_looked_up_first(dictionary):
    out = dictionary.translate("Is there a risk of flight?").split()
    assert "Fluchtgefahr" in out and "Gefahr" not in out and "Flucht" not in out
    assert out[-2:] == ["risk", "flight"]  # the English words stay beside their German sense
    out = dictionary.translate("Can he be held in pre-trial detention?").split()
    assert "Untersuchungshaft" in out and "Haft" not in out


def test_legal_and_swiss_senses_come_first(dictionary):
    assert dictionary.senses("contract") == ["Vertrag"]  # the [jur.] sense only, the [econ.] one dropped
    assert dictionary.senses("pavement") == ["Trottoir", "Gehsteig"]  # Swiss before German usage
    assert [g for g, _ in dictionary.entries["damages"]] == ["Schadenersatz", "Schadensersatz"]
    dictionary.senses("pavement").append("Strasse")  # a caller's change to the list it got is its own
    assert dictionary.senses("pavement") == ["Trottoir", "Gehsteig"]


def test_a_words_senses_share_its_weight_and_bm25_reads_it(dictionary, tmp_path):
    # two senses: each weighted 1/2 in BM25's boost syntax; one sense: no weight written
    assert dictionary.translate("pavement").split() == ["Trottoir^0.5", "Gehsteig^0.5", "pavement"]
    assert dictionary.translate("the contract").split() == ["Vertrag", "contract"]
    from lexrag.index.bm25_build import build_bm25

    docs = ["Das Trottoir ist breit.", "Der Vertrag ist gültig.", "Gehsteig und Vertrag."]
    idx = build_bm25([docs], tmp_path / "bm25")
    one, both = idx.scores("Vertrag", cache=False), idx.scores(dictionary.translate("the pavement under the contract"), cache=False)
    half = idx.scores("Trottoir", cache=False) / 2 + idx.scores("Gehsteig", cache=False) / 2
    assert both[1] == pytest.approx(one[1]) and both[0] == pytest.approx(half[0])  # a full weight for the one sense


def test_a_semicolon_inside_braces_separates_no_synonyms(dictionary):
    assert dictionary.senses("until") == ["bis"]  # not "bis {prp" and "+Akk.}"
    assert "till" in dictionary.entries and not any(k.endswith("}") or "{" in k for k in dictionary.entries)


class _Index:
    """Document frequencies of a stand-in index (the logic around them is under test)."""

    def __init__(self, dfs: dict[str, int], n_docs: int = 1000):
        self.dfs, self.n_docs = dfs, n_docs

    def word_term(self, word: str):
        return (word.lower(), self.dfs[word.lower()]) if word.lower() in self.dfs else None

    def doc_freq(self, word: str):
        return self.dfs.get(word.lower())

    def idf(self, df: float) -> float:
        import math

        return math.log(1 + (self.n_docs - df + 0.5) / (df + 0.5))


def test_the_weightings_share_a_words_weight_among_its_senses():
    from lexrag.index.dictionary_weights import weighted

    senses = ["Einheit", "Kraftwerksblock", "Polizeiwagen"]
    index = _Index({"einheit": 200, "kraftwerksblock": 2})  # Polizeiwagen: in no document
    assert weighted(senses) == ["Einheit^0.33", "Kraftwerksblock^0.33", "Polizeiwagen^0.33"]
    assert weighted(senses, "indexed", index) == ["Einheit^0.5", "Kraftwerksblock^0.5"]
    common, rare = (float(w.split("^")[1]) for w in weighted(senses, "structured", index))
    assert common > 0.5 > rare  # one idf for the word: the rare sense no longer outweighs the common one
    assert common * index.idf(200) == pytest.approx(rare * index.idf(2), rel=0.05)  # both at the word's idf
    assert weighted(["Vertrag"], "structured", index) == ["Vertrag"]  # one sense: its full weight
    assert weighted(["A", "B"], "indexed", _Index({})) == ["A^0.5", "B^0.5"]  # none indexed: as uniform
    with pytest.raises(ValueError, match="choose one of uniform, indexed, structured"):
        weighted(senses, "idf")


def test_first_pass_weighs_the_senses_the_top_documents_hold():
    from lexrag.index.dictionary_weights import weighted

    index = _Index({"einheit": 200, "kraftwerksblock": 2, "grobe": 50, "fahrlässigkeit": 40})
    # 9 of the top documents hold Einheit, none Kraftwerksblock: (1 + 9) : (1 + 0)
    assert weighted(["Einheit", "Kraftwerksblock"], "first_pass", index, {"einheit": 9}) == ["Einheit^0.91", "Kraftwerksblock^0.091"]
    # a sense of two words counts as often as its scarcer word: (1 + 1) : (1 + 3)
    out = weighted(["grobe Fahrlässigkeit", "Einheit"], "first_pass", index, {"grobe": 6, "fahrlässigkeit": 1, "einheit": 3})
    assert out == ["grobe^0.33", "Fahrlässigkeit^0.33", "Einheit^0.67"]
    with pytest.raises(ValueError, match="give top_stems"):  # never a silent indexed weighting
        weighted(["Einheit", "Kraftwerksblock"], "first_pass", index)


def test_a_tiny_weight_is_written_so_bm25_reads_it():
    from lexrag.index.dictionary_weights import weighted
    from lexrag.index.lexical import _BOOST

    out = weighted([f"Sinn{i}" for i in range(3000)])  # 1/3000 would print as 0.00033, 1/30000 as 3.3e-05
    assert out[0] == "Sinn0^0.001" and _BOOST.fullmatch(out[0])


def test_the_index_idf_is_the_one_its_weights_were_built_with(tmp_path):
    from lexrag.index.bm25_build import build_bm25

    docs = ["Vertrag Miete", "Vertrag Kauf", "Vertrag Schenkung", "Miete Pacht"]
    idx = build_bm25([docs], tmp_path / "bm25")
    assert idx.doc_freq("Vertrag") == 3 and idx.doc_freq("Schenkung") == 1 and idx.doc_freq("Leasing") is None
    one, three = idx.scores("Schenkung", cache=False)[2], idx.scores("Vertrag", cache=False)[2]  # one document, tf 1 each
    assert one / three == pytest.approx(idx.idf(1) / idx.idf(3), rel=1e-4)


def test_the_weighting_reads_the_loaded_bm25_index(tmp_path, demo_laws):
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    src = tmp_path / "de-en"
    src.write_text(DING + "Vertrag {m}; Abmachungsurkundenbuch {n} :: agreement\n", encoding="utf-8")
    cfg = load_config(None, {"runtime.progress": False, "dictionary.enabled": True, "dictionary.weighting": "indexed"})
    build_artifacts(cfg, demo_laws, tmp_path / "art", dictionary=src)
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    assert art.bm25.doc_freq("Vertrag") and art.bm25.doc_freq("Abmachungsurkundenbuch") is None
    res = run_pipeline([Query("en", "Who signed the agreement?")], art, cfg)
    words = res.states[0].variants["dict_de"].text.split()
    assert "Vertrag" in words and not any(w.startswith("Abmachung") for w in words)  # the sense no law holds is left out
    cfg = load_config(None, {"runtime.progress": False, "dictionary.enabled": True, "dictionary.weighting": "first_pass"})
    res = run_pipeline([Query("en", "Who signed the agreement?")], art, cfg)
    assert "Vertrag" in res.states[0].variants["dict_de"].text.split()  # one sense held: its full weight
    from lexrag.errors import ConfigError

    both = ("dictionary.weighting=indexed and dictionary.compounds read the BM25 index, which lexical.enabled=false leaves "
            "unloaded: set lexical.enabled=true, or dictionary.weighting=uniform dictionary.compounds=false")
    with pytest.raises(ConfigError, match="set lexical.enabled=true, or dictionary.enabled=false"):
        load_config(None, {"dictionary.enabled": True, "lexical.enabled": False})  # nothing would search the translation
    dense = {"semantic.enabled": True, "semantic.model": "x", "semantic.variants": ["dict_de"]}  # the dense stage searches it
    with pytest.raises(ConfigError, match=both):  # the defaults: both ways out in one line
        load_config(None, {"dictionary.enabled": True, "lexical.enabled": False, **dense})
    with pytest.raises(ConfigError, match="weighting=structured reads the BM25 index, .* or dictionary.weighting=uniform$"):
        load_config(None, {"dictionary.enabled": True, "dictionary.weighting": "structured", "dictionary.compounds": False,
                           "lexical.enabled": False, **dense})
    with pytest.raises(ConfigError, match="dictionary.compounds reads the BM25 index, .* or dictionary.compounds=false$"):
        load_config(None, {"dictionary.enabled": True, "dictionary.weighting": "uniform", "lexical.enabled": False, **dense})
    plain = load_config(None, {"dictionary.enabled": True, "dictionary.weighting": "uniform", "dictionary.compounds": False,
                               "lexical.enabled": False, **dense})  # needs no index
    art.bm25 = None
    res = run_pipeline([Query("en", "Who must pay for the pavement?")], art, plain)
    assert "Trottoir^0.5" in res.states[0].variants["dict_de"].text.split()  # uniform, without compounds: no index read


def test_without_the_bm25_index_the_dictionary_stage_is_missing_and_the_run_goes_on(demo_artifacts, demo_queries, tmp_path):
    import shutil

    from lexrag.config import load_config
    from lexrag.eval.status import run_status
    from lexrag.eval.validation import ablation_table
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    shutil.copytree(demo_artifacts, tmp_path / "art", ignore=lambda d, names: ["bm25"] if d == str(demo_artifacts) else [])
    question = [Query("en", "Who must pay for the pavement of the street?")]
    for preset in ("kaggle", "lexical"):  # the defaults read the index: the stage is off, its row says which part is missing
        cfg = load_config(preset, {"runtime.progress": False, "semantic.enabled": False, "rerank.enabled": False,
                                   "llm.enabled": False, "count.method": "fixed"})
        art = Artifacts.from_folder(tmp_path / "art", cfg, degrade=True)
        assert art.bm25 is None and "bm25" in art.missing and art.dictionary is not None
        res = run_pipeline(question, art, cfg)
        assert "dict_de" not in res.states[0].variants and not res.failed
        row = next(r for r in run_status(cfg, art, res).rows if r.stage == "dictionary")
        assert row.state == "missing" and row.why.startswith("bm25: ") and "lexrag-bm25" in row.fix, (row.why, row.fix)
    plain = load_config("lexical", {"runtime.progress": False, "dictionary.weighting": "uniform", "dictionary.compounds": False})
    art = Artifacts.from_folder(tmp_path / "art", plain, degrade=True)
    res = run_pipeline(question, art, plain)
    assert "dict_de" in res.states[0].variants  # uniform without compounds reads no index: it runs
    assert next(r for r in run_status(plain, art, res).rows if r.stage == "dictionary").state == "ran"
    rows = ablation_table(load_config("lexical", {"runtime.progress": False}), Artifacts.from_folder(demo_artifacts, load_config("lexical")),
                          demo_queries, tmp_path / "ablation")  # "without BM25" takes the dictionary off with it
    assert {"full", "without BM25", "without dictionary"} <= {r["run"] for r in rows}, [r["run"] for r in rows]


def test_compounds_of_adjacent_words_are_added_where_the_index_holds_them(dictionary, tmp_path):
    from lexrag.config.sections import LexicalConfig
    from lexrag.index.bm25_build import build_bm25

    docs = ["Die Arbeitszeit beträgt 45 Stunden.", "Die Arbeitszeit wird erfasst.", "Das Schulgebäude ist alt.",
            "Im Schulgebäude.", "Zeitarbeit ist Leiharbeit.", "Arbeit und Zeit.", "Schule und Gebäude.",
            "Der Arbeitsvertrag.", "Ein Arbeitsvertrag.", "Die Ostsee ist kalt.", "An der Ostsee.", "Die Werkzeit.",
            "Eine Werkzeit im Werk.", "Arbeit, Arbeit, Arbeit und Zeit, Zeit, Zeit."]  # the index splits Arbeitszeit
    src = tmp_path / "ding"
    src.write_text(DING + "Arbeit {f} :: work; labour\nZeit {f} :: time; period\nSchule {f} :: school\nGebäude {n} :: building\n"
                   "Werk {n} :: work\nArbeitsvertrag {m} :: work contract\nOsten {m} :: e\nSee {f} :: sea\n", encoding="utf-8")
    d = build_dictionary(src, tmp_path / "dict2")
    idx = build_bm25([docs], tmp_path / "bm25", LexicalConfig(decompound_min_count=1))
    words = d.translate("The work time of the school building", "uniform", idx, compounds=True).split()
    assert "=Arbeitszeit^0.5" in words and "=Werkzeit^0.5" in words  # Arbeit + s + Zeit, Werk + Zeit: they share the pair's weight
    assert "=Schulgebäude^1" in words  # Schule without its -e, no linking element
    assert not any("Zeitarbeit" in w for w in words)  # modifier first ("time work" is not asked)
    assert "Zeitarbeit" not in d.translate("time work", "uniform", idx, compounds=True)  # held by one document only
    assert "Arbeitszeit" not in d.translate("The work time", "uniform", idx)  # off: as before
    for apart in ("The work, time", "work of time", "work Art. 5 OR time"):  # punctuation, a function word or a citation between
        assert "Arbeitszeit" not in d.translate(apart, "uniform", idx, compounds=True)
    assert "=" not in d.translate("a work contract", "uniform", idx, compounds=True)  # a phrase looked up whole: no pair in it
    assert "Ostsee" not in d.translate("e sea", "uniform", idx, compounds=True)  # a one-letter token makes no compound
    with pytest.raises(ValueError, match="compounds read the BM25 index"):
        d.translate("work time", compounds=True)
    # BM25 takes "=Arbeitszeit" whole: the parts keep the weights of their senses
    vocab = {j: t for t, j in idx.retriever.vocab_dict.items()}
    terms = {vocab[j]: w for j, w in idx.query_terms("Arbeit^0.25 Werk^0.25 Zeit^0.25 =Arbeitszeit^0.5").items()}
    assert terms == {"arbeit": 0.25, "werk": 0.25, "zeit": 0.25, "arbeitszeit": 0.5}
    assert {vocab[j] for j in idx.query_terms("Arbeitszeit^0.5")} == {"arbeitszeit", "arbeit", "zeit"}  # without "=": split


def test_sharp_s_is_written_as_ss(dictionary):
    assert "Strasse" in dictionary.translate("the street").split()
    assert "ß" not in dictionary.translate("the street")


def test_names_with_umlauts_stay_whole(dictionary):
    words = dictionary.translate("A contract in Zürich with Müller AG").split()
    assert {"Zürich", "Müller", "AG", "Vertrag"} <= set(words) and "ü" not in words


def test_citations_abbreviations_and_unknown_words_are_kept(dictionary):
    out = dictionary.translate("Does Art. 221 Abs. 1 StPO allow detention of Mr Meier?")
    assert out.startswith("Art. 221 Abs. 1 StPO")
    words = out.split()
    assert "Haft" in words and "Meier" in words and "Mr" in words
    assert "of" not in words and "Does" not in words  # English function words are not search terms


def test_english_is_told_from_german():
    assert is_english("Under which conditions may the court order pre-trial detention of the accused?")
    assert not is_english("Unter welchen Voraussetzungen kann das Gericht die Untersuchungshaft anordnen, wenn der Beschuldigte flieht?")
    assert not is_english("Art. 221 StPO")
    assert not is_english("Le contrat est nul si la partie a été trompée par l'autre partie.")
    assert not is_english("Il contratto è nullo se la parte è stata ingannata dall'altra parte.")


def test_short_german_questions_with_party_letters_are_not_english():
    # "Was", "an", "will", "hat" are English words too, and "A" is no article: none of them makes German English
    for german in ("Was kann A an B verlangen?", "Hat B gegen A einen Anspruch?", "Kann X die Sache von Y herausverlangen?",
                   "Was gilt, wenn A stirbt?", "Was will C von A?", "Ist A an B gebunden?", "Haftet A nach Art. 41 OR?",
                   "Art. 41 OR, Art. 97 OR"):  # "OR" is the Code of Obligations, no conjunction
        assert not is_english(german), german
    for english in ("What can A claim from B?", "Is B liable to A?", "Does B owe A?", "May X sue Y?", "What if A dies?",
                    "Can C also claim damages from A?"):
        assert is_english(english), english


def test_the_artifact_records_its_source_and_licence_and_loads_back(dictionary, tmp_path):
    doc = dictionary.doc
    assert doc["source_version"] == "test 2026-12-02" and doc["licence"].startswith("GPL-2+") and len(doc["source_sha256"]) == 64
    again = Dictionary.load(tmp_path / "dictionary")
    assert again.entries == dictionary.entries
    first = (tmp_path / "dictionary" / "entries.tsv.gz").read_bytes()
    build_dictionary(tmp_path / "de-en", tmp_path / "again")
    assert (tmp_path / "again" / "entries.tsv.gz").read_bytes() == first  # the same bytes from the same source


def test_a_missing_or_unreadable_dictionary_is_one_line(tmp_path, dictionary):
    with pytest.raises(ArtifactError) as e:
        build_dictionary(tmp_path / "nowhere", tmp_path / "d")
    assert "\n" not in str(e.value) and "apt-get install trans-de-en" in str(e.value)
    bad = tmp_path / "latin1"
    bad.write_bytes("Straße :: street\n".encode("latin-1"))
    with pytest.raises(ArtifactError, match="not UTF-8"):
        build_dictionary(bad, tmp_path / "d")
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="no English-German entries"):
        build_dictionary(empty, tmp_path / "d")
    entries = tmp_path / "dictionary" / "entries.tsv.gz"
    with gzip.open(entries, "wt", encoding="utf-8") as f:
        f.write("only one column\n")
    with pytest.raises(ArtifactError) as e:
        Dictionary.load(tmp_path / "dictionary")
    assert "\n" not in str(e.value) and ("damaged" in str(e.value) or "entries.tsv.gz" in str(e.value))


def test_the_variant_runs_for_english_questions_only_and_bm25_searches_it(tmp_path, demo_laws):
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import Query

    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    cfg = load_config(None, {"runtime.progress": False, "dictionary.enabled": True})
    build_artifacts(cfg, demo_laws, tmp_path / "art", dictionary=src)
    assert (tmp_path / "art" / "dictionary" / "params.json").is_file()
    art = Artifacts.from_folder(tmp_path / "art", cfg)
    qs = [Query("en", "Who must pay damages under the contract?"),
          Query("de", "Wer muss aus dem Vertrag Schadenersatz leisten?")]
    res = run_pipeline(qs, art, cfg)
    states = {s.query_id: s for s in res.states}
    words = states["en"].variants["dict_de"].text.split()
    assert {"Vertrag", "Schadenersatz", "contract", "damages"} <= set(words) and "the" not in words
    assert states["en"].variants["dict_de"].origin.startswith("dictionary:de-en@test")
    assert "dict_de" not in states["de"].variants
    bm25 = {r.signal: r for r in res.signals}
    assert "en" in bm25["bm25_dict_de"].hits and "de" not in bm25["bm25_dict_de"].hits


def test_a_missing_dictionary_is_a_status_row_with_the_fix(demo_artifacts, demo_queries, tmp_path):
    import shutil

    from lexrag.config import load_config
    from lexrag.eval.status import run_status
    from lexrag.pipeline import Artifacts, run_pipeline
    from lexrag.queries import load_queries

    cfg = load_config(None, {"runtime.progress": False, "dictionary.enabled": True})
    shutil.copytree(demo_artifacts, tmp_path / "art", ignore=lambda d, names: ["dictionary"] if d == str(demo_artifacts) else [])
    with pytest.raises(ArtifactError, match="dictionary"):
        Artifacts.from_folder(tmp_path / "art", cfg)  # outside Kaggle a switched-on part that is missing stops the load
    art = Artifacts.from_folder(tmp_path / "art", cfg, degrade=True)
    assert art.dictionary is None and "dictionary" in art.missing
    res = run_pipeline(load_queries(demo_queries)[:2], art, cfg)
    status = run_status(cfg, art, res)
    row = next(r for r in status.rows if r.stage == "dictionary")
    assert row.state == "missing" and "lexrag-dictionary" in row.fix


def test_the_glossary_wins_over_the_dictionary_and_names_the_act(dictionary):
    from lexrag.index.dictionary import glossary

    g = glossary()
    assert g["civil code"][0] == "ZGB" and g["criminal procedure code"][0] == "StPO"
    assert dictionary.senses("civil code") == [" ".join(g["civil code"])]  # one sense, not the dictionary's "... BGB"
    out = dictionary.translate("Under the Debt Enforcement and Bankruptcy Act, may the creditor appeal?").split()
    assert out[:3] == ["SchKG", "Schuldbetreibung", "Konkurs"] or "SchKG" in out
    assert "Beschwerde" in out


def test_a_freedict_dictd_dictionary_builds_the_same_kind_of_artifact(tmp_path):
    src = write_dictd(tmp_path, [
        ("pre-trial detention", "pre-trial detention /ipa/\nUntersuchungshaft <fem> [jur.]\n see: {remand}\n"),
        ("objection", "objection /ipa/\nBeanstandung <fem>, Missfallen <neut>\n"),
        ("objection", "objection /ipa/\nEinwand <masc>, Einspruch <masc>, Einsprache <fem> [Schw.] [jur.]\n   Note: gegen etw., Anfechtung <fem>\n"),
        ("street", "street /ipa/\nStraße <fem>, Gasse <fem>\n      \"in the street\"  - auf der Straße\n"),
    ])
    d = build_dictionary(src, tmp_path / "dictionary")
    assert d.doc["params"]["format"] == "dictd" and d.doc["source_version"] == "test-1" and "AGPL-3.0" in d.doc["licence"]
    assert d.senses("objection") == ["Einsprache", "Einwand", "Einspruch"]  # the legal line only, the Swiss sense first
    assert d.senses("street") == ["Strasse", "Gasse"]  # indented examples are not senses
    assert "Untersuchungshaft" in d.translate("Is pre-trial detention lawful?").split()
    assert build_dictionary(tmp_path / "en-de.dict.dz", tmp_path / "again").entries == d.entries  # either file names it
    (tmp_path / "en-de.dict.dz").unlink()
    with pytest.raises(ArtifactError, match="needs both en-de.index and en-de.dict.dz") as e:
        build_dictionary(src, tmp_path / "x")
    assert "\n" not in str(e.value)


def test_misaligned_lines_and_an_index_of_other_data_are_counted_and_refused(tmp_path):
    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    d = build_dictionary(src, tmp_path / "d")
    # counted, not silently dropped (nor "house :: maison" indexed as an English key)
    assert d.doc["skipped"] == {"misaligned lines": 1, "lines without one ' :: ' between German and English": 2}
    assert d.senses("house :: maison") == [] and d.senses("house") == []
    good = write_dictd(tmp_path / "a", [("street", "street /ipa/\nStrasse <fem>\n"), ("contract", "contract /ipa/\nVertrag <masc>\n")])
    other = write_dictd(tmp_path / "b", [("damages", "damages /ipa/\nSchadenersatz <masc>\n"), ("debtor", "debtor /ipa/\nSchuldner <masc>\n")])
    (tmp_path / "b" / "en-de.index").write_bytes((tmp_path / "a" / "en-de.index").read_bytes())  # the index of other data
    with pytest.raises(ArtifactError, match="index lines point outside their entries"):
        build_dictionary(other, tmp_path / "x")
    assert build_dictionary(good, tmp_path / "y").senses("contract") == ["Vertrag"]


def _deflate_start(raw: bytes) -> int:
    """Where a gzip member's deflate data starts, after its header (RFC 1952)."""
    flags, pos = raw[3], 10
    if flags & 4:  # FEXTRA (dictzip's chunk table)
        pos += 2 + raw[pos] + (raw[pos + 1] << 8)
    for flag in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            pos = raw.index(0, pos) + 1
    return pos + 2 if flags & 2 else pos


def test_a_damaged_dict_dz_a_byte_order_mark_and_a_brace_left_open(tmp_path):
    src = write_dictd(tmp_path / "fd", [("street", "street /ipa/\nStrasse <fem>\n")])
    data = tmp_path / "fd" / "en-de.dict.dz"
    raw = bytearray(data.read_bytes())
    raw[_deflate_start(raw)] = 0xFF  # the first block's type is one deflate reserves: zlib.error, not a gzip error
    data.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match=r"en-de.index: unreadable \(error: ") as e:  # zlib.error
        build_dictionary(src, tmp_path / "x")
    assert "\n" not in str(e.value) and not (tmp_path / "x").exists()
    bom = tmp_path / "bom"
    bom.write_bytes(b"\xef\xbb\xbf" + DING.encode("utf-8"))
    d = build_dictionary(bom, tmp_path / "b")
    assert d.doc["source_version"] == "test 2026-12-02" and not any(k.startswith("\ufeff") for k in d.entries)
    left_open = tmp_path / "open"
    left_open.write_text("Vertrag {m :: contract\nHaft {f} [jur.] :: detention (of sb.\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="no English-German entries"):  # neither line gives a clean pair
        build_dictionary(left_open, tmp_path / "o")
    left_open.write_text("Vertrag {m :: contract\nHaft {f} [jur.] :: detention\n", encoding="utf-8")
    d = build_dictionary(left_open, tmp_path / "o")
    assert d.entries == {"detention": [("Haft", 1)]} and d.doc["skipped"] == {
        "synonyms with a brace, bracket or parenthesis left open": 1}


def test_a_failed_rebuild_keeps_the_dictionary_that_was_there(tmp_path, dictionary, monkeypatch):
    import lexrag.index.dictionary as D

    before = {p.name: p.read_bytes() for p in (tmp_path / "dictionary").iterdir()}
    other = tmp_path / "other"
    other.write_text("Haft {f} [jur.] :: detention\n", encoding="utf-8")

    def full_disk(*a, **k):  # the entries written, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(D, "write_params", full_disk)
    with pytest.raises(OSError, match="No space left"):
        build_dictionary(other, tmp_path / "dictionary")
    assert {p.name: p.read_bytes() for p in (tmp_path / "dictionary").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_a_damaged_row_or_stream_is_named_and_an_artifact_of_another_phrase_length_refused(tmp_path, dictionary, monkeypatch):
    import json
    import shutil

    from lexrag.artifacts import seal

    entries = tmp_path / "dictionary" / "entries.tsv.gz"
    rows = gzip.decompress(entries.read_bytes()).decode("utf-8").splitlines()
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "dictionary", copy)
    params = copy / "params.json"
    doc = json.loads(params.read_text(encoding="utf-8"))
    doc["params"]["max_phrase"] = 7
    params.write_text(json.dumps(seal(doc)), encoding="utf-8")  # as a build of such a lexrag writes it
    with pytest.raises(ArtifactError, match="phrases of up to 7 words, this lexrag looks up 4; rebuild it"):
        Dictionary.load(copy)
    rows[2] = "no tabs here"
    with gzip.open(entries, "wt", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    from lexrag.artifacts import write_params

    write_params(tmp_path / "dictionary", "dictionary", "lexrag.index.dictionary", {"max_phrase": 4})  # sizes and hashes agree
    with pytest.raises(ArtifactError, match=r"entries.tsv.gz: damaged at row 3 \(ValueError\)"):
        Dictionary.load(tmp_path / "dictionary")
    whole = gzip.compress(("\n".join(r for i, r in enumerate(rows) if i != 2) + "\n").encode("utf-8"))
    entries.write_bytes(whole[:-4])  # the stream's length field cut off: every row reads, the end does not
    write_params(tmp_path / "dictionary", "dictionary", "lexrag.index.dictionary", {"max_phrase": 4})
    with pytest.raises(ArtifactError, match=rf"its compressed data is damaged \(read {len(rows) - 1} rows whole, then EOFError\)"):
        Dictionary.load(tmp_path / "dictionary")
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(gzip, "open", refused)  # no damage: said as unreadable, with the system's reason
    with pytest.raises(ArtifactError, match=r"entries.tsv.gz: unreadable \(Permission denied\)"):
        Dictionary.load(tmp_path / "dictionary")


def test_a_glossary_line_without_its_tab_is_named(monkeypatch, tmp_path):
    import lexrag.index.dictionary as D

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "glossary_en_de.tsv").write_text("# en\tde\nCivil Code\tZGB\nCode of Obligations OR\n", encoding="utf-8")
    monkeypatch.setattr("importlib.resources.files", lambda package: tmp_path)
    with pytest.raises(ArtifactError, match=r"glossary_en_de.tsv: line 3: not 'English<TAB>German' \('Code of Obligations OR'\)"):
        D.glossary()


def test_a_wrong_dictionary_path_fails_before_anything_is_built(tmp_path, demo_laws, capsys):
    from lexrag.cli import main
    from lexrag.kaggle.notebook import build_corpus_cell

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    for bad, said in ((tmp_path / "nowhere", "not a file"), (garbage, "not UTF-8 text")):
        rc = main(["-q", "build", "--laws", str(demo_laws), "--no-courts", "--out", str(tmp_path / "out"), "--dictionary", str(bad),
                   "--set", "runtime.progress=false"])
        assert rc == 2 and said in capsys.readouterr().err
        assert not (tmp_path / "out").exists()  # not the corpus first, then the error
        with pytest.raises(ArtifactError, match=said):
            build_corpus_cell(laws=str(demo_laws), courts=False, dictionary=str(bad), out_dir=str(tmp_path / "nb"),
                              overrides={"runtime.progress": False})
        assert not (tmp_path / "nb" / "corpus").exists()


def test_the_check_before_a_build_reads_a_short_file_to_its_end(tmp_path):
    from lexrag.index.dictionary_sources import check_source

    short = tmp_path / "short"
    short.write_bytes("# V :: 1\nHaft :: detention\nStra".encode("utf-8") + b"\xdf")  # Latin-1 in its last byte
    with pytest.raises(ArtifactError, match="not UTF-8 text"):
        check_source(short)
    cut = tmp_path / "long"  # a character cut by the head the check reads: well-formed, accepted
    head = b"# V :: 1\nHaft :: detention\n"
    cut.write_bytes(head + b"a" * (65535 - len(head)) + "ß :: sharp s\n".encode("utf-8"))
    assert cut.read_bytes()[65535:65537] == "ß".encode("utf-8")
    check_source(cut)


def test_an_inflected_word_the_dictionary_lacks_is_looked_up_by_its_base(dictionary):
    from lexrag.index.dictionary import base_forms

    assert base_forms("tenant's") == ["tenant"] and base_forms("tenants'") == ["tenants"]
    assert base_forms("contains") == ["contain"] and base_forms("taxes") == ["tax", "taxe"]
    assert base_forms("parties") == ["party", "partie"] and base_forms("status") == [] and base_forms("access") == []
    assert base_forms("basis") == [] and base_forms("its") == []  # "is", "us" endings; two-letter bases are no words here
    assert dictionary.senses("detentions") == dictionary.senses("detention") == ["Haft"]
    assert dictionary.senses("contract's") == dictionary.senses("contract")
    assert dictionary.senses("contracts") == ["Verträge"]  # its own entry (Ding's plural), not the base's
    assert dictionary.senses("pre-trial detentions") == []  # a phrase is looked up as written
    assert "Haft" in dictionary.translate("The detainee's detentions were unlawful").split()
