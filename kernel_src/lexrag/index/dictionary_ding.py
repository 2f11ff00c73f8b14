"""Ding's text format (Debian's ``trans-de-en``): lines ``German | German :: English | English``,
each side's ``|``-separated parts aligned, ``;`` between synonyms, read as (English key, German
sense) pairs (:mod:`lexrag.index.dictionary_format` says what a pair is)."""

from __future__ import annotations

from typing import Iterable, Iterator

from lexrag.index.dictionary_format import LEGAL, MAX_PAIRS, MAX_PHRASE, Sense, clean, english_key, sense_flags, unfit

__all__ = ["parse_ding"]


def _synonyms(part: str) -> list[str]:
    """A part's ``;``-separated synonyms; a ``;`` inside braces, brackets or parentheses (Ding's
    ``{shrove; shriven}``, ``{prp; +Akk.}``) separates nothing."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(part):
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth = max(0, depth - 1)
        elif c == ";" and depth == 0 and part.startswith("; ", i):
            out.append(part[start:i])
            start = i + 2
    return out + [part[start:]]


def parse_ding(lines: Iterable[str], skipped: dict | None = None) -> Iterator[tuple[str, Sense]]:
    """(English key, German sense) pairs of a Ding text file: each ``|``-separated part of a line's
    English side with the synonyms of the German part it is aligned with.  A subject or region
    tag on the German synonym, or on the line's first part, applies."""
    def skip(what: str) -> None:
        if skipped is not None:
            skipped[what] = skipped.get(what, 0) + 1

    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        if line.count(" :: ") != 1:  # no German :: English split, or a third side: not a Ding line (counted)
            skip("lines without one ' :: ' between German and English")
            continue
        de_side, en_side = line.rstrip("\n").split(" :: ", 1)
        de_parts, en_parts = de_side.split(" | "), en_side.split(" | ")
        if len(de_parts) != len(en_parts):  # misaligned line: its parts cannot be paired (counted)
            skip("misaligned lines")
            continue
        line_flags = sense_flags(de_parts[0]) & LEGAL | sense_flags(en_parts[0]) & LEGAL
        for de, en in zip(de_parts, en_parts):
            de_syns, en_syns = _synonyms(de), _synonyms(en)
            if len(de_syns) * len(en_syns) > MAX_PAIRS:  # the pairs of a part grow as its synonyms squared: bounded
                skip(f"parts with more than {MAX_PAIRS:,} German x English synonyms")
                continue
            senses = []
            for syn in de_syns:
                german = clean(syn)
                if german and (why := unfit(german)):
                    skip(why)
                elif german and len(german.split()) <= MAX_PHRASE:
                    flags = sense_flags(syn) | line_flags | (sense_flags(en) & LEGAL)
                    senses.append(Sense(german.replace("ß", "ss"), flags))
            for syn in en_syns:
                key = english_key(syn)
                if key and (why := unfit(key)):
                    skip(why)
                elif key and len(key.split()) <= MAX_PHRASE:
                    for s in senses:
                        yield key, s
