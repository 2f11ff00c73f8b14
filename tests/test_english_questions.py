"""The tools that measure English questions: the pseudo-English of German questions
(``scripts/english_proxy.py``) and LEXam's English answers' Swiss citations in the competition's
form (``scripts/lexam_english.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

DING = """# Version :: test
Untersuchungshaft {f} [jur.] :: pre-trial detention
Vertrag {m} [jur.] | Verträge {pl} :: contract | contracts
Kündigung {f} eines Vertrags :: termination of a contract
Gericht {n} | Gerichte {pl} :: court | courts
Arbeit {f} :: work
"""


class _Index:
    """Document frequencies of a stand-in corpus (the translation around them is under test)."""

    analyzer = None

    def __init__(self, dfs: dict[str, int]):
        self.dfs = dfs

    def doc_freq(self, word: str):
        return self.dfs.get(word.lower())


@pytest.fixture
def g2e(tmp_path):
    from english_proxy import GermanToEnglish

    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    return GermanToEnglish(src, _Index({"gemeinde": 500, "verwaltungsgericht": 3}))


def test_pseudo_english_reads_as_english_and_keeps_names_and_citations(g2e):
    from lexrag.index.language import is_english

    text, done, dropped = g2e.translate("Darf das Gericht die Untersuchungshaft nach Art. 221 Abs. 1 StPO für Müller anordnen?")
    words = text.split()
    assert "court" in words and "pre-trial detention" in text and "the" in words  # the article as an English one
    assert text.endswith("Art. 221 Abs. 1 StPO") and "Müller" in words  # the citation kept; a name no law holds stays
    assert "anordnen" in words and dropped == 0  # a word no document holds may be a name: it stays
    assert is_english(text)


def test_a_german_word_without_english_is_dropped_not_leaked(g2e):
    text, done, dropped = g2e.translate("Die Gemeinde und das Gericht.")
    assert "Gemeinde" not in text and dropped == 1  # a word the corpus holds as German never reaches the English
    assert "court" in text.split() and done == 1
    assert "Verträge" not in g2e.translate("die Verträge")[0] and "contracts" in g2e.translate("die Verträge")[0]


def test_lexam_answers_citations_become_competition_keys():
    from lexam_english import swiss_citations

    answer = ("Under Art. 180 para. 1 lit. c PILA the arbitrator may be challenged; see also Article 29 para. 2 Cst and "
              "art. 754 CO, as well as Art. 101 TFEU and again Art. 180 para. 1 PILA.")
    assert swiss_citations(answer) == ["Art. 180 Abs. 1 IPRG", "Art. 29 Abs. 2 BV", "Art. 754 OR"]  # TFEU is no Swiss act
    assert swiss_citations("Art. 29 or Art. 30 Cst apply, and art. 41 co.") == ["Art. 30 BV"]  # "or", "co": words, not acts


def test_a_workbook_without_lexams_columns_is_one_line():
    from lexam_english import as_dicts

    from lexrag.errors import CsvInputError

    with pytest.raises(CsvInputError, match="book.xlsx: no column 'answer' .*give LEXam's data/open_questions"):
        as_dicts("book.xlsx", ["id", "question", "course", "language"], iter([]))
    assert as_dicts("b.xlsx", ["id", "question", "answer", "course", "language"], iter([("1", "Q", None, "C", "en")])) == \
        [{"id": "1", "question": "Q", "answer": "", "course": "C", "language": "en"}]


def test_lexam_english_without_openpyxl_says_what_to_install(monkeypatch, tmp_path):
    import lexam_english

    from lexrag.errors import CsvInputError

    monkeypatch.setitem(sys.modules, "openpyxl", None)  # as where it is not installed
    with pytest.raises(CsvInputError, match="pip install openpyxl"):
        lexam_english.read_xlsx(tmp_path / "open_questions_dev.xlsx")


def test_the_english_scripts_refuse_bad_inputs_in_one_line(tmp_path):
    import subprocess

    from english_proxy import GermanToEnglish
    from lexrag.errors import ArtifactError

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "arts" / "dictionary").mkdir(parents=True)  # what the options check asks of the folder
    ding = tmp_path / "de-en"
    ding.write_text(DING, encoding="utf-8")
    good = tmp_path / "data"
    good.mkdir()
    (good / "val.csv").write_text("query_id,query,gold_citations\nv1,Is the contract void?,Art. 20 OR\n", encoding="utf-8")
    (good / "lexam_dev.csv").write_text("query_id,query,gold_citations,course\nq1,Ist der Vertrag nichtig?,Art. 20 OR,OR AT\n",
                                        encoding="utf-8")
    no_query, no_course = tmp_path / "nq", tmp_path / "nc"
    for d, text in ((no_query, "query_id,frage,gold_citations,course\nq1,Vertrag?,Art. 20 OR,OR AT\n"),
                    (no_course, "query_id,query,gold_citations\nq1,Vertrag?,Art. 20 OR\n")):
        d.mkdir()
        (d / "val.csv").write_text((good / "val.csv").read_text(encoding="utf-8"), encoding="utf-8")
        (d / "lexam_dev.csv").write_text(text, encoding="utf-8")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    base = [sys.executable, str(root / "scripts" / "experiment_english.py"), "--artifacts", str(tmp_path / "arts"),
            "--dictionary", str(ding)]
    for args, said in ((["--data", str(tmp_path / "nodata"), "--work", str(tmp_path / "w")], "lexam_dev.csv: file not found"),
                       (["--data", str(no_query), "--work", str(tmp_path / "w")], "missing column(s) query"),
                       (["--data", str(no_course), "--work", str(tmp_path / "w")], "a course is missing"),
                       (["--data", str(good), "--work", str(tmp_path / "afile")], "a file, not a folder"),
                       (["--data", str(good), "--work", str(tmp_path / "w"), "--english", str(tmp_path / "nope.csv")],
                        "nope.csv: file not found")):
        r = subprocess.run(base + args, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-500:])
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)))
    with pytest.raises(ArtifactError, match="not UTF-8 text"):
        GermanToEnglish(garbage)
    comments = tmp_path / "comments"
    comments.write_text("# Version :: x\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="no German-English pairs"):
        GermanToEnglish(comments)
    csv_in = tmp_path / "lexam.csv"
    csv_in.write_text("id,question\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(root / "scripts" / "lexam_english.py"), str(csv_in), "--out", str(tmp_path / "o.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr[-500:]


def test_the_coverage_counts_own_entries_bases_and_words_left_without_german(tmp_path):
    import subprocess

    from lexrag.index.dictionary import build_dictionary

    src = tmp_path / "de-en"
    src.write_text(DING, encoding="utf-8")
    build_dictionary(src, tmp_path / "dictionary")
    q = tmp_path / "q.csv"
    q.write_text("query_id,query\nq1,The court's ruling on the contracts of Müller under Art. 20 OR\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "scripts" / "english_coverage.py"),
                        "--dictionary", str(tmp_path / "dictionary"), str(q)], capture_output=True, text=True, timeout=300)
    # court's (by its base), ruling, contracts (own), müller; the citation and the function words are not counted
    assert r.returncode == 0, r.stderr[-500:]
    assert "4 words; 1 with an entry (25.0%), 1 more by their base (25.0%); without German: ruling, müller" in r.stdout
