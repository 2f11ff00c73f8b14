"""Reading the dictionary files lexrag builds its dictionary artifact from (see
:mod:`lexrag.index.dictionary`): Ding's text format and FreeDict's dictd format, each as
(English key, German sense) pairs with legal and regional flags."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import logging
import re
import zlib
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator

from lexrag.artifacts import ArtifactError

__all__ = ["MAX_PHRASE", "LEGAL", "SWISS", "OTHER_REGION", "Sense", "parse_ding", "parse_dictd", "check_source", "read_source"]

log = logging.getLogger("lexrag.index.dictionary")

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
    """Whether a cleaned synonym still holds a brace, bracket, parenthesis or angle bracket: one its
    line left open, whose grammar would otherwise read as a word ("Vertrag {m")."""
    return any(c in text for c in "{}[]()<>")


def _unfit(text: str) -> str | None:
    """Why a cleaned, non-empty synonym is no word to look up or search (counted as left out), or
    None: a bracket left open, no letter or digit at all (a line of ``| :: |``), a control character."""
    if _left_open(text):
        return "synonyms with a brace, bracket or parenthesis left open"
    if not _ALNUM.search(text):
        return "synonyms without a letter or digit"
    if _CONTROL.search(text):
        return "synonyms with a control character"
    return None


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
            de_syns, en_syns = _synonyms(de), _synonyms(en)
            if len(de_syns) * len(en_syns) > MAX_PAIRS:  # the pairs of a part grow as its synonyms squared: bounded
                skip(f"parts with more than {MAX_PAIRS:,} German x English synonyms")
                continue
            senses = []
            for syn in de_syns:
                german = _clean(syn)
                if german and (why := _unfit(german)):
                    skip(why)
                elif german and len(german.split()) <= MAX_PHRASE:
                    senses.append(Sense(german.replace("ß", "ss"), _flags(syn) | line_flags | (_flags(en) & LEGAL)))
            for syn in en_syns:
                key = _english_key(syn)
                if key and (why := _unfit(key)):
                    skip(why)
                elif key and len(key.split()) <= MAX_PHRASE:
                    for s in senses:
                        yield key, s


_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64(field: str) -> int:
    """A dictd index number (base 64, most significant digit first); more than 10 digits (a petabyte)
    is no index's number, refused as a digit outside base 64 is (a KeyError), not summed in time
    that grows as the digits squared."""
    if len(field) > 10:
        raise KeyError(field[:20])
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


def parse_dictd(index: Iterable[str], data: bytes, skipped: dict | None = None,
                source: str | Path = "the dictd index") -> Iterator[tuple[str, Sense]]:
    """(English key, German sense) pairs of a dictd dictionary (FreeDict's eng-deu): each index
    line ``headword<TAB>offset<TAB>length`` points at an entry in ``data``; its unindented lines
    after the first list the German senses.  A ``[jur.]`` anywhere on a line applies to the line.

    An entry longer than :data:`MAX_ENTRY` is left out (counted), and an index whose lines point at
    more than twice the data's bytes (the same long entry over and over) is refused, naming
    ``source``: the work stays linear in the size of the index and the data."""
    def skip(what: str) -> None:
        if skipped is not None:
            skipped[what] = skipped.get(what, 0) + 1

    budget = 2 * len(data) + CHUNK  # bytes of entries read: FreeDict's index reads its data about once
    for line in index:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3 or fields[0].startswith("00-database") or fields[0].startswith("00database"):
            continue
        try:
            start, length = _b64(fields[1]), _b64(fields[2])
        except KeyError:
            start = length = -1  # not a dictd index line
        if start < 0 or length <= 0 or start + length > len(data):  # an index for other data: counted, never read
            skip("index lines outside the data")
            continue
        key = _english_key(fields[0])
        if not key or len(key.split()) > MAX_PHRASE:
            continue
        if why := _unfit(key):
            skip(why)
            continue
        if length > MAX_ENTRY:
            skip(f"entries longer than {MAX_ENTRY:,} bytes")
            continue
        budget -= length
        if budget < 0:
            raise ArtifactError(f"--dictionary {source}: its index lines point at more than twice the {len(data):,} bytes of "
                                "its data (the same entries over and over): the index and the data are of different "
                                "dictionaries, or the index is damaged; give a matching pair")
        entry = data[start:start + length].decode("utf-8", "replace").split("\n")
        # an entry names its headword first (or an abbreviation of it): else another index
        if _letters(fields[0]) not in _letters(entry[0]):
            skip("index lines that do not match their entry")
            continue
        for sense_line in entry[1:]:
            if not sense_line.strip() or sense_line[0].isspace():
                continue  # notes, examples, synonyms and cross-references are indented
            line_flags = _flags(sense_line) & LEGAL
            for part in _split_senses(sense_line):
                german = _clean(part)
                if german and (why := _unfit(german)):
                    skip(why)
                elif german and len(german.split()) <= MAX_PHRASE:
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


# Packed files a dictionary may come as: (what the first bytes say, its name, the command that unpacks it)
_PACKED = ((b"\x1f\x8b", "gzip-compressed", "gunzip -c"), (b"BZh", "bzip2-compressed", "bunzip2 -c"),
           (b"\xfd7zXZ\x00", "xz-compressed", "unxz -c"), (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd -c"),
           (b"PK\x03\x04", "a zip archive", "unzip -p"))


def _refuse_packed(head: bytes, path: Path, label: str) -> None:
    """Refuse a text file that is a compressed one, saying which kind and how to unpack it."""
    for magic, what, command in _PACKED:
        if head.startswith(magic) and (magic != b"BZh" or head[3:4].isdigit()):
            suffix = next((s for s in (".gz", ".bz2", ".xz", ".zst", ".zip") if path.name.endswith(s)), None)
            target = path.with_name(path.name[:-len(suffix)] if suffix else path.name + ".txt")
            raise ArtifactError(f"{label}: {what}, not text; unpack it first ({command} {path} > {target}) and give {target}")


def _unreadable(label: str, e: OSError) -> ArtifactError:
    return ArtifactError(f"{label}: unreadable ({e.strerror or e})")


def _read_lines(path: Path, label: str, skipped: dict | None = None, warn: bool = False) -> Iterator[str]:
    """The lines of a UTF-8 text file without their line ends (and a byte-order mark), read
    :data:`CHUNK` bytes at a time, so memory stays bounded whatever the file holds.

    A line longer than :data:`MAX_LINE` bytes is left out, counted in ``skipped``; with ``warn``
    the first few are warned about, naming the file and the line.  A compressed file, a NUL byte
    (binary data) or bytes that are not UTF-8 are an :class:`ArtifactError` naming ``label`` and
    the line, raised when the reading gets there."""
    n = 0  # lines ended
    buf = b""  # the current line so far, while it is within MAX_LINE
    long = None  # the current line's incremental decoder, once it is past MAX_LINE

    def bad_bytes(e: UnicodeDecodeError, where: str) -> ArtifactError:
        return ArtifactError(f"{label}: line {n + 1:,}: not UTF-8 text ({where}); {HINT}")

    def ended_long() -> None:
        what = f"lines longer than {MAX_LINE:,} bytes"
        if skipped is not None:
            skipped[what] = skipped.get(what, 0) + 1
            if warn and skipped[what] <= 3:
                log.warning("dictionary %s: line %s is longer than %s bytes (no dictionary line is): left out%s", path,
                            f"{n:,}", f"{MAX_LINE:,}", "; further ones are only counted" if skipped[what] == 3 else "")

    try:
        f = open(path, "rb")
    except OSError as e:
        raise _unreadable(label, e) from e
    with f:
        first = True
        while True:
            try:
                chunk = f.read(CHUNK)
            except OSError as e:
                raise _unreadable(label, e) from e
            if not chunk:
                break
            if first:
                first = False
                _refuse_packed(chunk, path, label)
                if chunk.startswith(codecs.BOM_UTF8):  # no part of the first line
                    chunk = chunk[len(codecs.BOM_UTF8):]
            nul = chunk.find(b"\0")
            if nul >= 0:
                at = n + chunk.count(b"\n", 0, nul) + 1
                raise ArtifactError(f"{label}: binary, not UTF-8 text (a NUL byte on line {at:,}); {HINT}")
            pieces = chunk.split(b"\n")
            for i, piece in enumerate(pieces):
                ends = i < len(pieces) - 1  # the last piece goes on in the next chunk
                if long is None:
                    buf += piece
                    if len(buf) > MAX_LINE:  # read on for its bytes' sake, not kept
                        long = codecs.getincrementaldecoder("utf-8")()
                        piece, buf = buf, b""
                if long is not None:
                    try:
                        long.decode(piece, final=ends)
                    except UnicodeDecodeError as e:
                        raise bad_bytes(e, "in a line too long to keep") from None
                if not ends:
                    continue
                if long is None:
                    try:
                        text = buf.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise bad_bytes(e, f"byte {e.start + 1:,} of the line") from None
                    n += 1
                    yield text[:-1] if text.endswith("\r") else text
                else:
                    n += 1
                    ended_long()
                buf, long = b"", None
        if long is not None:  # the last line, without a line end
            try:
                long.decode(b"", final=True)
            except UnicodeDecodeError as e:
                raise bad_bytes(e, "at the end of a line too long to keep") from None
            n += 1
            ended_long()
        elif buf:
            try:
                text = buf.decode("utf-8")
            except UnicodeDecodeError as e:
                raise bad_bytes(e, f"byte {e.start + 1:,} of the line") from None
            yield text[:-1] if text.endswith("\r") else text


def _dictd_data(source: Path, data_path: Path) -> bytes:
    """A dictd dictionary's data, unpacked (at most :data:`MAX_DATA` bytes, without a NUL byte)."""
    parts, size = [], 0
    try:
        with (gzip.open(data_path, "rb") if data_path.name.endswith(".dz") else open(data_path, "rb")) as f:
            while block := f.read(CHUNK):
                size += len(block)
                if size > MAX_DATA:
                    raise ArtifactError(f"--dictionary {source}: its data {data_path.name} unpacks to more than "
                                        f"{MAX_DATA >> 20:,} MiB (FreeDict's is 80 MB): not a dictionary's data; reinstall "
                                        "dict-freedict-eng-deu or give Ding's de-en file")
                parts.append(block)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise ArtifactError(f"--dictionary {source}: unreadable ({type(e).__name__}: {e}); reinstall "
                            f"dict-freedict-eng-deu or give Ding's de-en file") from e
    data = b"".join(parts)
    nul = data.find(b"\0")
    if nul >= 0:
        raise ArtifactError(f"--dictionary {source}: its data {data_path.name} is binary, not dictionary text (a NUL byte at "
                            f"byte {nul:,} unpacked); reinstall dict-freedict-eng-deu or give Ding's de-en file")
    return data


def _locate(source: Path) -> tuple[Path, Path] | None:
    """The dictd pair (index, data) ``source`` names, or None for a Ding file; refuses a path that is
    no file and a dictd file without its other half."""
    if not source.is_file():
        raise ArtifactError(f"--dictionary {source}: not a file (Debian: apt-get install trans-de-en puts Ding's file at "
                            f"/usr/share/trans/de-en; dict-freedict-eng-deu puts FreeDict's at "
                            f"/usr/share/dictd/freedict-eng-deu.index)")
    return _dictd_pair(source)


def check_source(source: Path) -> tuple[Path, Path] | None:
    """Refuse, before any build work, a dictionary file that cannot be one: missing, a folder, a
    dictd index without its data, a compressed file, binary data (a NUL byte anywhere), bytes that
    are not UTF-8, or a file that yields no English-German entry.  The whole file is read, a chunk
    at a time (memory stays bounded), and parsed until its first entry; about 0.2 s for Ding's
    25 MB file.  Returns the dictd pair (index, data) when ``source`` names one, else None (a Ding
    text file)."""
    source = Path(source)
    pair = _locate(source)
    label = f"--dictionary {source}"
    skipped: dict[str, int] = {}
    if pair:
        data = _dictd_data(source, pair[1])
        lines = _read_lines(pair[0], label, skipped)
        pairs = parse_dictd(lines, data, skipped, source)
    else:
        lines = _read_lines(source, label, skipped)
        pairs = parse_ding(lines, skipped)
    found = next(pairs, None) is not None
    for _ in lines:  # the rest of the file, read for NUL bytes and bytes that are not UTF-8
        pass
    pairs.close()
    if not found:
        why = f" (left out: {', '.join(f'{n:,} {what}' for what, n in skipped.items())})" if skipped else ""
        raise ArtifactError(f"--dictionary {source}: no English-German entries found{why}; {HINT}")
    return pair


def read_source(source: Path, skipped: dict) -> tuple[str, str, str, str, str, Iterator[tuple[str, Sense]]]:
    """(format, version, sha256, licence, Kaggle's licence name, pairs) of a Ding file or a dictd
    index/.dict.dz pair.  The pairs are read as they are taken, a chunk of the file at a time; a file
    that is binary or not UTF-8 is an :class:`ArtifactError` naming the line, when the reading gets there."""
    source = Path(source)
    pair = _locate(source)
    label = f"--dictionary {source}"
    sha = hashlib.sha256()
    if pair:
        index_path, data_path = pair
        data = _dictd_data(source, data_path)
        head = data[:4000].decode("utf-8", "replace")
        version = next((ln.split(":", 1)[1].strip() for ln in head.splitlines() if ln.startswith("Edition:")), "")
        _hash(index_path, sha, label)
        sha.update(data)
        return ("dictd", version, sha.hexdigest(), "GPL-3.0 and AGPL-3.0 (FreeDict's eng-deu, made from Ding, GPL-2+)", "GPL-3.0",
                parse_dictd(_read_lines(index_path, label, skipped, warn=True), data, skipped, source))
    head = {k.strip("# ").strip().lower(): v.strip() for k, _, v in (ln.partition("::") for ln in islice(_read_lines(source, label), 20))
            if k.startswith("#") and _}
    licence = head.get("license") or "GPL-2+ (Ding's; the file names no licence)"
    kaggle = ("GPL-2.0" if "2" in licence else "GPL-3.0") if "GPL" in licence else "other"
    _hash(source, sha, label)
    return "ding", head.get("version", ""), sha.hexdigest(), licence, kaggle, parse_ding(_read_lines(source, label, skipped, warn=True),
                                                                                        skipped)


def _hash(path: Path, sha, label: str) -> None:
    """Add the bytes of ``path`` to ``sha``, a chunk at a time."""
    try:
        with open(path, "rb") as f:
            while block := f.read(CHUNK):
                sha.update(block)
    except OSError as e:
        raise _unreadable(label, e) from e
