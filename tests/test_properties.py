"""Property-based tests (hypothesis): the citations module and the CSV reader on arbitrary input."""

from __future__ import annotations

import csv
import io

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lexrag import citations as cit
from lexrag.io.csvio import FileReport, read_csv_rows
from lexrag.errors import CsvInputError

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

num = st.builds(lambda n, s: f"{n}{s}", st.integers(1, 999), st.sampled_from(["", "a", "b", "bis", "ter", "quater"]))
code = st.sampled_from(["OR", "ZGB", "StGB", "StPO", "ZPO", "SchKG", "BGG", "BV", "IPRG", "VwVG"])
cons = st.lists(st.integers(1, 12).map(str), min_size=1, max_size=4).map(".".join)
law = st.builds(cit.LawCitation, num, code, st.one_of(st.none(), num))
bge = st.builds(cit.BgeCitation, st.integers(80, 150), st.sampled_from(["I", "Ia", "Ib", "II", "III", "IV", "V"]),
                st.integers(1, 999), st.one_of(st.none(), cons))
docket = st.builds(cit.DocketCitation,
                   st.builds(lambda a, b, c, d: f"{a}{b}_{c}/{d}", st.integers(1, 9), st.sampled_from(["A", "B", "C", "D", "F"]),
                             st.integers(1, 999), st.integers(2000, 2025)),
                   st.one_of(st.none(), cons.map(lambda c: c + ".")))
citation = st.one_of(law, bge, docket)


@SETTINGS
@given(citation)
def test_format_and_parse_round_trip(c):
    s = c.format()
    assert cit.parse(s).format() == s
    assert cit.parse(s).key() == c.key()


@SETTINGS
@given(citation, st.sampled_from([" ", "  ", "\u00a0", "\u2009"]))
def test_loose_spacing_parses_to_the_same_key(c, space):
    s = c.format().replace(" ", space)
    assert cit.normalize_key(s) == c.key()


@SETTINGS
@given(st.text(max_size=80))
def test_normalisation_is_idempotent(s):
    once = cit.normalize_text(s)
    assert cit.normalize_text(once) == once
    key = cit.normalize_key(s)
    assert cit.normalize_key(key) == key
    assert cit.scoring_form(cit.scoring_form(s)) == cit.scoring_form(s)


@SETTINGS
@given(st.lists(st.one_of(citation.map(lambda c: c.format()), st.text(max_size=30)), max_size=6))
def test_extraction_yields_only_strings_that_parse_and_finds_the_ones_written(parts):
    text = " und ".join(parts)
    found = cit.extract(text)
    for e in found:
        assert cit.try_parse(e.citation.format()) is not None
        assert 0 <= e.start < e.end <= len(cit.normalize_text(text))


# ---------------------------------------------------------------- the CSV reader never loses a row silently


field_text = st.text(alphabet=st.sampled_from(list("ab ,\"\n\r;éü") + ["x"]), max_size=12)


@SETTINGS
@given(st.lists(st.tuples(field_text, field_text), max_size=8))
def test_well_formed_csv_round_trips_exactly(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["query_id", "query"])
    rows = [(f"q{i}", t) for i, (_, t) in enumerate(rows)]  # ids as real files have them
    w.writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8"))
    report = FileReport(file=str(path))
    got = [(r["query_id"], r["query"]) for _, r in read_csv_rows(path, ("query_id", "query"), report)]
    assert got == rows
    assert report.malformed == 0 and report.lines_lost == 0


@SETTINGS
@given(st.binary(max_size=300))
@example(b"\x00" * 40)
def test_any_bytes_give_rows_or_a_reported_problem_never_a_silent_loss(tmp_path_factory, body):
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_bytes(b"query_id,query\n" + body)
    for strict in (True, False):
        report = FileReport(file=str(path))
        try:
            rows = list(read_csv_rows(path, ("query_id", "query"), report, strict=strict))
        except CsvInputError as e:
            if "UTF-16/UTF-32 or binary" in str(e):  # NUL bytes making up a quarter of the file: refused whole, by name
                assert body.count(b"\x00") * 4 > len(body) + 15
                break
            if "NUL bytes fill it from byte" in str(e):  # text, then only NULs (a crash-padded file): refused whole, by name
                assert body.endswith(b"\x00") and b"\x00" not in body.rstrip(b"\x00")
                break
            assert strict and "lines" in str(e)  # only the strict reader raises, and it names the lines
            continue
        # every record is either yielded or counted as malformed; every physical line is accounted for
        assert report.rows_read == len(rows) + report.malformed
        assert report.lines >= 1 + len(rows) or not rows
