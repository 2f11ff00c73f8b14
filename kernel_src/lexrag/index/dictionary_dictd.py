"""FreeDict's English-German dictionary in the dictd format (Debian's ``dict-freedict-eng-deu``):
an index of headwords pointing into the ``.dict.dz`` data, whose entries list the German senses;
the two files found and the data unpacked, and the entries read as (English key, German sense)
pairs (:mod:`lexrag.index.dictionary_format` says what a pair is)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Iterable, Iterator

from lexrag.artifacts import ArtifactError
from lexrag.index.dictionary_format import (CHUNK, LEGAL, MAX_DATA, MAX_ENTRY, MAX_PHRASE, Sense, clean, english_key, sense_flags,
                                            unfit)

__all__ = ["parse_dictd", "dictd_pair", "dictd_data"]

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
        key = english_key(fields[0])
        if not key or len(key.split()) > MAX_PHRASE:
            continue
        if why := unfit(key):
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
            line_flags = sense_flags(sense_line) & LEGAL
            for part in _split_senses(sense_line):
                german = clean(part)
                if german and (why := unfit(german)):
                    skip(why)
                elif german and len(german.split()) <= MAX_PHRASE:
                    yield key, Sense(german.replace("ß", "ss"), sense_flags(part) | line_flags)


def dictd_pair(source: Path) -> tuple[Path, Path] | None:
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


def dictd_data(source: Path, data_path: Path) -> bytes:
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
