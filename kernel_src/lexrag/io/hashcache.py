"""The sha256 of artifact files, and a cache of them: an artifact's load checks every file against
the digest its params.json records, and a file hashed once is not hashed again while its size,
mtime and ctime stay (a cache in ``LEXRAG_CACHE_DIR``, else ``~/.cache/lexrag``: it only saves
time, a damaged one costs a rehash)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

from lexrag.io.outputs import enclosing_artifact

__all__ = ["sha256_file", "file_hash", "load_hash_cache", "save_hash_cache", "hash_cache_file"]


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_cache_file() -> Path:
    base = os.environ.get("LEXRAG_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                              os.path.join(os.path.expanduser("~"), ".cache"), "lexrag")
    return Path(base) / "sha256.json"


def load_hash_cache() -> dict:
    """The hash cache, or what of it is well-formed: a cache that is not a plain file (a FIFO would
    block), not JSON or not a mapping, and entries that are not [size, mtime, sha256], are ignored
    (hashing again costs time, never a wrong answer: a digest that disagrees is checked on disk)."""
    path = hash_cache_file()
    try:
        if not path.is_file():
            return {}
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, list) and len(v) == 4 and all(isinstance(x, int) and not
                                                                                    isinstance(x, bool) for x in v[:2] + v[3:])
            and isinstance(v[2], str)}


def save_hash_cache(cache: dict) -> None:
    path = hash_cache_file()
    inside = enclosing_artifact(path.parent)
    if inside is not None:  # a rebuild would replace the cache, or refuse a file it did not write; the cache only saves time
        warnings.warn(f"LEXRAG_CACHE_DIR {path.parent} is or lies inside the artifact folder {inside}, which a rebuild "
                      "replaces: file hashes are not cached there (each load hashes again); set LEXRAG_CACHE_DIR to a "
                      "folder outside the artifacts")  # Python shows the same warning once a process
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sha256-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(cache, f)
        os.replace(tmp, path)
    except OSError:  # a read-only home: hash again next time
        pass


def file_hash(path: Path, cache: dict) -> str:
    """sha256 of ``path``, from ``cache`` when its size, mtime and ctime are what they were when
    hashed (the ctime too: an edit whose mtime was put back, ``touch -r``, still moves it)."""
    st = path.stat()
    key = f"{st.st_dev}:{st.st_ino}"  # survives the rename that publishes a build
    hit = cache.get(key)
    if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns and hit[3] == st.st_ctime_ns:
        return hit[2]
    digest = sha256_file(path)
    cache[key] = [st.st_size, st.st_mtime_ns, digest, st.st_ctime_ns]
    return digest
