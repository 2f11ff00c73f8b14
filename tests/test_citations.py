import pytest
from lexrag.citations.index import CitationIndex
from lexrag.citations import (
    BgeCitation,
    CitationParseError,
    DocketCitation,
    LawCitation,
    extract,
    normalize_key,
    parent,
    parse,
)

# Real corpus / gold strings of all three kinds (law keys from laws_de_citations.txt, court
# strings as the corpus and the validation gold write them).
REAL = [
    "Art. 11 Abs. 2 OR",
    "Art. 8 BV",
    "Art. 58d Abs. 5 KVV",
    "Art. 30cbis 946.231.176.72",
    "Art. 2 ArGV 1",
    "Art. 3 Abs. 1 112",
    "Art. 5 GebV SchKG",
    "Art. 13 Abs. 2 VSKV-ASTRA",
    "Art. 934 Abs. 1bis ZGB",
    "Art. 10 Org-VöB",
    "Art. 4 J+S-V-BASPO",
    "BGE 145 II 32 E. 3.1",
    "BGE 127 V 205 E. 4b",
    "BGE 133 III 235 E. 4.3.2.2",
    "BGE 116 Ib 339 E. 3a",
    "BGE 139 I 2",
    "5A_800/2019 E. 2.",
    "8C_312/2023 E. 1.1",
    "1A.187/2001",
    "5C.289/2006 E. 3.2",
    "2C_1021/2019 E. 5.3",
]


@pytest.mark.parametrize("s", REAL)
def test_round_trip(s):
    assert parse(s).format() == s


def test_kinds_and_fields():
    assert parse("Art. 11 Abs. 2 OR") == LawCitation("11", "OR", "2")
    assert parse("BGE 145 II 32 E. 3.1") == BgeCitation(145, "II", 32, "3.1")
    assert parse("5A_800/2019 E. 2.") == DocketCitation("5A_800/2019", "2.")
    assert parse("Art. 2 ArGV 1").code == "ArGV 1"


def test_double_space_key_parses_to_collapsed_form():
    # 13 competition keys carry a double space; scoring collapses whitespace, so do we.
    assert parse("Art.  2 ISLK-V").format() == "Art. 2 ISLK-V"


def test_parent():
    assert parent("Art. 11 Abs. 2 OR") == "Art. 11 OR"
    assert parent("BGE 145 II 32 E. 3.1") == "BGE 145 II 32"
    assert parent("5A_800/2019 E. 2.") == "5A_800/2019"


def test_normalize_drops_lit_ziff_and_trailing_dot():
    assert normalize_key("Art. 221 Abs. 1 lit. b StPO") == "Art. 221 Abs. 1 StPO"
    assert normalize_key("Art. 8 Ziff. 2 EMRK") == "Art. 8 EMRK"
    assert normalize_key("5A_800/2019 E. 2.") == normalize_key("5A_800/2019 E. 2")
    assert normalize_key("ATF 145 II 32 consid. 3.1") == "BGE 145 II 32 E. 3.1"


@pytest.mark.parametrize("bad", ["", "Hallo Welt", "Art. OR", "BGE 145 XX 32", "5A-800-2019"])
def test_parse_rejects_with_message(bad):
    with pytest.raises(CitationParseError, match="not a law, BGE or docket"):
        parse(bad)


# Real-form German court text (sentences as the Federal Court writes them).
COURT_TEXT = (
    "Das Bundesgericht wendet das Recht von Amtes wegen an (Art. 106 Abs. 1 BGG), prüft jedoch unter "
    "Berücksichtigung der allgemeinen Rüge- und Begründungspflicht (Art. 42 Abs. 1 und 2 BGG) nur die "
    "vorgebrachten Argumente (BGE 147 I 73 E. 2.1). Vgl. auch BGE 148 IV 356 E. 2.1, 39 E. 2.3.5 mit "
    "Hinweisen sowie Urteil 8C_312/2023 E. 1.1 und 1A.187/2001. Eine Rechtsverletzung nach Art. 95 f. BGG."
)


def test_extract_from_german_court_text():
    got = [e.citation.format() for e in extract(COURT_TEXT)]
    assert got == [
        "Art. 106 Abs. 1 BGG",
        "Art. 42 Abs. 1 BGG",
        "Art. 42 Abs. 2 BGG",
        "BGE 147 I 73 E. 2.1",
        "BGE 148 IV 356 E. 2.1",
        "BGE 148 IV 39 E. 2.3.5",
        "8C_312/2023 E. 1.1",
        "1A.187/2001",
        "Art. 95 BGG",
    ]


def test_extract_from_english_query():
    q = ("May the court extend pre-trial detention under Art. 221 Abs. 1 lit. b StPO, given "
         "Art. 8 para. 2 ECHR and the reasoning in BGE 137 IV 122 consid. 6.2?")
    got = [e.citation.format() for e in extract(q, codes={"StPO", "ECHR"})]
    assert got == ["Art. 221 Abs. 1 StPO", "Art. 8 Abs. 2 ECHR", "BGE 137 IV 122 E. 6.2"]


def test_extract_with_known_codes_handles_spaces_and_sr_numbers():
    text = "gestützt auf Art. 5 GebV SchKG und Art. 3 Abs. 1 112 sowie Art. 2 ArGV 1"
    got = [e.citation.format() for e in extract(text, codes={"GebV SchKG", "SchKG", "112", "ArGV 1"})]
    assert got == ["Art. 5 GebV SchKG", "Art. 3 Abs. 1 112", "Art. 2 ArGV 1"]


def test_index_resolves_only_to_corpus_strings():
    idx = CitationIndex(["Art. 221 Abs. 1 StPO", "Art. 221 Abs. 2 StPO", "Art. 222 StPO",
                         "5A_800/2019 E. 2.", "BGE 145 II 32 E. 3.1", "BGE 145 II 32 E. 3.2"])
    assert idx.resolve("Art. 221 StPO") == ["Art. 221 Abs. 1 StPO", "Art. 221 Abs. 2 StPO"]
    assert idx.resolve("Art. 221 Abs. 1 lit. b StPO") == ["Art. 221 Abs. 1 StPO"]
    assert idx.resolve("Art. 222 Abs. 1 StPO") == ["Art. 222 StPO"]
    assert idx.resolve("5A_800/2019 E. 2") == ["5A_800/2019 E. 2."]
    assert idx.resolve("Art. 999 StPO") == []
    assert idx.resolve("BGE 145 II 32") == []  # a decision named without a consideration resolves to none of them
    assert idx.resolve_text("nach Art. 221 StPO und Art. 999 StPO") == ["Art. 221 Abs. 1 StPO", "Art. 221 Abs. 2 StPO"]
    assert "Art. 222  StPO" in idx and "Art. 223 StPO" not in idx


def test_aliases_name_corpus_codes_in_other_languages():
    from lexrag.citations import ENGLISH_ABBREVIATIONS, code_aliases

    pairs = [("CO", "OR"), ("LAI", "IVG"), ("LP", "SchKG"), ("OVA", "VX"), ("OVA", "VY"), ("0.101", "EMRK"), ("ZGB", "OR"),
             ("LEF", "SchKG")]
    aliases = code_aliases(pairs, {"OR", "IVG", "VX", "VY", "ZGB"})
    # SchKG is not a corpus code, OVA names two ordinances, an SR number is no alias, a corpus code means itself
    assert aliases == {"CO": "OR", "LAI": "IVG"}
    idx = CitationIndex(["Art. 17 Abs. 1 IVG", "Art. 17 Abs. 2 IVG", "Art. 267a OR", "Art. 41 Abs. 1 OR", "Art. 8 ZGB"],
                        {**ENGLISH_ABBREVIATIONS, **aliases, "DEBA": "SchKG"})
    assert idx.aliases == {"CO": "OR", "LAI": "IVG", "CC": "ZGB"}  # only codes the corpus holds
    assert idx.resolve_text("Under Art. 17 LAI and Art. 267a CO, see also Art. 41 para. 1 CO and Art. 8 CC.") == \
        ["Art. 17 Abs. 1 IVG", "Art. 17 Abs. 2 IVG", "Art. 267a OR", "Art. 41 Abs. 1 OR", "Art. 8 ZGB"]
    assert idx.resolve("Art. 41 Abs. 1 CO") == ["Art. 41 Abs. 1 OR"]  # the LLM's strings too
    assert idx.resolve_text("Orion LLC and the CO2 levy, Art. 5 DEBA") == []  # no article cited with an alias of the corpus
    assert CitationIndex(["Art. 267a OR"]).resolve_text("Art. 267a CO") == []  # without aliases


@pytest.mark.parametrize("text, expected", [
    ("Art. 8 und 9 ZGB", ["Art. 8 ZGB", "Art. 9 ZGB"]),
    ("(Art. 484, 562 ZGB) den Betrag", ["Art. 484 ZGB", "Art. 562 ZGB"]),
    ("Art. 754 und 757 Abs. 1 OR verstossen", ["Art. 754 OR", "Art. 757 Abs. 1 OR"]),
    ("Art. 42 und Art. 44 OR sowie", ["Art. 42 OR", "Art. 44 OR"]),
    ("Art. 154 Abs. 1 und Art. 155 lit. g IPRG", ["Art. 154 Abs. 1 IPRG", "Art. 155 IPRG"]),
    ("Art. 1 und 2 sowie Art. 3 OR", ["Art. 1 OR", "Art. 2 OR", "Art. 3 OR"]),
    ("Art. 8 ZGB und Art. 9 ZGB", ["Art. 8 ZGB", "Art. 9 ZGB"]),
    ("der Masseneinwanderungsartikel, Art. 121 a BV?", ["Art. 121a BV"]),
    ("Art. 959 Abs. 1 und 2 ZGB", ["Art. 959 Abs. 1 ZGB", "Art. 959 Abs. 2 ZGB"]),
    ("nach Art. 5, 2016 hat er", []),  # a number after a comma is no article without a code
    ("Art. 754-761 OR", []),  # a range is not expanded
    ("Art. 42 OR, 2019 entschieden; Art. 8 ZGB", ["Art. 42 OR", "Art. 8 ZGB"]),
    ("Art. 6 Ziff. 1 und 3 lit. c EMRK", ["Art. 6 EMRK"]),  # numbers after Ziff./Satz are not articles
    ("Art. 5 Satz 1 und 2 OR", ["Art. 5 OR"]),
    ("Art. 8 Abs. 1 Satz 2 und 3 ZGB", ["Art. 8 Abs. 1 ZGB"]),
    ("Art. 6 Ziff. 1 und Art. 8 EMRK", ["Art. 6 EMRK", "Art. 8 EMRK"]),
    ("Art. 42 und Art. 3/4 des Vertrags. Später Art. 9 OR.", ["Art. 9 OR"]),  # a broken list joins nothing later
    ("Art. 1" + " " * 5000 + "Abs. 2 OR", ["Art. 1 Abs. 2 OR"]),  # long blank runs (linear since the qualifier fix)
])
def test_article_lists_share_the_code_written_after_them(text, expected):
    assert [e.citation.format() for e in extract(text)] == expected
