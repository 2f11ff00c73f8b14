"""An English-German dictionary as an artifact, and the word-by-word translation of an English
question into a German search text (the ``dict_de`` query variant) for runs without an LLM.

The source is a dictionary file the user has: Ding's text format (Debian's ``trans-de-en``,
installed at ``/usr/share/trans/de-en``; lines ``German | German :: English | English``, each
side's ``|``-separated parts aligned, ``;`` between synonyms, ``{m}`` grammar, ``[jur.]`` a
subject, ``[Schw.]`` Swiss usage).  Both Ding and FreeDict are GPL-2+: the artifact built from
them is data the user makes and ships as its own dataset, never part of the MIT package.

The artifact (folder ``dictionary/``) holds ``entries.tsv.gz`` (English key, German sense, flags),
and the source's name, version, sha256 and licence in ``params.json``.  Translation
(:class:`Dictionary.translate`) looks up the longest phrase first (up to :data:`MAX_PHRASE`
words), prefers legal senses (``[jur.]``) and Swiss ones (``[Schw.]``) where an English key has
them (at most :data:`MAX_SENSES`: BM25 counts a query term once, so the cap stands in for
weighting a word's senses by 1/their number), writes ``ß`` as ``ss`` (Swiss spelling), and keeps
the question's citations, its abbreviations and numbers, and its English words beside their
German senses (English function words dropped).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from lexrag.artifacts import ArtifactError, read_params, write_params

__all__ = ["MAX_PHRASE", "Sense", "parse_ding", "build_dictionary", "glossary", "Dictionary", "is_english", "load_dictionary_step",
           "build_dictionary_step"]

log = logging.getLogger(__name__)

MAX_PHRASE = 4  # English words in the longest key looked up
MAX_SENSES = 3  # German senses written per English key (legal and Swiss ones first)
ENTRIES = "entries.tsv.gz"
LEGAL, SWISS, OTHER_REGION = 1, 2, 4  # flags of a sense

_TAG = re.compile(r"\[([^\]]*)\]")
_NOISE = re.compile(r"\{[^}]*\}|\([^)]*\)|\[[^\]]*\]|/[^/\s][^/]*/|<[^>]*>")
_PLACEHOLDER = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw|jd)\.(?=\s|$)", re.I)
_EN_WORD = re.compile(r"[^\W\d_][\w'\-]*|\d+[a-z]?|\S")  # words of any script (Zürich, Müller), numbers, punctuation
_EN_STOP = frozenset("a an the of to in on at by for with from and or as is are was were be been being that this these those "
                     "it its his her their our your my he she they we you i which who whom whose what when where whether if "
                     "than then so such not no do does did has have had can could may might must shall should will would "
                     "there here any some all each every other into under over about after before between".split())
_DE_STOP = frozenset("der die das den dem des ein eine einer eines einem einen und oder ist sind war nicht mit von zu im in "
                     "auf für bei nach aus wird werden hat haben kann sich auch dass wenn als wie".split())
# French and Italian function words: a question in either is not English (Swiss questions may be in both)
_FR_IT_STOP = frozenset("le la les un une des du est sont et ou que qui dans pour par sur avec ne pas au aux ce cette il elle "
                        "lo gli una della delle dei che di è sono per con non nel nella il del".split())


@dataclass(frozen=True)
class Sense:
    german: str
    flags: int  # LEGAL | SWISS | OTHER_REGION


def _clean(part: str) -> str:
    """An entry without its grammar, glosses, tags, abbreviations and placeholders ("jdn.", "sb.")."""
    text = _PLACEHOLDER.sub(" ", _NOISE.sub(" ", part))
    return " ".join(text.replace("…", " ").split()).strip(" ,.;:!?")


def _flags(part: str) -> int:
    tags = {t.strip().lower() for t in _TAG.findall(part)}
    flags = LEGAL if "jur." in tags else 0
    if "schw." in tags:
        flags |= SWISS
    elif tags & {"ös.", "dt.", "österr.", "bayr.", "norddt.", "süddt."}:
        flags |= OTHER_REGION
    return flags


def _english_key(part: str) -> str:
    key = _clean(part).lower()
    return key[3:] if key.startswith("to ") else key


def parse_ding(lines: Iterable[str]) -> Iterator[tuple[str, Sense]]:
    """(English key, German sense) pairs of a Ding text file: each ``|``-separated part of a line's
    English side with the synonyms of the German part it is aligned with.  A subject or region
    tag on the German synonym, or on the line's first part, applies."""
    for line in lines:
        if not line.strip() or line.startswith("#") or " :: " not in line:
            continue
        de_side, en_side = line.rstrip("\n").split(" :: ", 1)
        de_parts, en_parts = de_side.split(" | "), en_side.split(" | ")
        if len(de_parts) != len(en_parts):
            continue  # misaligned line: its parts cannot be paired
        line_flags = _flags(de_parts[0]) & LEGAL | _flags(en_parts[0]) & LEGAL
        for de, en in zip(de_parts, en_parts):
            senses = []
            for syn in de.split("; "):
                german = _clean(syn)
                if german and len(german.split()) <= MAX_PHRASE:
                    senses.append(Sense(german.replace("ß", "ss"), _flags(syn) | line_flags | (_flags(en) & LEGAL)))
            for syn in en.split("; "):
                key = _english_key(syn)
                if key and len(key.split()) <= MAX_PHRASE:
                    for s in senses:
                        yield key, s


def build_dictionary(source: str | Path, out: str | Path) -> "Dictionary":
    """Read a Ding file and write the artifact in ``out``."""
    source, out = Path(source), Path(out)
    if not source.is_file():
        raise ArtifactError(f"--dictionary {source}: not a file (Debian: apt-get install trans-de-en puts Ding's file at "
                            f"/usr/share/trans/de-en)")
    raw = source.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"--dictionary {source}: not UTF-8 text (byte {e.start}); give Ding's de-en file") from e
    version = next((ln.split("::", 1)[1].strip() for ln in text.splitlines()[:20] if ln.startswith("# Version")), "")
    entries: dict[str, dict[str, int]] = {}
    for key, sense in parse_ding(text.splitlines()):
        have = entries.setdefault(key, {})
        have[sense.german] = have.get(sense.german, 0) | sense.flags
    if not entries:
        raise ArtifactError(f"--dictionary {source}: no 'German :: English' entries found; give Ding's de-en file")
    out.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{k}\t{g}\t{f}\n" for k in sorted(entries) for g, f in entries[k].items())
    with gzip.GzipFile(out / ENTRIES, "wb", mtime=0) as f:  # mtime 0: the same bytes from the same source
        f.write(rows.encode("utf-8"))
    write_params(out, "dictionary", "lexrag.index.dictionary", {"format": "ding", "max_phrase": MAX_PHRASE},
                 source=source.name, source_version=version, source_sha256=hashlib.sha256(raw).hexdigest(),
                 licence="GPL-2+ (the source dictionary's; this artifact is data built from it, not part of lexrag)",
                 n_entries=len(entries))
    log.info("dictionary: %d English keys from %s", len(entries), source)
    return Dictionary.load(out)


def is_english(text: str) -> bool:
    """Whether a question reads as English: at least two English function words, and more of them
    than German ones and than French and Italian ones (ties, and texts with none, are not English)."""
    words = re.findall(r"[^\W\d_]+", text.lower())
    en = sum(w in _EN_STOP and w not in _DE_STOP and w not in _FR_IT_STOP for w in words)
    de = sum(w in _DE_STOP for w in words)
    fr_it = sum(w in _FR_IT_STOP for w in words)
    return en >= 2 and en > de and en > fr_it


def glossary() -> dict[str, list[str]]:
    """The reviewed glossary shipped with lexrag (``data/glossary_en_de.tsv``): English legal terms
    and names of Swiss acts -> German search words; it wins over the dictionary."""
    from importlib.resources import files

    out: dict[str, list[str]] = {}
    for line in files("lexrag").joinpath("data/glossary_en_de.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            en, de = line.split("\t")
            out[" ".join(en.lower().split())] = de.split()
    return out


class Dictionary:
    """English key -> German senses, and the translation of a question."""

    def __init__(self, entries: dict[str, list[tuple[str, int]]], doc: dict | None = None):
        self.entries = entries
        self.doc = doc or {}
        self.glossary = glossary()
        self.max_phrase = max([MAX_PHRASE, *(len(k.split()) for k in self.glossary)])

    @classmethod
    def load(cls, folder: str | Path) -> "Dictionary":
        folder = Path(folder)
        doc = read_params(folder, "dictionary")
        entries: dict[str, list[tuple[str, int]]] = {}
        try:
            with gzip.open(folder / ENTRIES, "rt", encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    key, german, flags = line.rstrip("\n").split("\t")
                    entries.setdefault(key, []).append((german, int(flags)))
        except (OSError, EOFError, ValueError, UnicodeDecodeError) as e:
            raise ArtifactError(f"{folder / ENTRIES}: damaged ({type(e).__name__}); rebuild it with `python -m lexrag build "
                                f"... --dictionary /usr/share/trans/de-en`") from e
        return cls(entries, doc)

    def senses(self, key: str) -> list[str]:
        """The German senses written for an English key: legal ones if it has any, Swiss before
        other regions, in the dictionary's order, at most :data:`MAX_SENSES`; the glossary's words
        where it has the key."""
        if key in self.glossary:
            return list(self.glossary[key])
        have = self.entries.get(key, [])
        if any(f & LEGAL for _, f in have):
            have = [x for x in have if x[1] & LEGAL]
        ranked = sorted(enumerate(have), key=lambda t: (-(t[1][1] & SWISS), bool(t[1][1] & OTHER_REGION), t[0]))
        return [g for _, (g, _) in ranked[:MAX_SENSES]]

    def translate(self, text: str) -> str:
        """The German search text of an English question (see the module's docstring)."""
        from lexrag.citations import extract, normalize_text

        norm = normalize_text(text)
        found = extract(norm)
        kept = [x.citation.format() for x in found]
        pieces, last = [], 0
        for x in found:
            pieces.append(norm[last:x.start])
            last = max(last, x.end)
        tokens = _EN_WORD.findall(" ".join(pieces + [norm[last:]]))
        out: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if not tok[0].isalnum():
                i += 1
                continue
            for n in range(min(self.max_phrase, len(tokens) - i), 0, -1):
                words = tokens[i:i + n]
                if not all(w[0].isalnum() for w in words):
                    continue
                key = " ".join(w.lower() for w in words)
                if n == 1 and key in _EN_STOP:
                    break
                senses = self.senses(key)
                if senses:  # the German senses, and the English words beside them (names, loanwords, codes)
                    out += senses + [w for w in words if w.lower() not in _EN_STOP]
                    i += n
                    break
            else:
                out.append(tok)  # no entry: the English word stays (names, abbreviations, numbers)
                i += 1
                continue
            if n == 1 and key in _EN_STOP:
                i += 1
        return " ".join(kept + out).replace("ß", "ss")


def build_dictionary_step(cfg, dest: Path, inputs) -> None:
    build_dictionary(inputs.dictionary, dest)


def load_dictionary_step(folder: Path, cfg, art) -> Dictionary:
    return Dictionary.load(folder)
