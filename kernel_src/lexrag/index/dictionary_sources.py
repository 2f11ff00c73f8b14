"""Reading the dictionary files lexrag builds its dictionary artifact from (see
:mod:`lexrag.index.dictionary`): Ding's text format and FreeDict's dictd format, each as
(English key, German sense) pairs with legal and regional flags."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from lexrag.artifacts import ArtifactError

__all__ = ["MAX_PHRASE", "LEGAL", "SWISS", "OTHER_REGION", "Sense", "parse_ding", "parse_dictd", "check_source", "read_source"]

MAX_PHRASE = 4  # English words in the longest key looked up
HEAD_BYTES = 1 << 16  # what the check before a build reads of a dictionary file
LEGAL, SWISS, OTHER_REGION = 1, 2, 4  # flags of a sense

_TAG = re.compile(r"\[([^\]]*)\]")
_NOISE = re.compile(r"\{[^}]*\}|\([^)]*\)|\[[^\]]*\]|/[^/\s][^/]*/|<[^>]*>")
_PLACEHOLDER = re.compile(r"\b(?:sb|sth|jdn|jdm|jds|etw|jd)\.(?=\s|$)", re.I)


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


def _left_open(text: str) -> bool:
    """Whether a cleaned synonym still holds a brace, bracket or parenthesis: one its line left
    open, whose grammar would otherwise read as a word ("Vertrag {m")."""
    return any(c in text for c in "{}[]()")


def _english_key(part: str) -> str:
    key = _clean(part).lower()
    return key[3:] if key.startswith("to ") else key


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
        line_flags = _flags(de_parts[0]) & LEGAL | _flags(en_parts[0]) & LEGAL
        for de, en in zip(de_parts, en_parts):
            senses = []
            for syn in _synonyms(de):
                german = _clean(syn)
                if _left_open(german):
                    skip("synonyms with a brace, bracket or parenthesis left open")
                elif german and len(german.split()) <= MAX_PHRASE:
                    senses.append(Sense(german.replace("ß", "ss"), _flags(syn) | line_flags | (_flags(en) & LEGAL)))
            for syn in _synonyms(en):
                key = _english_key(syn)
                if _left_open(key):
                    skip("synonyms with a brace, bracket or parenthesis left open")
                elif key and len(key.split()) <= MAX_PHRASE:
                    for s in senses:
                        yield key, s


_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64(field: str) -> int:
    """A dictd index number (base 64, most significant digit first)."""
    n = 0
    for c in field:
        n = n * 64 + _B64[c]
    return n


def _split_senses(line: str) -> list[str]:
    """A FreeDict sense line's parts, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(line):
        depth += c in "([{<"
        depth -= c in ")]}>" and depth > 0
        if c == "," and depth == 0:
            parts.append(line[start:i])
            start = i + 1
    return parts + [line[start:]]


def _letters(text: str) -> str:
    """Letters, digits and single spaces of ``text``, lower case: how dictd indexes a headword
    ("… and Bob's your uncle!" is "and bobs your uncle")."""
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


def parse_dictd(index: Iterable[str], data: bytes, skipped: dict | None = None) -> Iterator[tuple[str, Sense]]:
    """(English key, German sense) pairs of a dictd dictionary (FreeDict's eng-deu): each index
    line ``headword<TAB>offset<TAB>length`` points at an entry in ``data``; its unindented lines
    after the first list the German senses.  A ``[jur.]`` anywhere on a line applies to the line."""
    for line in index:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3 or fields[0].startswith("00-database") or fields[0].startswith("00database"):
            continue
        try:
            start, length = _b64(fields[1]), _b64(fields[2])
        except KeyError:
            start = length = -1  # not a dictd index line
        if start < 0 or length <= 0 or start + length > len(data):  # an index for other data: counted, never read
            if skipped is not None:
                skipped["index lines outside the data"] = skipped.get("index lines outside the data", 0) + 1
            continue
        key = _english_key(fields[0])
        if not key or len(key.split()) > MAX_PHRASE:
            continue
        entry = data[start:start + length].decode("utf-8", "replace").split("\n")
        # an entry names its headword first (or an abbreviation of it): else another index
        if _letters(fields[0]) not in _letters(entry[0]):
            if skipped is not None:
                skipped["index lines that do not match their entry"] = skipped.get("index lines that do not match their entry", 0) + 1
            continue
        for sense_line in entry[1:]:
            if not sense_line.strip() or sense_line[0].isspace():
                continue  # notes, examples, synonyms and cross-references are indented
            line_flags = _flags(sense_line) & LEGAL
            for part in _split_senses(sense_line):
                german = _clean(part)
                if german and len(german.split()) <= MAX_PHRASE:
                    yield key, Sense(german.replace("ß", "ss"), _flags(part) | line_flags)


def _dictd_pair(source: Path) -> tuple[Path, Path] | None:
    """(its .index, its .dict.dz or .dict) when ``source`` names a dictd file, else None; a
    missing half is an error naming both."""
    if not source.name.endswith((".index", ".dict.dz", ".dict")):
        return None
    stem = source.name.rsplit(".index", 1)[0] if source.name.endswith(".index") else source.name.split(".dict", 1)[0]
    index_path = source.with_name(stem + ".index")
    data_path = next((p for p in (source.with_name(stem + ".dict.dz"), source.with_name(stem + ".dict")) if p.is_file()), None)
    if not index_path.is_file() or data_path is None:
        raise ArtifactError(f"--dictionary {source}: a dictd dictionary needs both {stem}.index and {stem}.dict.dz "
                            f"(Debian: apt-get install dict-freedict-eng-deu puts them in /usr/share/dictd/)")
    return index_path, data_path


def check_source(source: Path) -> tuple[Path, Path] | None:
    """Refuse, before any build work, a dictionary file that cannot be one: missing, a folder, a
    dictd index without its data, or a text file whose start is not UTF-8.  Returns the dictd pair
    (index, data) when ``source`` names one, else None (a Ding text file)."""
    if not source.is_file():
        raise ArtifactError(f"--dictionary {source}: not a file (Debian: apt-get install trans-de-en puts Ding's file at "
                            f"/usr/share/trans/de-en; dict-freedict-eng-deu puts FreeDict's at "
                            f"/usr/share/dictd/freedict-eng-deu.index)")
    pair = _dictd_pair(source)
    try:
        with open(pair[0] if pair else source, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        raise ArtifactError(f"--dictionary {source}: unreadable ({e.strerror or e})") from e
    try:  # a character the head cuts short is no error; the end of a shorter file is the file's end
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < HEAD_BYTES)
    except UnicodeDecodeError as e:
        raise ArtifactError(f"--dictionary {source}: not UTF-8 text (byte {e.start}); give Ding's de-en file or "
                            f"FreeDict's freedict-eng-deu.index") from e
    return pair


def read_source(source: Path, skipped: dict) -> tuple[str, str, str, str, str, Iterator[tuple[str, Sense]]]:
    """(format, version, sha256, licence, Kaggle's licence name, pairs) of a Ding file or a dictd
    index/.dict.dz pair."""
    pair = check_source(source)
    if pair:
        index_path, data_path = pair
        try:
            raw = gzip.decompress(data_path.read_bytes()) if data_path.name.endswith(".dz") else data_path.read_bytes()
            index = index_path.read_text(encoding="utf-8")
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise ArtifactError(f"--dictionary {source}: unreadable ({type(e).__name__}: {e}); reinstall "
                                f"dict-freedict-eng-deu or give Ding's de-en file") from e
        head = raw[:4000].decode("utf-8", "replace")
        version = next((ln.split(":", 1)[1].strip() for ln in head.splitlines() if ln.startswith("Edition:")), "")
        sha = hashlib.sha256(index.encode("utf-8") + raw).hexdigest()
        return ("dictd", version, sha, "GPL-3.0 and AGPL-3.0 (FreeDict's eng-deu, made from Ding, GPL-2+)", "GPL-3.0",
                parse_dictd(index.splitlines(), raw, skipped))
    raw = source.read_bytes()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is no part of the first line
    except UnicodeDecodeError as e:
        raise ArtifactError(f"--dictionary {source}: not UTF-8 text (byte {e.start}); give Ding's de-en file") from e
    head = {k.strip("# ").strip().lower(): v.strip() for k, _, v in (ln.partition("::") for ln in text.splitlines()[:20])
            if k.startswith("#") and _}
    licence = head.get("license") or "GPL-2+ (Ding's; the file names no licence)"
    kaggle = ("GPL-2.0" if "2" in licence else "GPL-3.0") if "GPL" in licence else "other"
    return "ding", head.get("version", ""), hashlib.sha256(raw).hexdigest(), licence, kaggle, parse_ding(text.splitlines(), skipped)
