"""The corpus's citation lookup: every string an LLM, a question or a regex yields, mapped onto the
corpus's own citation strings by exact lookup after normalisation (or dropped)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from lexrag.citations import (
    Citation,
    LawCitation,
    code_aliases,
    extract,
    normalize_key,
    try_parse,
)
from lexrag.citations import scoring_form as _ws

__all__ = ["CitationIndex"]


class CitationIndex:
    """Maps citations (parsed or loose strings) onto the corpus's own citation strings.

    ``aliases`` maps other names of a code onto it (French and Italian abbreviations, English
    ones: :func:`code_aliases`).  ``resolve`` tries, in order: the exact lookup key; for a bare article whose paragraphs are
    the only corpus keys, all its paragraphs (in corpus order); for a paragraph that is not a key
    but whose bare article is, the article.  Anything else resolves to nothing: unknown strings
    are dropped, never emitted.
    """

    def __init__(self, citations: Iterable[str], aliases: Mapping[str, str] | None = None):
        self.by_key: dict[str, str] = {}
        self.children: dict[str, list[str]] = {}
        self.codes: set[str] = set()
        for s in citations:
            c = try_parse(s)
            key = c.key() if c is not None else _ws(s)
            if key in self.by_key:
                continue
            self.by_key[key] = s
            if c is not None:
                if isinstance(c, LawCitation):
                    self.codes.add(c.code)
                self.children.setdefault(c.parent().key(), []).append(s)
        self._finish(aliases)

    @classmethod
    def from_parsed(cls, citations: Sequence[str], keys: Sequence[str], parents: Sequence[str], codes: Sequence[str],
                    aliases: Mapping[str, str] | None = None) -> "CitationIndex":
        """The index of corpus strings that were parsed when the corpus was built: per string its
        lookup key, its parent (whose key is the parent string itself) and its law code ('' for
        a decision) -- the same index as ``CitationIndex(citations)`` without parsing millions of
        strings again."""
        self = cls.__new__(cls)
        by_key: dict[str, str] = {}
        children: dict[str, list[str]] = {}
        for s, key, parent_key, code in zip(citations, keys, parents, codes):
            if key in by_key:
                continue
            by_key[key] = s
            kids = children.get(parent_key)
            if kids is None:
                children[parent_key] = [s]
            else:
                kids.append(s)
        self.by_key, self.children = by_key, children
        self.codes = set(codes)
        self.codes.discard("")
        self._finish(aliases)
        return self

    def _finish(self, aliases: Mapping[str, str] | None) -> None:
        # other names of the corpus's codes ("Art. 267a CO" is "Art. 267a OR"), by the one rule
        self.aliases: dict[str, str] = code_aliases((aliases or {}).items(), self.codes)
        # what extraction looks for after "Art. N": the corpus's codes and their aliases
        self.extract_codes: frozenset[str] | None = frozenset(self.codes | self.aliases.keys()) or None

    def canonical(self, c: Citation) -> Citation:
        """``c`` with an alias code replaced by the corpus's code ("Art. 41 CO" -> "Art. 41 OR")."""
        if isinstance(c, LawCitation) and c.code in self.aliases:
            return LawCitation(c.article, self.aliases[c.code], c.paragraph)
        return c

    def __len__(self) -> int:
        return len(self.by_key)

    def __contains__(self, s: object) -> bool:
        return isinstance(s, str) and normalize_key(s) in self.by_key

    def resolve(self, citation: Citation | str) -> list[str]:
        c = try_parse(citation) if isinstance(citation, str) else citation
        if c is None:
            hit = self.by_key.get(_ws(str(citation)))
            return [hit] if hit else []
        c = self.canonical(c)
        key = c.key()
        if key in self.by_key:
            return [self.by_key[key]]
        if isinstance(c, LawCitation):
            if c.paragraph is None:
                return list(self.children.get(key, []))
            bare = c.parent().key()
            return [self.by_key[bare]] if bare in self.by_key else []
        return []

    def resolve_text(self, text: str) -> list[str]:
        """Corpus strings for every citation mentioned in ``text``, first mention first, deduplicated."""
        out: dict[str, None] = {}
        for e in extract(text, self.extract_codes):
            for s in self.resolve(e.citation):
                out.setdefault(s, None)
        return list(out)
