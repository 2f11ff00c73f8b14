"""The LLM cache: every generation stored under a key of model, template, input and settings.

One SQLite file (``cache.sqlite``) in a cache folder, with ``params.json`` so that the path
resolver finds a shipped cache among Kaggle's inputs like any other artifact.  SQLite's own
locking makes it safe for two processes writing at once (a busy writer waits up to 60 s);
a read-only cache (an attached Kaggle dataset) is opened immutable.  The key is
``sha256(model, template id, rendered messages, generation settings)``: a changed prompt file,
model name or setting is a new key, so a replay never answers a different question.
:func:`export_cache` writes one compact file (``VACUUM INTO``) for a Kaggle dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Mapping

from lexrag.artifacts import read_params, write_params
from lexrag.errors import ArtifactError

__all__ = ["LLMCache", "cache_key", "export_cache", "ARTIFACT", "CACHE_FILE"]

ARTIFACT = "llm_cache"
CACHE_FILE = "cache.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    template TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    settings TEXT NOT NULL,
    output TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    gen_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL
)
"""


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cache_key(model: str, template_id: str, messages: list[dict], settings: Mapping) -> tuple[str, str]:
    """``(key, input_sha256)`` of one LLM call."""
    input_hash = hashlib.sha256(_canon(messages).encode("utf-8")).hexdigest()
    key = hashlib.sha256(_canon([model, template_id, input_hash, dict(settings)]).encode("utf-8")).hexdigest()
    return key, input_hash


class LLMCache:
    """A writable cache folder plus read-only ones consulted first (shipped caches)."""

    def __init__(self, folder: str | Path | None, readonly: Iterable[str | Path] = ()):
        self.folder = Path(folder) if folder else None
        self._rw: sqlite3.Connection | None = None
        self._ro: list[tuple[Path, sqlite3.Connection]] = []
        for f in readonly:
            self._ro.append((Path(f), self._open_readonly(Path(f))))
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not (self.folder / "params.json").is_file():
                write_params(self.folder, ARTIFACT, "lexrag.llm.cache.LLMCache", {"format": "sqlite", "table": "generations"},
                             files=False)  # a live cache grows: its files are not fixed
            else:
                read_params(self.folder, ARTIFACT, verify=False)
            self._rw = sqlite3.connect(self.folder / CACHE_FILE, timeout=60.0, isolation_level=None)
            self._rw.execute("PRAGMA journal_mode=WAL")
            self._rw.execute(_SCHEMA)

    @staticmethod
    def _open_readonly(folder: Path) -> sqlite3.Connection:
        read_params(folder, ARTIFACT)
        path = folder / CACHE_FILE
        if not path.is_file():
            raise ArtifactError(f"LLM cache {folder} has no {CACHE_FILE}; rebuild it with a live run (llm.mode=live)")
        # a cache on read-only media (a Kaggle input) is one finished file: immutable, no locks;
        # a local cache may still have its write-ahead log beside it, which a plain read-only
        # connection reads
        writable = os.access(folder, os.W_OK)
        wal = folder / (CACHE_FILE + "-wal")
        if not writable and wal.is_file() and wal.stat().st_size > 0:
            raise ArtifactError(f"LLM cache {folder} was not closed cleanly (its write-ahead log is beside it); ship caches "
                                f"with build_datasets.py --only llm_cache --llm-cache DIR, which writes one finished file")
        flags = "mode=ro" if writable else "mode=ro&immutable=1"
        try:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True)
            con.execute("SELECT count(*) FROM generations").fetchone()
        except sqlite3.DatabaseError as e:
            raise ArtifactError(f"{path}: not a readable LLM cache ({e}); rebuild it with a live run") from e
        return con

    def describe(self) -> str:
        parts = [str(self.folder / CACHE_FILE)] if self.folder else []
        parts += [str(f / CACHE_FILE) for f, _ in self._ro]
        return ", ".join(parts) or "no cache"

    def get(self, key: str) -> dict | None:
        cons = [c for _, c in self._ro] + ([self._rw] if self._rw is not None else [])
        for con in cons:
            row = con.execute(
                "SELECT output, prompt_tokens, gen_tokens, seconds FROM generations WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                return {"output": row[0], "prompt_tokens": row[1], "gen_tokens": row[2], "seconds": row[3]}
        return None

    def put(self, key: str, model: str, template: str, input_sha256: str, settings: Mapping, output: str,
            prompt_tokens: int, gen_tokens: int, seconds: float) -> None:
        if self._rw is None:
            raise ArtifactError("the LLM cache is read-only here: set llm.cache_dir to a writable folder")
        self._rw.execute(
            "INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, model, template, input_sha256, _canon(dict(settings)), output, int(prompt_tokens), int(gen_tokens),
             float(seconds), time.time()),
        )

    def __len__(self) -> int:
        cons = [c for _, c in self._ro] + ([self._rw] if self._rw is not None else [])
        return sum(c.execute("SELECT count(*) FROM generations").fetchone()[0] for c in cons)

    def close(self) -> None:
        if self._rw is not None:
            self._rw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for con in [c for _, c in self._ro] + ([self._rw] if self._rw is not None else []):
            con.close()
        self._ro, self._rw = [], None


def export_cache(src: str | Path, dest: str | Path) -> Path:
    """Copy the cache folder ``src`` into ``dest`` as one compact SQLite file (no WAL side files),
    rows ordered by key so that the same entries give the same file content."""
    src, dest = Path(src), Path(dest)
    read_params(src, ARTIFACT)
    if src.resolve() == dest.resolve():
        raise ArtifactError(f"export_cache: {src} is both source and destination; export into another folder")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / CACHE_FILE
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out.resolve().as_uri(), uri=True)
    con.execute(_SCHEMA)
    con.execute("ATTACH DATABASE ? AS src", (f"{(src / CACHE_FILE).resolve().as_uri()}?mode=ro",))
    con.execute("INSERT INTO generations SELECT * FROM src.generations ORDER BY key")
    con.commit()
    con.execute("DETACH DATABASE src")
    con.execute("VACUUM")
    n = con.execute("SELECT count(*) FROM generations").fetchone()[0]
    con.close()
    write_params(dest, ARTIFACT, "lexrag.llm.cache.export_cache", {"format": "sqlite", "table": "generations"}, n_entries=n)
    return out
