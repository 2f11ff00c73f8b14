"""What the two dictionary formats lexrag reads share (Ding's text format,
:mod:`lexrag.index.dictionary_ding`; FreeDict's dictd format, :mod:`lexrag.index.dictionary_dictd`):
the (English key, German sense) pair each yields, the flags of a sense, the bounds that keep the
reading of any file linear in its size, and how a synonym is cleaned and checked before it is kept."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_PHRASE", "LEGAL", "SWISS", "OTHER_REGION", "MAX_LINE", "MAX_PAIRS", "MAX_ENTRY", "MAX_DATA", "CHUNK", "HINT",
           "Sense", "clean", "sense_flags", "unfit", "english_key"]

MAX_PHRASE = 4  # English words in the longest key looked up
LEGAL, SWISS, OTHER_REGION = 1, 2, 4  # flags of a sense
# Bounds that keep the reading of any file linear in its size (each far above what the real files hold)
MAX_LINE = 1 << 16  # bytes of a Ding or dictd index line; a longer one is left out (Ding's longest: 9,539)
MAX_PAIRS = 2048  # German x English synonyms of one aligned Ding part; more are left out (Ding's most: 35 x 21)
MAX_ENTRY = 1 << 16  # bytes of a dictd entry; a longer one is left out (FreeDict's longest: 5,375)
MAX_DATA = 1 << 29  # bytes of dictd data, unpacked (FreeDict's eng-deu: 80 MB)
CHUNK = 1 << 20  # bytes read at a time
HINT = "give Ding's de-en file or FreeDict's freedict-eng-deu.index"

# Each bracket stops at the next opening one of its kind, so a line of 100,000 "{" costs linear time,
# not quadratic (a nested pair of one kind leaves the outer one open: the synonym is left out)
_TAG = re.compile(r"\[([^\[\]]*)\]")
_NOISE = re.compile(r"\{[^{}]*\}|\([^()]*\)|\[[^\[\]]*\]|/[^/\s][^/]*/|<[^<>]*>")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")  # control characters that are not whitespace
_ALNUM = re.compile(r"[^\W_]")  # a letter or digit of any script
_PLACEHOLDER = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw|jd)\.(?=\s|$)", re.I)


@dataclass(frozen=True)
class Sense:
    german: str
    flags: int  # LEGAL | SWISS | OTHER_REGION


def clean(part: str) -> str:
    """An entry without its grammar, glosses, tags, abbreviations and placeholders ("jdn.", "sb.")."""
    text = _PLACEHOLDER.sub(" ", _NOISE.sub(" ", part))
    return " ".join(text.replace("…", " ").split()).strip(" ,.;:!?")


def sense_flags(part: str) -> int:
    """The flags a part's tags give: ``[jur.]`` legal, ``[Schw.]`` Swiss, another region's tag other."""
    tags = {t.strip().lower() for t in _TAG.findall(part)}
    flags = LEGAL if "jur." in tags else 0
    if "schw." in tags:
        flags |= SWISS
    elif tags & {"ös.", "dt.", "österr.", "bayr.", "norddt.", "süddt."}:
        flags |= OTHER_REGION
    return flags


def _left_open(text: str) -> bool:
    """Whether a cleaned synonym still holds a brace, bracket, parenthesis or angle bracket: one its
    line left open, whose grammar would otherwise read as a word ("Vertrag {m")."""
    return any(c in text for c in "{}[]()<>")


def unfit(text: str) -> str | None:
    """Why a cleaned, non-empty synonym is no word to look up or search (counted as left out), or
    None: a bracket left open, no letter or digit at all (a line of ``| :: |``), a control character."""
    if _left_open(text):
        return "synonyms with a brace, bracket or parenthesis left open"
    if not _ALNUM.search(text):
        return "synonyms without a letter or digit"
    if _CONTROL.search(text):
        return "synonyms with a control character"
    return None


def english_key(part: str) -> str:
    """An English part as a key: cleaned, lower case, a verb without its "to "."""
    key = clean(part).lower()
    return key[3:] if key.startswith("to ") else key

