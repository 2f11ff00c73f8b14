"""Opening files lexrag did not write (a Kaggle input, a metrics file, a model's config.json) in
one place: only regular files are opened (a FIFO would block the run for ever, a device would
never end), a file larger than its bound is refused before it is read, and JSON nested deeper than
Python can parse is an error naming the file, not a traceback."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from lexrag.errors import ConfigError

__all__ = ["read_text_file", "read_json_file", "MAX_JSON_BYTES"]

MAX_JSON_BYTES = 64 * 2**20  # params.json, config.json, metrics.json: kilobytes in practice


def read_text_file(path: str | Path, error: type[Exception] = ConfigError, max_bytes: int = MAX_JSON_BYTES,
                   what: str = "") -> str:
    """The UTF-8 text of a regular file (a BOM tolerated); anything else is ``error`` naming it."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    try:
        st = os.stat(path)  # follows a link; a link loop is ELOOP
    except OSError as e:
        raise error(f"{label}: cannot be read ({e.strerror or type(e).__name__})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise error(f"{label}: is {kind}, not a file; give a file")
    if st.st_size > max_bytes:
        raise error(f"{label}: {st.st_size:,} bytes, more than the {max_bytes:,} such a file may have; give the right file")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise error(f"{label}: cannot be read ({e.strerror or type(e).__name__})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{label}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None


def read_json_file(path: str | Path, error: type[Exception] = ConfigError, max_bytes: int = MAX_JSON_BYTES,
                   what: str = "", last_wins: bool = False) -> Any:
    """A JSON file read by :func:`read_text_file`; invalid or too deeply nested JSON is ``error``.
    A key given twice in one object is refused, unless ``last_wins`` (the last kept, as Python's
    and JavaScript's parsers keep it): for a file whose content another check covers (a params.json
    and its digest), where the reading every standard parser gives is the one to accept."""
    text = read_text_file(path, error, max_bytes, what)

    def unique(pairs):
        keys = [k for k, _ in pairs]
        twice = next((k for k in keys if keys.count(k) > 1), None) if len(keys) != len(set(keys)) else None
        if twice is not None:  # JSON keeps the last silently; which one was meant cannot be known
            raise ValueError(f"key {twice!r} appears twice in one object")
        return dict(pairs)

    try:
        return json.loads(text) if last_wins else json.loads(text, object_pairs_hook=unique)
    except RecursionError:
        raise error(f"{f'{what} ' if what else ''}{path}: JSON nested too deeply to read") from None
    except ValueError as e:
        raise error(f"{f'{what} ' if what else ''}{path}: not valid JSON ({str(e)[:120]})") from None
