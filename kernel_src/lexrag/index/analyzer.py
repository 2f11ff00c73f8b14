"""The paper's German analyzer: lowercase, split on non-alphanumerics, drop 86 German stopwords,
drop 1-character tokens, Snowball German stemming (PyStemmer); optionally split compounds."""

from __future__ import annotations

import re
from typing import Iterable

from lexrag.citations import normalize_text
from lexrag.index.decompound import Decompounder

__all__ = ["GERMAN_STOPWORDS", "ENGLISH_STOPWORDS", "Analyzer"]

# 86 German stopwords: the 86 words of the Snowball German stopword list that occur most often
# in laws_de.csv (counted once over the 114,886 paragraphs in ../shared/data), so the list
# removes what is frequent in this corpus rather than what is frequent in general German.
GERMAN_STOPWORDS = frozenset(
    """
    die der und oder des den in für von nach das werden zu mit im ist dem auf eine sind sie nicht
    über kann einer zur bei wird ein an so vom wenn als sich aus durch hat einem es können eines
    dass diese zum er einen muss dieser vor bis nur unter am haben um auch ihre ihrer keine dieses
    anderen alle wie gegen ohne sein während andere welche diesem dies zwischen ihr noch ob seiner
    ihren ihm ihnen dessen seine jede waren diesen jeder
    """.split()
)

# English function words: the English BM25 index of the laws' English texts drops them (and the
# dictionary's language guess counts them)
ENGLISH_STOPWORDS = frozenset(
    """
    a an the of to in on at by for with from and or as is are was were be been being that this these those
    it its his her their our your my he she they we you i which who whom whose what when where whether if
    than then so such not no do does did has have had can could may might must shall should will would
    there here any some all each every other into under over about after before between
    """.split()
)

_TOKEN = re.compile(r"[^\W_]+")


class Analyzer:
    """Text -> list of stemmed tokens.  With a :class:`~lexrag.index.decompound.Decompounder`, a
    compound is followed by the stems of its parts.  Expansions are cached per surface form (the
    hot path)."""

    def __init__(self, stemmer: str = "german", min_token_len: int = 2, stopwords: Iterable[str] | None = None,
                 decompounder: Decompounder | None = None):
        self.language = stemmer
        self.min_token_len = min_token_len
        if stopwords is None:  # the stemmer's language's: English for the English law texts, else German
            stopwords = ENGLISH_STOPWORDS if stemmer == "english" else GERMAN_STOPWORDS
        self.stopwords = frozenset(stopwords)
        self.decompounder = decompounder
        self._cache: dict[str, tuple[str, ...]] = {}
        if stemmer:
            import Stemmer  # PyStemmer; a hard dependency of the lexical stage

            self._stemmer = Stemmer.Stemmer(stemmer)
            # for stems(): the words a query stems whole are mostly new, and PyStemmer's own cache, once
            # full, purges itself again and again as they come, which costs more than stemming afresh
            self._stemmer_uncached = Stemmer.Stemmer(stemmer)
            self._stemmer_uncached.maxCacheSize = 0
        else:
            self._stemmer = self._stemmer_uncached = None

    def params(self) -> dict:
        return {
            "stemmer": self.language,
            "min_token_len": self.min_token_len,
            "stopwords": len(self.stopwords),
            "token_pattern": _TOKEN.pattern,
            "unicode": "NFKC, zero-width removed",
        }

    def surface(self, text: str) -> list[str]:
        """The lowercase words of ``text`` long enough to keep, stopwords included."""
        return [t for t in _TOKEN.findall(normalize_text(text).lower()) if len(t) >= self.min_token_len]

    def stems(self, words: list[str]) -> list[str]:
        """The stem of each word taken whole: no compound split, no stopword dropped."""
        return self._stemmer_uncached.stemWords(words) if self._stemmer is not None else list(words)

    def whole(self, text: str) -> list[str]:
        """The stems of ``text``'s words taken whole: stopwords dropped, no compound split."""
        return self.stems([t for t in self.surface(text) if t not in self.stopwords])

    def expand(self, word: str) -> tuple[str, ...]:
        """What one surface word puts in the index: nothing for a stopword, else its stem, then the
        stems of its compound parts (stopwords among them dropped)."""
        got = self._cache.get(word)
        if got is None:
            if word in self.stopwords:
                got = ()
            else:
                words = [word]
                if self.decompounder is not None:
                    words += [p for p in self.decompounder.split(word) if p not in self.stopwords and len(p) >= self.min_token_len]
                got = tuple(self._stemmer.stemWords(words)) if self._stemmer is not None else tuple(words)
            if len(self._cache) > 2_000_000:
                self._cache.clear()
            self._cache[word] = got
        return got

    def __call__(self, text: str) -> list[str]:
        return [s for t in self.surface(text) for s in self.expand(t)]

    def clear_cache(self) -> None:
        self._cache.clear()
        if self.decompounder is not None:
            self.decompounder.clear_cache()
