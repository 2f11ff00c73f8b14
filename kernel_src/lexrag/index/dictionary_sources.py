"""Reading a dictionary file lexrag builds its dictionary artifact from (see
:mod:`lexrag.index.dictionary`): which format a path holds, the checks that refuse a file that
cannot be a dictionary before any build work, and the text reader both formats are read through
(bounded memory; a compressed file, binary data or bytes that are not UTF-8 named with their line).
The formats themselves are parsed by :mod:`lexrag.index.dictionary_ding` and
:mod:`lexrag.index.dictionary_dictd`."""

from __future__ import annotations

import codecs
import hashlib
import logging
from itertools import islice
from pathlib import Path
from typing import Iterator

from lexrag.artifacts import ArtifactError
from lexrag.index.dictionary_dictd import dictd_data, dictd_pair, parse_dictd
from lexrag.index.dictionary_ding import parse_ding
from lexrag.index.dictionary_format import CHUNK, HINT, MAX_LINE, Sense

__all__ = ["check_source", "read_source"]

log = logging.getLogger("lexrag.index.dictionary")  # the build's logger: its warnings name the dictionary


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

    def bad_bytes(where: str) -> ArtifactError:
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
                    except UnicodeDecodeError:
                        raise bad_bytes("in a line too long to keep") from None
                if not ends:
                    continue
                if long is None:
                    try:
                        text = buf.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise bad_bytes(f"byte {e.start + 1:,} of the line") from None
                    n += 1
                    yield text[:-1] if text.endswith("\r") else text
                else:
                    n += 1
                    ended_long()
                buf, long = b"", None
        if long is not None:  # the last line, without a line end
            try:
                long.decode(b"", final=True)
            except UnicodeDecodeError:
                raise bad_bytes("at the end of a line too long to keep") from None
            n += 1
            ended_long()
        elif buf:
            try:
                text = buf.decode("utf-8")
            except UnicodeDecodeError as e:
                raise bad_bytes(f"byte {e.start + 1:,} of the line") from None
            yield text[:-1] if text.endswith("\r") else text


def _locate(source: Path) -> tuple[Path, Path] | None:
    """The dictd pair (index, data) ``source`` names, or None for a Ding file; refuses a path that is
    no file and a dictd file without its other half."""
    if not source.is_file():
        raise ArtifactError(f"--dictionary {source}: not a file (Debian: apt-get install trans-de-en puts Ding's file at "
                            f"/usr/share/trans/de-en; dict-freedict-eng-deu puts FreeDict's at "
                            f"/usr/share/dictd/freedict-eng-deu.index)")
    return dictd_pair(source)


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
        data = dictd_data(source, pair[1])
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
        data = dictd_data(source, data_path)
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
