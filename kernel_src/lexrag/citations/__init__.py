"""Swiss citation strings: parse, normalise, format, extract from free text, map onto corpus keys.

Three kinds occur in the competition corpus and gold:

* law paragraphs: ``Art. 11 Abs. 2 OR``, ``Art. 8 BV``, ``Art. 58d Abs. 5 KVV``, ``Art. 2 ArGV 1``,
  ``Art. 3 Abs. 1 112`` (an SR number as the code);
* leading decisions (BGE): ``BGE 145 II 32 E. 3.1``;
* other decisions (dockets): ``5A_800/2019 E. 2.``, legacy ``1A.187/2001``.

``format(parse(s)) == s`` for every well-formed corpus key (whitespace collapsed).  The
*lookup key* (``Citation.key()``) is a normalised form used only to match strings from queries,
court text or an LLM onto corpus strings: ``lit.``/``Ziff.``/``Satz`` qualifiers are dropped and a
trailing dot of a consideration is ignored.  Output strings always come from
:class:`CitationIndex`, i.e. from the corpus itself, never from ``format`` — with one opt-in
exception: ``count.whole_articles`` adds a law article's ``parent`` string ("Art. 41 OR") after
its paragraphs (``stages.count.with_whole_articles``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Collection, Iterable, Iterator, Union

from lexrag.errors import LexragError

CITATION_KINDS = ("law", "bge", "docket")  # the kinds of citation, as each class names its own

__all__ = [
    "law_codes",
    "code_aliases",
    "ENGLISH_ABBREVIATIONS",
    "LawCitation",
    "BgeCitation",
    "DocketCitation",
    "Citation",
    "CitationParseError",
    "parse",
    "try_parse",
    "normalize_key",
    "normalize_text",
    "parent",
    "extract",
    "Extracted",
]


class CitationParseError(LexragError, ValueError):
    """A string is not a law, BGE or docket citation."""


_ZERO_WIDTH_CHARS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
_ZERO_WIDTH = dict.fromkeys(map(ord, _ZERO_WIDTH_CHARS))


def normalize_text(s: str) -> str:
    """The one text normalisation of queries, corpus text and citations: Unicode NFKC (full-width
    ``Ａｒｔ． ４１`` -> ``Art. 41``, decomposed umlauts composed, no-break spaces -> spaces) and
    zero-width characters and soft hyphens removed."""
    if s.isascii():
        return s
    if not unicodedata.is_normalized("NFKC", s):
        s = unicodedata.normalize("NFKC", s)
    # str.translate walks a non-ASCII string character by character (~1 µs per word); most texts
    # hold none of the six characters, and looking for each is a fast scan
    return s.translate(_ZERO_WIDTH) if any(c in s for c in _ZERO_WIDTH_CHARS) else s


def scoring_form(s: str) -> str:
    """The form the competition compares: stripped, inner whitespace collapsed to one space."""
    return " ".join(s.split())


_ws = scoring_form


@dataclass(frozen=True)
class LawCitation:
    """``Art. <article>[ Abs. <paragraph>] <code>``; code is an abbreviation or an SR number."""

    article: str
    code: str
    paragraph: str | None = None
    kind = "law"

    def format(self) -> str:
        par = f" Abs. {self.paragraph}" if self.paragraph else ""
        return f"Art. {self.article}{par} {self.code}"

    def parent(self) -> "LawCitation":
        return LawCitation(self.article, self.code)

    def key(self) -> str:
        return self.format()


@dataclass(frozen=True)
class BgeCitation:
    """``BGE <volume> <part> <page>[ E. <consideration>]``."""

    volume: int
    part: str
    page: int
    consideration: str | None = None
    kind = "bge"

    def format(self) -> str:
        cons = f" E. {self.consideration}" if self.consideration else ""
        return f"BGE {self.volume} {self.part} {self.page}{cons}"

    def parent(self) -> "BgeCitation":
        return BgeCitation(self.volume, self.part, self.page)

    def key(self) -> str:
        cons = _norm_cons(self.consideration)
        return BgeCitation(self.volume, self.part, self.page, cons).format()


@dataclass(frozen=True)
class DocketCitation:
    """A non-leading decision by docket number, ``5A_800/2019 E. 2.`` or ``1A.187/2001``."""

    docket: str
    consideration: str | None = None
    kind = "docket"

    def format(self) -> str:
        cons = f" E. {self.consideration}" if self.consideration else ""
        return f"{self.docket}{cons}"

    def parent(self) -> "DocketCitation":
        return DocketCitation(self.docket)

    def key(self) -> str:
        return DocketCitation(self.docket, _norm_cons(self.consideration)).format()


Citation = Union[LawCitation, BgeCitation, DocketCitation]


def _norm_cons(cons: str | None) -> str | None:
    if cons is None:
        return None
    cons = cons.rstrip(".")
    return cons or None


# ---------------------------------------------------------------- whole-string parsing

_NUM = r"\d+[a-z]*"
_QUALIFIER = r"(?:\s+(?:lit\.|let\.|Bst\.)\s*[a-z]+\)?|\s+(?:Ziff\.|Satz)\s*\d+[a-z]*)"
_LAW_RE = re.compile(
    rf"^Art\.?\s*(?P<art>{_NUM})(?:\s+Abs\.\s*(?P<par>{_NUM}))?{_QUALIFIER}*\s+(?P<code>\S.*?)\s*$"
)
_PART = r"(?:IV|V|III|II|Ia|Ib|I)"
_BGE_RE = re.compile(
    rf"^(?:BGE|ATF|DTF)\s+(?P<vol>\d{{1,3}})\s+(?P<part>{_PART})\s+(?P<page>\d{{1,4}})"
    r"(?:\s+(?:E\.|consid\.)\s*(?P<cons>[\w.]+(?:/\w+)?))?\s*$"
)
_DOCKET = r"\d{1,2}[A-Z]{1,2}[_.]\d{1,5}/\d{4}"
_DOCKET_RE = re.compile(
    rf"^(?P<docket>{_DOCKET})(?:\s+(?:E\.|consid\.)\s*(?P<cons>[\w.]+(?:/\w+)?))?\s*$"
)


def parse(s: str) -> Citation:
    """Parse one citation string (a corpus key, a gold string or a loosely written mention).

    Raises :class:`CitationParseError` naming the string when it is none of the three kinds.
    """
    text = _ws(normalize_text(s))
    m = _BGE_RE.match(text)
    if m:
        return BgeCitation(int(m["vol"]), m["part"], int(m["page"]), m["cons"])
    m = _DOCKET_RE.match(text)
    if m:
        return DocketCitation(m["docket"], m["cons"])
    m = _LAW_RE.match(text)
    if m:
        return LawCitation(m["art"], m["code"], m["par"])
    raise CitationParseError(f"not a law, BGE or docket citation: {s!r}")


def try_parse(s: str) -> Citation | None:
    try:
        return parse(s)
    except CitationParseError:
        return None


def law_codes(citations: Iterable[str]) -> list[str]:
    """The law codes ``citations`` cite, each once, in order ("Art. 8 ZGB", "Art. 1 Abs. 2 OR" ->
    ZGB, OR); court citations and strings that do not parse are skipped."""
    out: list[str] = []
    for s in citations:
        c = try_parse(s)
        if c is not None and c.kind == "law" and c.code not in out:
            out.append(c.code)
    return out


# The English abbreviations of the Fedlex translations of the major federal acts, for questions
# written in English ("Art. 41 CO", "Art. 221 CrimPC").  French and Italian ones come from the
# competition's abbrev-translations.json at build time (``build_datasets.py --abbreviations``).
ENGLISH_ABBREVIATIONS = {
    "CC": "ZGB", "SCC": "StGB", "CO": "OR", "CPC": "ZPO", "CrimPC": "StPO", "DEBA": "SchKG", "Cst.": "BV",
    "PILA": "IPRG", "APA": "VwVG", "FADP": "DSG", "CartA": "KG", "CopA": "URG", "TmPA": "MSchG", "PatA": "PatG",
    "RTA": "SVG", "FNIA": "AIG", "AsylA": "AsylG", "BankA": "BankG", "FINMASA": "FINMAG", "FinSA": "FIDLEG",
    "FinIA": "FINIG", "AMLA": "GwG", "CISA": "KAG", "MergA": "FusG", "ICA": "VVG", "VATA": "MWSTG",
}
_SR_ALIAS = re.compile(r"[\d.\s]+")


def code_aliases(pairs: Iterable[tuple[str, str]], codes: Collection[str]) -> dict[str, str]:
    """Alias -> code from (alias, code) pairs, kept where the code is one of ``codes``, the alias
    is none of them (a corpus code always means itself), is not an SR number, and names one
    code only (21 French abbreviations of abbrev-translations.json name two ordinances)."""
    codes = set(codes)
    named: dict[str, set[str]] = {}
    for alias, code in pairs:
        alias = " ".join(alias.split())
        if alias and alias != code and code in codes and alias not in codes and not _SR_ALIAS.fullmatch(alias):
            named.setdefault(alias, set()).add(code)
    return {a: next(iter(c)) for a, c in sorted(named.items()) if len(c) == 1}


def normalize_key(s: str) -> str:
    """Lookup key of a citation string; strings that do not parse are keyed by collapsed whitespace."""
    c = try_parse(s)
    return c.key() if c is not None else _ws(s)


def parent(s: str) -> str:
    """Parent of a citation string: the law article without ``Abs.``, the decision without ``E.``."""
    c = try_parse(s)
    return c.parent().format() if c is not None else _ws(s)


# ---------------------------------------------------------------- extraction from free text


@dataclass(frozen=True)
class Extracted:
    citation: Citation
    start: int
    end: int


# "Art. 121 a BV": a letter suffix written apart counts when a paragraph or a code follows
_ART_ANCHOR = re.compile(
    r"\b(?:Art(?:ikel|icle)?\.?|art\.)\s*(?P<art>\d+(?:[a-z]+|\s[a-z](?=\s+(?:Abs\.|Absatz|[A-ZÄÖÜ])))?)\b(?![/.]\d)")
_LIST_SEP = r"\s*(?:,|;|und|sowie|bzw\.|oder|and|or|et|e)\s*"
_NEXT_NUM = re.compile(_LIST_SEP + r"(?P<art>\d+[a-z]*)\b(?![/.\-–]\d)")  # "Art. 8 und 9 ZGB" (not a range "754-761")
_NEXT_ANCHOR = re.compile(_LIST_SEP + r"(?=(?:Art(?:ikel|icle)?\.?|art\.)\s*\d)")  # "Art. 42 und Art. 44 OR"
_NUM_LIST = r"(?:\s*(?:,|und|and|u\.|bzw\.|et|e|or|oder)\s*\d+[a-z]*(?![\d.]))*"  # "1 und 2", "1, 3"
_QUAL_RE = re.compile(  # "\s*(?:,\s*)?" rather than "\s*,?\s*": no quadratic backtracking over long blank runs
    r"""\s*(?:,\s*)?(?:
      (?P<abs>(?:Abs\.|Absatz|al\.|para\.?|paragraph|cpv\.)\s*
          (?P<absnums>\d+[a-z]*""" + _NUM_LIST + r"""))
    | (?P<lit>(?:lit\.|let\.|Bst\.|litera|letter)\s*[a-z]\)?
          (?:\s*(?:,|und|and|u\.|bzw\.|or|oder)\s*[a-z]\)?(?![\w]))*)
    | (?P<ziff>(?:Ziff\.|Ziffer|ch\.|no\.|Nr\.)\s*\d+[a-z]*""" + _NUM_LIST + r""")
    | (?P<satz>(?:Satz|sentence|phrase)\s*\d+""" + _NUM_LIST + r""")
    | (?P<ff>ff?\.)
    )""",
    re.X,
)
_GENERIC_CODE = r"[A-ZÄÖÜ][A-Za-zÄÖÜäöü]*[A-ZÄÖÜ][A-Za-zÄÖÜäöü]*(?:-[A-Za-zÄÖÜäöü]+)*"
_BGE_TEXT = re.compile(
    rf"\b(?:BGE|ATF|DTF)\s+(?P<vol>\d{{1,3}})\s+(?P<part>{_PART})\s+(?P<page>\d{{1,4}})\b"
    r"(?:\s*(?:E\.|consid\.|Erw\.)\s*(?P<cons>\d+[a-z]?(?:\.\d+[a-z]?)*(?:/[a-z]{1,3})?))?"
)
_BGE_CHAIN = re.compile(
    r"\s*[,;]\s*(?P<page>\d{1,4})\s+(?:E\.|consid\.)\s*(?P<cons>\d+[a-z]?(?:\.\d+[a-z]?)*)"
)
_DOCKET_TEXT = re.compile(
    rf"(?<![\w/])(?P<docket>{_DOCKET})\b"
    r"(?:\s*(?:E\.|consid\.)\s*(?P<cons>\d+[a-z]?(?:\.\d+[a-z]?)*\.?(?!\d)))?"
)
_SPLIT_NUMS = re.compile(r"\d+[a-z]*")


@functools.lru_cache(maxsize=8)
def _code_regex(codes: frozenset[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(c) for c in sorted(codes, key=len, reverse=True))
    return re.compile(rf"\s*(?P<code>{alts})(?![\w\-+])")


_GENERIC_CODE_RE = re.compile(rf"\s*(?P<code>{_GENERIC_CODE})(?![\w\-+])")


def _starts(text: str, literals: tuple[str, ...]) -> list[int]:
    """Every position where one of ``literals`` begins in ``text``, ascending."""
    out: list[int] = []
    for lit in literals:
        i = text.find(lit)
        while i >= 0:
            out.append(i)
            i = text.find(lit, i + 1)
    if len(literals) > 1:
        out.sort()
    return out


def _docket_starts(text: str) -> list[int]:
    """Where a docket number (``5A_800/2019``) can begin: 4 to 10 characters before a slash."""
    out: list[int] = []
    i = text.find("/")
    while i >= 0:
        out.extend(range(max(i - 10, out[-1] + 1 if out else 0), i - 3))
        i = text.find("/", i + 1)
    return out


def _finditer(pattern: re.Pattern[str], text: str, starts: Iterable[int]) -> Iterator[re.Match[str]]:
    """What ``pattern.finditer(text)`` yields when every match begins at one of the ascending
    ``starts`` (none matches empty): the pattern is tried there only, not at every character,
    which is what makes extraction over millions of court texts fast (``str.find`` scans in C)."""
    pos = 0
    for s in starts:
        if s >= pos and (m := pattern.match(text, s)):
            yield m
            pos = m.end()


def _qualifiers(text: str, pos: int) -> tuple[list[str], int]:
    """Paragraph numbers of the qualifiers (``Abs. 1 und 2``, ``lit. a``, ``Ziff. 3``) from ``pos`` on."""
    paragraphs: list[str] = []
    while True:
        q = _QUAL_RE.match(text, pos)
        if not q or q.end() == pos:
            return paragraphs, pos
        if q["absnums"]:
            paragraphs.extend(_SPLIT_NUMS.findall(q["absnums"]))
        pos = q.end()


def _extract_law(text: str, codes: frozenset[str] | None) -> Iterator[Extracted]:
    """Law citations; an article list shares the code written after its last member ("Art. 8 und
    9 ZGB", "Art. 484, 562 ZGB", "Art. 42 und Art. 44 OR")."""
    code_re = _code_regex(codes) if codes else _GENERIC_CODE_RE
    pending: list[tuple[str, list[str], int]] = []  # earlier members of a list still waiting for its code
    expected = -1  # where the list's next "Art." must start for the pending members to join it
    for m in _finditer(_ART_ANCHOR, text, _starts(text, ("Art", "art."))):
        if m.start() != expected:
            pending = []
        paragraphs, pos = _qualifiers(text, m.end())
        group = [(m["art"].replace(" ", ""), paragraphs, m.start())]
        while n := _NEXT_NUM.match(text, pos):
            paragraphs, pos = _qualifiers(text, n.end())
            group.append((n["art"], paragraphs, m.start()))
        c = code_re.match(text, pos)
        if not c:
            nxt = _NEXT_ANCHOR.match(text, pos)
            pending, expected = (pending + group, nxt.end()) if nxt else ([], -1)
            continue
        for art, pars, start in pending + group:
            for par in pars or [None]:
                yield Extracted(LawCitation(art, c["code"], par), start, c.end())
        pending = []


def _extract_bge(text: str) -> Iterator[Extracted]:
    for m in _finditer(_BGE_TEXT, text, _starts(text, ("BGE", "ATF", "DTF"))):
        vol, part = int(m["vol"]), m["part"]
        yield Extracted(BgeCitation(vol, part, int(m["page"]), m["cons"]), m.start(), m.end())
        pos = m.end()
        while True:
            ch = _BGE_CHAIN.match(text, pos)
            if not ch:
                break
            yield Extracted(BgeCitation(vol, part, int(ch["page"]), ch["cons"]), ch.start(), ch.end())
            pos = ch.end()


def _extract_docket(text: str) -> Iterator[Extracted]:
    for m in _finditer(_DOCKET_TEXT, text, _docket_starts(text)):
        yield Extracted(DocketCitation(m["docket"], _norm_cons(m["cons"])), m.start(), m.end())


def extract(text: str, codes: Collection[str] | None = None) -> list[Extracted]:
    """Find law, BGE and docket citations in German court text or an English/German query.

    ``codes`` restricts law codes to known abbreviations (e.g. ``CitationIndex.codes``), which
    is what lets codes with spaces (``GebV SchKG``) and SR numbers match; without it a generic
    abbreviation pattern (two or more capitals, ``SchKG``, ``StPO``) is used.  Paragraph lists
    (``Abs. 1 und 2``) yield one citation per paragraph; ``lit.``/``Ziff.`` are dropped; BGE
    chains (``BGE 148 IV 356 E. 2.1, 39 E. 2.3.5``) yield each decision.  Results are in text
    order, duplicates kept.
    """
    text = normalize_text(text)  # positions refer to the normalised text (callers normalise the same way)
    frozen = frozenset(codes) if codes else None
    found = [*_extract_law(text, frozen), *_extract_bge(text), *_extract_docket(text)]
    found.sort(key=lambda e: (e.start, e.end))
    return found
