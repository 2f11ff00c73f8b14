"""Which law codes a question is about: the codes and statute names it mentions, the codes its
best BM25 hits agree on, and the codes a model of the training questions predicts.

Statute detection (:class:`StatuteDetector`): a question names its statute by an abbreviation
such as ``OR`` or ``StPO``, or by a statute's name such as "Strafprozessordnung" taken from the law
titles of the corpus (English names of the acts too).  Named codes come from the corpus alone
(codes and titles); with ``statutes.learned`` the codes a tf-idf model of the training questions
predicts are added after them (:func:`statute_codes`; the prior artifact holds the questions).

Agreed codes (:func:`agreed_codes`): the named codes and those the statute vote and the learned
model agree on.  Statute vote (:meth:`StatuteDetector.rescore`, used by the lexical stage): the
codes the question's best BM25 hits agree on, with no named statute and no training gold.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field

import numpy as np

from lexrag import citations as cit
from lexrag.ranking import best_first_order

__all__ = ["StatuteDetector", "detector_for", "statute_codes", "predicted_codes", "agreed_codes", "KNOWN_NAMES", "ENGLISH_NAMES"]

_NAME = re.compile(r"\b[A-ZÄÖÜ][a-zäöüß]{3,}(?:gesetzbuch|gesetz|recht|ordnung|buch|vertrag|konvention|abkommen|verfassung)\b")
_PAREN = re.compile(r"\(([^()]*)\)")
_WORD = re.compile(r"[^\W\d_]+")
_SR_NUMBER = re.compile(r"\d[\d.]*")  # a law keyed by its SR number ("Art. 3 831.131.11") has no abbreviation


@dataclass
class StatuteDetector:
    codes: list[str]  # per document: its law code ("" for court documents)
    abbreviations: frozenset[str]  # codes written with letters (OR, ZGB, StPO, BankG...)
    names: dict[str, str]  # statute name word (lower case) -> code, names that point to one code only
    aliases: dict[str, str] = field(default_factory=dict)  # other abbreviations of the codes ("LAI" -> IVG), read in citations only
    phrases: dict[str, str] = field(default_factory=dict)  # English names of acts the corpus holds ("civil code" -> ZGB)
    _code_ids: np.ndarray | None = None
    _code_index: dict | None = None
    _numbered: np.ndarray | None = None  # per code id: keyed by an SR number
    _voting: np.ndarray | None = None  # per code id: a law code (court documents have none)
    _names: list[str] | None = None  # code id -> code

    @classmethod
    def from_corpus(cls, corpus, titles: list[str] | None = None) -> "StatuteDetector":
        codes: list[str] = []
        for c in corpus.citations:
            p = cit.try_parse(c)
            codes.append(p.code if p is not None and p.kind == "law" else "")
        abbreviations = frozenset(c for c in set(codes) if len(c) >= 2 and re.fullmatch(r"[A-Za-zÄÖÜäöü]+", c)
                                  and any(ch.isupper() for ch in c))
        # a statute's name word points to the code whose title is shortest among the titles holding
        # it ("Schweizerische Strafprozessordnung", not "Verordnung über ... der Strafprozessordnung")
        # (a name in the title's parentheses, "(Zivilprozessordnung, ZPO)", is the statute's own name)
        owners: dict[str, dict[str, int]] = {}
        for code, title in set(zip(codes, titles or [])):
            if code and title:
                n = len(re.sub(r"vom \d+\. \w+ \d{4}", "", title).split())
                inside = " ".join(_PAREN.findall(title))
                for w in set(_NAME.findall(title)):
                    best = owners.setdefault(w.lower(), {})
                    best[code] = min(best.get(code, n), 0 if w in inside else n)
        present = set(codes)
        names = {w: c for w, c in KNOWN_NAMES.items() if c in present}
        for w, by_code in owners.items():
            ranked = sorted(by_code.items(), key=lambda t: (t[1], t[0]))
            if ranked[0][1] <= 6 and (len(ranked) == 1 or ranked[1][1] > ranked[0][1]):
                names[w] = ranked[0][0]
        phrases = {n: c for n, c in ENGLISH_NAMES.items() if c in present}
        return cls(codes, abbreviations, names, dict(corpus.index.aliases), phrases)

    def __post_init__(self) -> None:
        self._alias_codes = frozenset(self.aliases)  # what extraction looks for, built once

    def detect(self, text: str, max_codes: int = 3) -> list[str]:
        """Codes the text names, in the order it names them: by abbreviation or statute name
        (German, or the English name of a major act: "the Civil Code") anywhere, by another
        language's abbreviation where an article is cited with it ("Art. 17 LAI": IVG; a bare
        "LLC" is a company, not the Spielbankengesetz's SpG)."""
        text = cit.normalize_text(text)
        named: list[tuple[int, str]] = []
        for m in _WORD.finditer(text):
            w = m.group()
            code = w if w in self.abbreviations else self.names.get(w.lower())
            if code:
                named.append((m.start(), code))
        if self.phrases:
            named += [(m.start(), self.phrases[m.group()]) for m in _ENGLISH_NAME.finditer(text.lower()) if m.group() in self.phrases]
        if self._alias_codes:
            named += [(e.start, self.aliases[e.citation.code]) for e in cit.extract(text, self._alias_codes)
                      if e.citation.kind == "law" and e.citation.code in self.aliases]
        found: list[str] = []
        for _, code in sorted(named, key=lambda t: t[0]):
            if code not in found:
                found.append(code)
                if len(found) >= max_codes:
                    break
        return found

    def _ids(self) -> np.ndarray:
        """Per document the integer id of its code (built once: this runs per query over every document)."""
        if self._code_ids is None:
            self._code_index = {c: i for i, c in enumerate(sorted(set(self.codes)))}
            self._code_ids = np.fromiter((self._code_index[c] for c in self.codes), dtype=np.int32, count=len(self.codes))
            self._names = sorted(self._code_index, key=self._code_index.__getitem__)
            self._numbered = np.array([bool(_SR_NUMBER.fullmatch(c)) for c in self._names], dtype=bool)
            self._voting = np.array([c != "" for c in self._names], dtype=bool)
        return self._code_ids

    def mask(self, codes: list[str]) -> np.ndarray:
        """Documents of ``codes`` (one vectorised lookup)."""
        ids = self._ids()
        want = [self._code_index[c] for c in codes if c in self._code_index]
        return np.isin(ids, want)

    def rescore(self, scores: np.ndarray, vote: float, depth: int, numbered_weight: float) -> np.ndarray:
        """BM25 scores reshaped by law code, with no training data.

        Statute vote: the best ``depth`` law paragraphs vote for their law code with their scores;
        each law paragraph's score is multiplied by ``(1 + vote * share) / (1 + vote)`` where
        ``share`` is its code's vote over the best code's: 1 for the code the top hits agree on,
        ``1 / (1 + vote)`` for a code none of them holds.  A case story rarely names its statute,
        but its best BM25 hits cluster in it, and stray hits in unrelated ordinances fall behind
        the statute's other paragraphs.  No score rises, so court documents (which neither vote
        nor are damped) keep their place against the agreed code.  Paragraphs of laws keyed by
        an SR number (laws without an abbreviation: minor ordinances, intercantonal agreements)
        are multiplied by ``numbered_weight``; no gold citation in lexam_dev, train_dev or val
        cites one.
        """
        ids = self._ids()
        out = np.asarray(scores, dtype=np.float32)
        factor = np.ones(len(self._code_index), dtype=np.float32)
        if vote > 0 and depth > 0:
            share = self._shares(out, depth)
            law = self._voting
            factor[law] = (1 + vote * share[law]) / (1 + vote)
        if numbered_weight != 1.0:
            factor[self._numbered] *= np.float32(numbered_weight)
        return out * factor[ids]

    def _votes(self, scores: np.ndarray, depth: int) -> np.ndarray:
        """Per code id the summed scores of the best ``depth`` law paragraphs (court documents
        neither vote nor take a place among the voters, however many rank above them)."""
        ids = self._ids()
        law_scores = np.where(self._voting[ids], scores, 0)
        k = min(depth, len(scores))
        top = np.argpartition(-law_scores, k - 1)[:k]
        top = top[law_scores[top] > 0]
        v = np.zeros(len(self._code_index), dtype=np.float64)
        np.add.at(v, ids[top], np.asarray(scores, dtype=np.float64)[top])
        return v

    def _shares(self, scores: np.ndarray, depth: int) -> np.ndarray:
        """Per code id its vote over the best code's (1 for the best; all 0 when nothing voted)."""
        v = self._votes(scores, depth)
        best = v.max()
        return v / best if best > 0 else v

    def vote_shares(self, scores: np.ndarray, depth: int) -> dict[str, float]:
        """The codes the best ``depth`` law paragraphs vote for, each with its vote over the best code's."""
        share = self._shares(np.asarray(scores, dtype=np.float32), depth)
        return {self._names[i]: float(share[i]) for i in np.flatnonzero(share)}

    def voted(self, scores: np.ndarray, depth: int, k: int) -> list[str]:
        """The ``k`` codes the best ``depth`` law paragraphs vote for most (the statute vote's
        choice, reported beside the named and learned codes by ``scripts/quality.py``)."""
        v = self._votes(np.asarray(scores, dtype=np.float32), depth)
        order = best_first_order(np.arange(len(v)), v)[:k]
        return [self._names[i] for i in order if v[i] > 0]


LEARNED_DEPTH = 20  # the learned model's codes the agreement reads (as measured)
LEARNED_CODES = 2  # codes the learned model adds to the named ones in bm25_statute, at most
VOTE_DEPTH = 100  # law paragraphs whose BM25 scores vote for their codes in the agreement


def predicted_codes(det: StatuteDetector, text: str, sc, prior=None,
                    query_id: str | None = None) -> tuple[list[str], list[tuple[str, float]]]:
    """What both statute signals start from, computed once per question: the codes ``text`` names
    (at most ``sc.max_codes``, in the order it names them) and, with ``sc.learned`` and a prior,
    the statute model's best codes with their similarities (best first; empty otherwise)."""
    named = det.detect(text, sc.max_codes)
    learned = (prior.scored_codes(text, max(LEARNED_DEPTH, LEARNED_CODES), query_id)
               if sc.learned and prior is not None else [])
    return named, learned


def statute_codes(det: StatuteDetector, text: str, sc, prior=None, query_id: str | None = None,
                  predicted: tuple | None = None) -> list[str]:
    """The codes the statute stage restricts BM25 to: those ``text`` names (at most
    ``sc.max_codes``, in the order it names them), then, with ``sc.learned`` and a prior, up to
    ``LEARNED_CODES`` the statute model of the training questions predicts.  ``predicted``:
    :func:`predicted_codes` of this question, when the caller has it."""
    named, learned = predicted or predicted_codes(det, text, sc, prior, query_id)
    codes = list(named)
    for c, _ in learned[:LEARNED_CODES]:
        if c not in codes and len(codes) < sc.max_codes:
            codes.append(c)
    return codes


def agreed_codes(det: StatuteDetector, text: str, sc, prior=None, query_id: str | None = None,
                 scores: np.ndarray | None = None, predicted: tuple | None = None) -> list[str]:
    """The codes the question is surely about: those it names (at most ``sc.max_codes``), then the
    codes two independent predictors agree on.  Each predictor scores a code against its own best
    code (so 1 for its best): the learned model of the training questions (with ``sc.learned``
    and a prior) by its cosine similarity, the statute vote by the summed BM25 ``scores`` of the
    code's paragraphs among the best ``VOTE_DEPTH`` law paragraphs.  A code whose two scores
    sum to ``sc.agree`` or more is agreed, best first.  The agreement is what makes a guess safe
    to lean on: on lexam_dev (courses held out) 65% of the agreed codes are gold codes, against
    25% of the named-then-learned codes of ``bm25_statute`` (``scripts/quality.py``, README
    "Quality on real data").  Without the learned model only the named codes are agreed.
    ``predicted``: :func:`predicted_codes` of this question, when the caller has it."""
    if sc.agree <= 0:
        return []
    named, learned = predicted or predicted_codes(det, text, sc, prior, query_id)
    codes = list(named)
    if not (sc.learned and prior is not None) or scores is None:
        return codes
    score = det.vote_shares(scores, VOTE_DEPTH)
    learned = learned[:LEARNED_DEPTH]
    for c, s in learned:
        score[c] = score.get(c, 0.0) + s / learned[0][1]
    for c, s in sorted(score.items(), key=lambda t: (-t[1], t[0])):
        if s < sc.agree:
            break
        if c not in codes:
            codes.append(c)
    return codes


# Names of the major federal acts whose law text (and so title) a local corpus may lack: the
# statute names every Swiss lawyer uses, mapped to their official abbreviations (used only when
# the corpus holds that code).
KNOWN_NAMES = {
    "strafprozessordnung": "StPO", "bundesverfassung": "BV", "mehrwertsteuergesetz": "MWSTG",
    "jugendstrafprozessordnung": "JStPO", "verwaltungsverfahrensgesetz": "VwVG", "datenschutzgesetz": "DSG",
    "kartellgesetz": "KG", "urheberrechtsgesetz": "URG", "markenschutzgesetz": "MSchG", "patentgesetz": "PatG",
    "versicherungsvertragsgesetz": "VVG", "strassenverkehrsgesetz": "SVG", "betäubungsmittelgesetz": "BetmG",
    "asylgesetz": "AsylG", "bankengesetz": "BankG", "finanzmarktaufsichtsgesetz": "FINMAG",
    "finanzdienstleistungsgesetz": "FIDLEG", "verwaltungsgerichtsgesetz": "VGG", "bundesgerichtsgesetz": "BGG",
    "menschenrechtskonvention": "EMRK", "zivilprozessordnung": "ZPO", "strafgesetzbuch": "StGB",
    "zivilgesetzbuch": "ZGB", "obligationenrecht": "OR", "fusionsgesetz": "FusG", "arbeitsgesetz": "ArG",
}

# The English names of the major federal acts (the Fedlex translations' titles and short titles),
# for questions written in English; longest first, so "military criminal code" is not StGB's.
ENGLISH_NAMES = {
    "civil code": "ZGB", "code of obligations": "OR", "criminal code": "StGB", "military criminal code": "MStG",
    "criminal procedure code": "StPO", "code of criminal procedure": "StPO", "civil procedure code": "ZPO",
    "code of civil procedure": "ZPO", "federal constitution": "BV", "debt enforcement and bankruptcy act": "SchKG",
    "private international law act": "IPRG", "road traffic act": "SVG", "data protection act": "DSG",
    "supreme court act": "BGG", "foreign nationals and integration act": "AIG", "asylum act": "AsylG",
    "banking act": "BankG", "copyright act": "URG", "cartel act": "KG", "administrative procedure act": "VwVG",
    "unfair competition act": "UWG", "product liability act": "PrHG", "insurance contract act": "VVG",
    "accident insurance act": "UVG", "invalidity insurance act": "IVG", "health insurance act": "KVG",
    "unemployment insurance act": "AVIG", "narcotics act": "BetmG", "gender equality act": "GlG",
    "consumer credit act": "KKG", "mergers act": "FusG", "financial services act": "FIDLEG", "patents act": "PatG",
    "trade mark protection act": "MSchG", "anti-money laundering act": "GwG", "value added tax act": "MWSTG",
    "direct federal tax act": "DBG", "financial market supervision act": "FINMAG",
}
_ENGLISH_NAME = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(ENGLISH_NAMES, key=len, reverse=True)) + r")\b")

_DETECTORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def detector_for(corpus) -> StatuteDetector:
    """One detector per loaded corpus (titles read once from the corpus table)."""
    det = _DETECTORS.get(corpus)
    if det is None:
        det = StatuteDetector.from_corpus(corpus, corpus.column("title"))
        _DETECTORS[corpus] = det
    return det
