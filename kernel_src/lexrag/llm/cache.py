"""The LLM cache: every generation stored under a key of model, template, input and settings.

One SQLite file (``cache.sqlite``) in a cache folder, with ``params.json`` so that the path
resolver finds a shipped cache among Kaggle's inputs like any other artifact.  SQLite's own
locking makes it safe for two processes writing at once (a busy writer waits up to
:data:`BUSY_TIMEOUT_S`); a read-only cache (an attached Kaggle dataset, a folder this process
cannot write) is opened immutable and never written, not even by the close.  Every SQLite failure
(a damaged or truncated file, another schema, a lock held too long, a full disk) is an
:class:`ArtifactError` naming the file and what to do.  The key is
``sha256(model, template id, rendered messages, generation settings)``: a changed prompt file,
model name or setting is a new key, so a replay never answers a different question.  Each answer
also records the identity of the model that wrote it (``model_id``: a fingerprint of its folder,
:func:`lexrag.models.paths.model_fingerprint`): with a model attached, only that model's answers are
used, so a cache never answers for another model that happens to share a name; a replay without a
model uses the answers of the model the config names.  Answers of a cache written before the
identity was recorded replay only where no model is attached.
:func:`export_cache` writes one compact file (``VACUUM INTO``) for a Kaggle dataset.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from lexrag.artifacts import read_params, write_params
from lexrag.io.outputs import check_makeable
from lexrag.errors import ArtifactError
from lexrag.registry import ArtifactSpec, declare

__all__ = ["LLMCache", "cache_key", "export_cache", "ARTIFACT", "CACHE_FILE"]

ARTIFACT = "llm_cache"
CACHE_FILE = "cache.sqlite"
BUSY_TIMEOUT_S = 60.0  # how long a writer waits for another process's lock before giving up
log = logging.getLogger(__name__)

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
    created REAL NOT NULL,
    model_id TEXT NOT NULL DEFAULT ''
)
"""
COLUMNS = ("key", "model", "template", "input_sha256", "settings", "output", "prompt_tokens", "gen_tokens", "seconds", "created",
           "model_id")
OPTIONAL = ("model_id",)  # absent from caches written before it was recorded


def _problem(path: Path, e: BaseException) -> ArtifactError:
    """One line for a SQLite failure on the cache file ``path``: what happened and what to do."""
    msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return ArtifactError(f"{path}: locked by another process for more than {BUSY_TIMEOUT_S:.0f} s ({msg}); let the other "
                             "run finish, or give this run its own llm.cache_dir")
    if "no such column" in low or "no such table" in low or "columns but" in low or "other schema" in low:
        return ArtifactError(f"{path}: not an LLM cache of this lexrag version ({msg}); move it away or set llm.cache_dir "
                             "to another folder (a live run starts a new cache)")
    if "full" in low:
        return ArtifactError(f"{path}: the disk is full ({msg}); free space or set llm.cache_dir to another disk "
                             "(the answers stored so far are kept)")
    if "readonly" in low or "read-only" in low or "unable to open" in low:
        return ArtifactError(f"{path}: cannot be written here ({msg}); set llm.cache_dir to a writable folder, or list the "
                             "cache in llm.replay_dirs to read it")
    return ArtifactError(f"{path}: not a readable LLM cache ({msg}: damaged or truncated); move it away and let a live run "
                         "(llm.mode=live) build a new one, or attach an intact copy")


@contextlib.contextmanager
def _sqlite(path: Path) -> Iterator[None]:
    """SQLite errors (and an answer that cannot be encoded) on ``path`` as one-line ArtifactErrors."""
    try:
        yield
    except sqlite3.Error as e:
        raise _problem(path, e) from None


def _check_schema(con: sqlite3.Connection, path: Path) -> bool:
    """Refuse a SQLite file whose ``generations`` table lacks a column this version needs; whether
    it records the answering model's identity."""
    have = {row[1] for row in con.execute("PRAGMA table_info(generations)")}
    if not have:
        raise _problem(path, sqlite3.OperationalError("no such table: generations"))
    missing = [c for c in COLUMNS if c not in have and c not in OPTIONAL]
    if missing:
        raise _problem(path, sqlite3.OperationalError(f"other schema: no such column: {', '.join(missing)}"))
    return "model_id" in have


def _writable(folder: Path) -> bool:
    """This process may create files in ``folder`` (and write its cache file, when there is one)."""
    f = folder / CACHE_FILE
    return os.access(folder, os.W_OK) and (not f.exists() or os.access(f, os.W_OK))


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 file can hold) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cache_key(model: str, template_id: str, messages: list[dict], settings: Mapping) -> tuple[str, str]:
    """``(key, input_sha256)`` of one LLM call."""
    input_hash = hashlib.sha256(_canon(messages).encode("utf-8")).hexdigest()
    key = hashlib.sha256(_canon([model, template_id, input_hash, dict(settings)]).encode("utf-8")).hexdigest()
    return key, input_hash


def _inside_artifact(folder: Path) -> None:
    """Refuse a cache folder inside another artifact's folder: rebuilding that artifact replaces
    its folder, and the cache in it would go with it, unannounced."""
    from lexrag.io.outputs import check_outside_artifacts

    check_outside_artifacts(folder.resolve().parent, f"llm.cache_dir {folder}: its folder", "the cache would go with "
                            "it; set llm.cache_dir (or paths.working_dir) to a folder outside the artifacts")
    if folder.is_dir():  # an artifacts folder itself: the cache's params.json would make it an artifact, and block builds
        import itertools

        held = [d.name for d in itertools.islice(folder.iterdir(), 10_000)
                if d.is_dir() and not d.is_symlink() and (d / "params.json").is_file()]
        if held:
            from lexrag.errors import ArtifactError

            raise ArtifactError(f"llm.cache_dir {folder} holds artifact folders ({', '.join(sorted(held)[:5])}): it is an "
                                "artifacts folder, which the cache's params.json would turn into an artifact; give a folder "
                                f"of its own, such as {folder / 'llm_cache'}")


class LLMCache:
    """A writable cache folder plus read-only ones consulted first (shipped caches).  A cache
    folder this process cannot write is read like a shipped cache (immutable, with a warning):
    its answers replay, and answers generated in the run are kept for the run only."""

    def __init__(self, folder: str | Path | None, readonly: Iterable[str | Path] = (), set_aside: bool = False):
        """With ``set_aside`` a cache that cannot be opened (damaged, of another version, locked)
        is left out with a line in :attr:`set_aside` instead of failing the whole cache: a live
        model answers what it would have; when it is the run's own cache, this run's answers are
        kept in memory only."""
        self.folder = Path(folder) if folder else None
        self._rw: sqlite3.Connection | None = None
        self._ro: list[tuple[Path, sqlite3.Connection]] = []
        self._has_id: dict[int, bool] = {}  # id(connection) -> records model_id
        self._mem: dict[str, dict] = {}  # answers of a run whose own cache folder is read-only
        self.readonly_own = False
        self.set_aside: list[str] = []
        self.foreign = 0  # answers found but written by another model (or one of unknown identity)
        try:
            for f in readonly:
                try:
                    self._ro.append((Path(f), self._open_readonly(Path(f))))
                except ArtifactError as e:
                    if not set_aside:
                        raise
                    self.set_aside.append(f"LLM cache {f} set aside: {str(e).splitlines()[0]}")
            if self.folder is not None:
                try:
                    self._open_own(self.folder)
                except ArtifactError as e:
                    if not set_aside:
                        raise
                    if self._rw is not None:  # opened, then refused (a damaged file): never read or written
                        with contextlib.suppress(sqlite3.Error):
                            self._rw.close()
                        self._rw = None
                    self.set_aside.append(f"LLM cache {self.folder} set aside: {str(e).splitlines()[0]}; this run's answers "
                                          "are kept in memory only")
                    self.readonly_own = True
            for _, con in self._ro:
                self._has_id[id(con)] = any(r[1] == "model_id" for r in con.execute("PRAGMA table_info(generations)"))
        except BaseException:
            self.close(tidy=False)  # a cache that failed to open is not written to
            raise

    def _open_own(self, folder: Path) -> None:
        check_makeable(folder, "llm.cache_dir", writable=False)  # a read-only cache is replayed (below)
        _inside_artifact(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ArtifactError(f"llm.cache_dir {folder}: cannot be made ({e.strerror or e}); set llm.cache_dir to a "
                                "writable folder") from None
        path = folder / CACHE_FILE
        for name in (CACHE_FILE, f"{CACHE_FILE}-wal", f"{CACHE_FILE}-shm", f"{CACHE_FILE}-journal"):
            f = folder / name  # SQLite writes through a link: the cache would be written wherever it leads
            if f.is_symlink() or (os.path.lexists(f) and not f.is_file()):
                what = f"a link to {os.readlink(f)}" if f.is_symlink() else "not a plain file"
                raise ArtifactError(f"llm.cache_dir {folder}: its {name} is {what}; the cache is read and written only "
                                    "inside its folder: remove it (or set llm.cache_dir to another folder)")
        if not _writable(folder):
            if path.is_file() and (folder / "params.json").is_file():
                log.warning("LLM cache %s is read-only: its answers are replayed, answers generated in this run are not "
                            "stored (set llm.cache_dir to a writable folder to keep them)", folder)
                self._ro.append((folder, self._open_readonly(folder)))
                self.readonly_own = True
                return
            raise ArtifactError(f"llm.cache_dir {folder}: the folder is read-only and holds no cache; set llm.cache_dir "
                                "to a writable folder")
        try:
            if not (folder / "params.json").is_file():
                write_params(folder, ARTIFACT, "lexrag.llm.cache.LLMCache", {"format": "sqlite", "table": "generations"},
                             files=False)  # a live cache grows: its files are not fixed
            else:
                read_params(folder, ARTIFACT, verify=False)
        except OSError as e:
            raise ArtifactError(f"llm.cache_dir {folder}: its params.json cannot be written ({e.strerror or e}); set "
                                "llm.cache_dir to a writable folder") from None
        with _sqlite(path):
            self._rw = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._rw.execute("PRAGMA journal_mode=WAL")
            self._rw.execute(_SCHEMA)
            if not _check_schema(self._rw, path):  # an older cache of this run's own: from now on it records the model
                self._rw.execute("ALTER TABLE generations ADD COLUMN model_id TEXT NOT NULL DEFAULT ''")
            self._has_id[id(self._rw)] = True

    @staticmethod
    def _open_readonly(folder: Path) -> sqlite3.Connection:
        read_params(folder, ARTIFACT)
        path = folder / CACHE_FILE
        if not path.is_file():
            raise ArtifactError(f"LLM cache {folder} has no {CACHE_FILE}; rebuild it with a live run (llm.mode=live)")
        # a cache on read-only media (a Kaggle input) is one finished file: immutable, no locks,
        # nothing written; a local cache may still have its write-ahead log beside it, which a
        # plain read-only connection reads
        writable = _writable(folder)
        wal = folder / (CACHE_FILE + "-wal")
        if not writable and wal.is_file() and wal.stat().st_size > 0:
            raise ArtifactError(f"LLM cache {folder} was not closed cleanly (its write-ahead log is beside it); ship caches "
                                f"with build_datasets.py --only llm_cache --llm-cache DIR, which writes one finished file")
        journal = folder / (CACHE_FILE + "-journal")
        if journal.is_file() and journal.stat().st_size > 0:  # a writer killed mid-transaction: reading must roll it back
            raise ArtifactError(f"LLM cache {folder}: {journal.name} beside {CACHE_FILE} is the journal of a writer that was "
                                "killed mid-write, which a read-only replay cannot roll back: open the cache once with a live run "
                                "(llm.cache_dir set to it, llm.mode=live), which rolls it back (never delete the journal)")
        flags = "mode=ro" if writable else "mode=ro&immutable=1"
        with _sqlite(path):
            con = sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                _check_schema(con, path)
                con.execute("SELECT count(*) FROM generations").fetchone()
            except BaseException:
                con.close()
                raise
        return con

    def _cons(self) -> list[tuple[Path, sqlite3.Connection]]:
        out = [(f / CACHE_FILE, c) for f, c in self._ro]
        if self._rw is not None and self.folder is not None:
            out.append((self.folder / CACHE_FILE, self._rw))
        return out

    def describe(self) -> str:
        parts = [str(self.folder / CACHE_FILE)] if self.folder and not self.readonly_own else []
        parts += [str(f / CACHE_FILE) for f, _ in self._ro]
        return ", ".join(parts) or "no cache"

    def get(self, key: str, model_id: str | None = None) -> dict | None:
        """The answer stored under ``key``; with ``model_id`` (a model is attached) only one that
        model wrote."""
        for path, con in self._cons():
            ident = "model_id" if self._has_id.get(id(con)) else "''"
            with _sqlite(path):
                row = con.execute(
                    f"SELECT output, prompt_tokens, gen_tokens, seconds, {ident} FROM generations WHERE key = ?", (key,)
                ).fetchone()
            if row is not None:
                if model_id is not None and row[4] != model_id:
                    self.foreign += 1
                    continue
                return {"output": row[0], "prompt_tokens": row[1], "gen_tokens": row[2], "seconds": row[3]}
        hit = self._mem.get(key)
        if hit is not None and model_id is not None and hit.get("model_id", "") != model_id:
            return None
        return hit

    def put(self, key: str, model: str, template: str, input_sha256: str, settings: Mapping, output: str,
            prompt_tokens: int, gen_tokens: int, seconds: float, model_id: str = "") -> None:
        output = clean_text(output)
        if self._rw is None:
            if self.readonly_own:  # warned when opened: kept for this run only
                self._mem[key] = {"output": output, "prompt_tokens": int(prompt_tokens), "gen_tokens": int(gen_tokens),
                                  "seconds": float(seconds), "model_id": model_id}
                return
            raise ArtifactError("the LLM cache is read-only here: set llm.cache_dir to a writable folder")
        row = (key, clean_text(model), clean_text(template), input_sha256, clean_text(_canon(dict(settings))), output,
               int(prompt_tokens), int(gen_tokens), float(seconds), time.time(), model_id)
        with _sqlite(self.folder / CACHE_FILE):
            self._rw.execute(f"INSERT OR REPLACE INTO generations ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                             row)

    def __len__(self) -> int:
        n = len(self._mem)
        for path, con in self._cons():
            with _sqlite(path):
                n += con.execute("SELECT count(*) FROM generations").fetchone()[0]
        return n

    def close(self, tidy: bool = True) -> None:
        """Close every connection.  The write-ahead log is folded into the file first, so that the
        folder is one file again; that only tidies up (every answer is committed when it is put),
        so a failure there (a full or read-only disk, a reader holding the file) is a warning and
        loses nothing."""
        rw, cons = self._rw, [c for _, c in self._ro] + ([self._rw] if self._rw is not None else [])
        self._ro, self._rw = [], None
        if rw is not None and tidy:
            try:
                rw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as e:
                log.warning("LLM cache %s: its write-ahead log was not folded into the file on close (%s); the answers "
                            "are kept in it", self.folder, e)
        for con in cons:
            with contextlib.suppress(sqlite3.Error):
                con.close()


def export_cache(src: str | Path, dest: str | Path) -> Path:
    """Copy the cache folder ``src`` into ``dest`` as one compact SQLite file (no WAL side files),
    rows ordered by key so that the same entries give the same file content.  A damaged source is
    an :class:`ArtifactError` naming it; the destination is then left without a cache file."""
    src, dest = Path(src), Path(dest)
    read_params(src, ARTIFACT)
    if src.resolve() == dest.resolve():
        raise ArtifactError(f"export_cache: {src} is both source and destination; export into another folder")
    source = src / CACHE_FILE
    if not source.is_file():
        raise ArtifactError(f"LLM cache {src} has no {CACHE_FILE}; rebuild it with a live run (llm.mode=live)")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / CACHE_FILE
    out.unlink(missing_ok=True)
    cols = ", ".join(COLUMNS)
    con = sqlite3.connect(out.resolve().as_uri(), uri=True)
    try:
        con.execute(_SCHEMA)
        with _sqlite(source):
            con.execute("ATTACH DATABASE ? AS src", (f"{source.resolve().as_uri()}?mode=ro",))
            have = {row[1] for row in con.execute("PRAGMA src.table_info(generations)")}
            missing = [c for c in COLUMNS if c not in have]
            if missing:
                raise sqlite3.OperationalError(f"other schema: no such column: {', '.join(missing)}" if have
                                               else "no such table: generations")
            con.execute(f"INSERT INTO generations ({cols}) SELECT {cols} FROM src.generations ORDER BY key")
            con.commit()
            con.execute("DETACH DATABASE src")
        with _sqlite(out):
            con.execute("VACUUM")
            n = con.execute("SELECT count(*) FROM generations").fetchone()[0]
    except BaseException:
        con.close()
        out.unlink(missing_ok=True)
        raise
    con.close()
    write_params(dest, ARTIFACT, "lexrag.llm.cache.export_cache", {"format": "sqlite", "table": "generations"}, n_entries=n)
    return out


def build_cache_step(cfg, dest: str | Path, inputs) -> Path:
    """The ``llm_cache`` artifact's build step (:mod:`lexrag.pipeline.build`): the cache a live run
    filled (``inputs.llm_cache``), exported compact for replay."""
    return export_cache(inputs.llm_cache, dest)


SPEC = declare(ArtifactSpec(
    "llm_cache", switch="llm.enabled", needs_input="llm_cache", reads=("llm_cache",), in_build=False,
    dataset="lexrag-llm-cache", title="lexrag LLM cache (replay without a GPU)",
    description="every LLM generation of a live run (query variants), keyed by model, prompt template, input and settings; "
                "attached to a notebook with llm.mode=replay it reproduces the run without loading a model",
    builder="python build_datasets.py --only llm_cache --llm-cache CACHE_DIR --out OUT", build=build_cache_step,
    rebuild="a live run fills llm.cache_dir; build_datasets.py --only llm_cache --llm-cache DIR exports it "
            "(or attach the lexrag-llm-cache dataset)"))
