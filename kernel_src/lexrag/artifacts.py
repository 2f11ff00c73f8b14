"""Artifact folders: files plus ``params.json`` (artifact, builder, params, version, doc count,
source hashes, and the size and sha256 of every file).  Loading checks the recorded params against
the config and refuses a mismatch with a message naming every differing field, and refuses a file
that is missing, truncated or replaced, naming it and the command that rebuilds it.  Builders
write into a staging folder that replaces the artifact only when complete (:func:`staged`).  No
pickle anywhere.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import logging
import os
import shutil
import stat
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from lexrag import __version__
from lexrag.errors import ArtifactError, OutputError, short

__all__ = ["ArtifactError", "check_outside_artifacts", "check_plain_output", "enclosing_artifact", "replace_text", "check_makeable", "check_replaceable", "write_params", "read_params", "check_params", "sha256_file", "file_table", "staged",
           "publishes", "staged_set", "reading", "rebuild_hint", "verify_files"]

PARAMS = "params.json"
log = logging.getLogger(__name__)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(dest: Path) -> None:
    """Remove staging and set-aside folders of ``dest`` left by builds that were killed (their
    process is gone)."""
    for leftover in [*dest.parent.glob(f".{dest.name}.building-*"), *dest.parent.glob(f".{dest.name}.old-*")]:
        try:
            pid = int(leftover.name.rsplit("-", 2)[-2])
        except (ValueError, IndexError):
            continue
        if not _pid_alive(pid):
            log.info("removing %s, left by a build that was killed", leftover)
            shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def staged(dest: str | Path) -> Iterator[Path]:
    """Build an artifact folder out of sight, then publish it.

    Yields a fresh folder beside ``dest`` (``.<name>.building-<pid>-<random>``); when the block
    ends without an exception it replaces ``dest`` (the old folder is moved aside first and removed
    after), otherwise it is removed and ``dest`` stays as it was.  So a failed or killed build never
    destroys the artifact already there, and a run never reads a half-written one (a killed build
    leaves only its staging folder, which the next build of the same artifact removes).
    """
    dest = Path(dest)
    check_makeable(dest.parent)
    check_replaceable(dest)  # before the work: what the publish would refuse is refused now, not after an hour
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-{os.getpid()}-", dir=dest.parent))
    os.chmod(tmp, 0o755)
    try:
        yield tmp
        _replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_makeable(folder: str | Path, what: str = "", writable: bool = True) -> None:
    """Refuse, naming it, an output folder that cannot be made because a file stands there (the
    folder itself or one above it), or (with ``writable``) one where nothing can be written (a
    read-only disk or folder: tried by creating and removing a file in it, or in the nearest folder
    above it that exists); ``what`` names the parameter (``--out``, ``out_dir``).  The one check
    every writer runs before any work, so no work is done for an output that cannot be written."""
    folder = Path(folder)
    label = f"{what} {folder}" if what else str(folder)
    for f in (folder, *folder.parents):
        if f.exists():
            if not f.is_dir():
                raise ArtifactError(f"{label}: {'it is a file' if f == folder else f'{f} is a file'}; give a folder "
                                    "(it is created when missing)")
            if writable:
                _check_writable(f, label)
            return


def _check_writable(folder: Path, label: str) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=".lexrag-write-test-", dir=folder)
    except OSError as e:
        raise ArtifactError(f"{label}: nothing can be written in {folder} ({e.strerror or e}); choose a writable "
                            "folder (nothing was done)") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _aside(dest: Path) -> Path:
    """Move ``dest`` beside itself under a hidden name (a rename in the same folder) and return it."""
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}-{os.urandom(4).hex()}")
    os.replace(dest, old)
    return old


# hidden names a killed build of ours can leave in an artifact folder, and the Finder's folder settings
OWN_LEFTOVERS = (".tokens-", ".lexrag-", ".DS_Store")


def _own_leftover(name: str) -> bool:
    """A name a lexrag build writes and may leave behind when killed (or macOS's ``.DS_Store``):
    only these go with a replaced folder unasked; any other name, hidden ones (``.git``,
    ``.notes.md``) too, is the user's."""
    return name.startswith(OWN_LEFTOVERS)


def check_replaceable(dest: str | Path) -> None:
    """A folder a build may replace: absent, empty, or an artifact (a ``params.json``, or the
    ``progress.json`` of an embeddings build under way).  A folder of other files, hidden ones
    included (or a file), is refused by name, so a build never deletes what it did not write."""
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ArtifactError(f"{dest} is a file; the build would replace it with a folder: move it away or choose another output folder")
    ours = any((dest / f).is_file() for f in ("params.json", "progress.json"))
    if dest.is_dir() and not ours and any(not _own_leftover(e.name) for e in dest.iterdir()):
        raise ArtifactError(f"{dest} holds files but no params.json, so it is no lexrag artifact and the build does not "
                            "replace it: move it away or choose another output folder")
    if dest.is_dir():  # another artifact inside this one (an LLM cache of a working folder set there) would go with it
        for entry in dest.iterdir():
            if entry.is_dir() and not entry.name.startswith(".") and next(entry.rglob(PARAMS), None) is not None:
                raise ArtifactError(f"{dest} holds another artifact, {entry}; replacing {dest} would delete it: move it out "
                                    "first (an LLM cache belongs outside the artifact folders: set llm.cache_dir or "
                                    "paths.working_dir elsewhere)")
    if dest.is_dir() and (dest / PARAMS).is_file():  # files the artifact's build did not write would go with it
        try:
            doc = json.loads((dest / PARAMS).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            doc = None
        listed = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(listed, dict):  # no list (a bare params.json): every other file is unknown
            listed = {}
        if isinstance(doc, dict) and doc.get("artifact") not in UNLISTED:  # unreadable: damaged, its rebuild is for it
            known = set(listed) | {PARAMS, "dataset-metadata.json"}
            extra = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")
                           if p.is_file() and not any(_own_leftover(part) for part in p.relative_to(dest).parts)
                           and p.relative_to(dest).as_posix() not in known)
            if extra:
                raise ArtifactError(f"{dest} holds {len(extra)} file(s) its build did not write ({', '.join(extra[:3])}"
                                    f"{' ...' if len(extra) > 3 else ''}); replacing the folder would delete them: move "
                                    "them out first")


def _replace_dir(src: Path, dest: Path) -> None:
    """Put folder ``src`` where ``dest`` is (the old ``dest`` renamed aside, then removed)."""
    _replace_many([(src, dest)])


def _replace_many(pairs: list[tuple[Path, Path]]) -> None:
    """Publish several folders as one step: every old folder is renamed aside first, then every new
    one moved in; when any rename fails, the ones done are undone and the old folders restored, so
    the destination holds either the whole old set or the whole new one."""
    for _, dest in pairs:
        check_replaceable(dest)
    moved_aside: list[tuple[Path, Path]] = []
    moved_in: list[tuple[Path, Path]] = []
    try:
        for _, dest in pairs:
            if dest.exists():
                moved_aside.append((dest, _aside(dest)))
        for src, dest in pairs:
            os.replace(src, dest)
            moved_in.append((src, dest))
    except BaseException:
        for src, dest in reversed(moved_in):
            with contextlib.suppress(OSError):
                os.replace(dest, src)
        for dest, old in reversed(moved_aside):
            with contextlib.suppress(OSError):
                os.replace(old, dest)
        raise
    for _, old in moved_aside:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_set(out: str | Path) -> Iterator[Path]:
    """Build several artifacts together: yields a staging folder; when the block succeeds, every
    folder built in it replaces its namesake in ``out`` as one step (the others in ``out`` stay);
    when it fails, ``out`` is untouched.  So the artifacts of one build are published together, and a
    corpus is never replaced while the indexes over the old corpus stay."""
    out = Path(out)
    created = not out.exists()
    check_makeable(out)
    out.mkdir(parents=True, exist_ok=True)
    _sweep(out / ".artifacts")
    tmp = Path(tempfile.mkdtemp(prefix=f"..artifacts.building-{os.getpid()}-", dir=out))
    try:
        yield tmp
        built = sorted(p for p in tmp.iterdir() if p.is_dir() and not p.name.startswith("."))
        _replace_many([(b, out / b.name) for b in built])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not any(out.iterdir()):  # a failed first build leaves no empty folder that looks like output
            out.rmdir()


def publishes(arg: str) -> Callable:
    """Decorator: the builder's folder argument ``arg`` is built through :func:`staged`."""

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            with staged(bound.arguments[arg]) as tmp:
                bound.arguments[arg] = tmp
                return fn(*bound.args, **bound.kwargs)

        return inner

    return wrap


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def rebuild_command(artifact: str) -> str:
    """The command that (re)builds ``artifact`` (the registry's entry)."""
    from lexrag import registry

    return registry.rebuild_command(artifact)


def rebuild_hint(artifact: str) -> str:
    """How to rebuild ``artifact``, for the messages that refuse a broken one."""
    return f"rebuild it: {rebuild_command(artifact)}"


def _hash_cache_file() -> Path:
    base = os.environ.get("LEXRAG_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                              os.path.join(os.path.expanduser("~"), ".cache"), "lexrag")
    return Path(base) / "sha256.json"


def _load_hash_cache() -> dict:
    """The hash cache, or what of it is well-formed: a cache that is not a plain file (a FIFO would
    block), not JSON or not a mapping, and entries that are not [size, mtime, sha256], are ignored
    (hashing again costs time, never a wrong answer: a digest that disagrees is checked on disk)."""
    path = _hash_cache_file()
    try:
        if not path.is_file():
            return {}
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) and not
                                                                                    isinstance(x, bool) for x in v[:2])
            and isinstance(v[2], str)}


def _save_hash_cache(cache: dict) -> None:
    path = _hash_cache_file()
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
    """sha256 of ``path``, from ``cache`` when its size and mtime are what they were when hashed."""
    st = path.stat()
    key = f"{st.st_dev}:{st.st_ino}"  # survives the rename that publishes a build
    hit = cache.get(key)
    if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
        return hit[2]
    digest = sha256_file(path)
    cache[key] = [st.st_size, st.st_mtime_ns, digest]
    return digest


def _files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != PARAMS
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def write_params(folder: str | Path, artifact: str, builder: str, params: Mapping[str, Any], files: bool = True,
                 **extra: Any) -> dict:
    """Write ``params.json`` last, atomically: a folder without it is an unfinished build.  With
    ``files`` (the default) it records every file's size and sha256, which loading checks."""
    folder = Path(folder)
    doc = {"artifact": artifact, "builder": builder, "version": __version__, "params": dict(params), **extra}
    if files:
        cache = _load_hash_cache()
        doc["files"] = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_hash(p, cache)}
                        for p in _files_of(folder)}
        _save_hash_cache(cache)
    replace_text(folder / PARAMS, json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True))
    return doc


def file_mode(path: str | Path) -> int:
    """The mode a file written in place of ``path`` gets: the old file's, else what the umask
    leaves of 0o666 (a temporary file is made 0o600, which would lock others out)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def enclosing_artifact(path: str | Path) -> Path | None:
    """The artifact folder (one holding a ``params.json``) that ``path`` is or lies in, None when
    none: a rebuild of that artifact replaces its folder, and whatever was written into it."""
    p = Path(path).resolve()
    return next((d for d in (p, *p.parents) if (d / PARAMS).is_file()), None)


def check_outside_artifacts(path: str | Path, what: str, fix: str, error: type[Exception] | None = None) -> None:
    """Refuse an output folder ``path`` that is or lies inside an artifact folder: a rebuild of
    that artifact replaces its folder, so what was written there would go with it (or block the
    rebuild).  ``what`` names the option (``--out``), ``fix`` says what to give instead."""
    inside = enclosing_artifact(path)
    if inside is not None:
        raise (error or ArtifactError)(f"{what} {path} is or lies inside the artifact folder {inside} (it has a "
                                       f"params.json), which a rebuild replaces: {fix}")


def check_plain_output(path: str | Path, what: str = "") -> None:
    """Refuse an output path that is a link, a device, a FIFO or a socket: a write that renames a
    new file over it would replace the device or the link itself (not what it points to), and
    opening a FIFO to write blocks until someone reads it."""
    path = Path(path)
    if path.is_symlink() or (os.path.lexists(path) and not path.is_file() and not path.is_dir()):
        raise OutputError(f"{what + ' ' if what else ''}{path} is a link, a device or a FIFO, which writing would replace "
                          "with a plain file; give the path of a plain file")


def replace_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: into a hidden temporary file beside it,
    flushed to disk, then renamed over it.  On any failure (a full disk, an interrupt) the
    temporary file is removed and the file that was there stays as it was."""
    path = Path(path)
    check_plain_output(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _check_entry(folder: Path, rel: Any, meta: Any, artifact: str) -> None:
    """Refuse a ``files`` entry of params.json that is not a file name inside ``folder``: an absolute
    path, a ``..``, a backslash or drive, or a link out of the folder would make loading stat, open and
    hash a file elsewhere (and its messages tell that file's size)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("size"), int) or isinstance(meta.get("size"), bool) \
            or not isinstance(meta.get("sha256"), str):
        raise ArtifactError(f"{folder / PARAMS}: the entry of {str(rel)[:80]!r} has no valid size and sha256 (damaged or "
                            f"edited); {rebuild_hint(artifact)}")
    ok = isinstance(rel, str) and rel and "\\" not in rel and "\x00" not in rel
    parts = rel.split("/") if ok else []
    ok = ok and not rel.startswith("/") and ":" not in parts[0] and all(p not in ("", ".", "..") for p in parts)
    if ok:
        real, root = os.path.realpath(folder / rel), os.path.realpath(folder)
        ok = real.startswith(root + os.sep)
    if not ok:
        shown = repr(rel)[:80] if isinstance(rel, str) else type(rel).__name__
        raise ArtifactError(f"{folder / PARAMS}: its file list names {shown}, which is not a file inside the artifact folder "
                            f"(damaged or tampered with); nothing outside {folder} is read; {rebuild_hint(artifact)}")


UNLISTED = frozenset({"llm_cache", "wheels"})  # artifacts whose params.json lists no files (see write_params' files)
PARAMS_ONLY = frozenset({"calibration"})  # artifacts whose params.json is all they hold (an empty file list)


def _link_out(folder: str | Path) -> Path | None:
    """The first entry under ``folder`` that is a link leading out of it (None: there is none)."""
    root = os.path.realpath(folder)
    return next((e for e in Path(folder).rglob("*") if e.is_symlink() and not os.path.realpath(e).startswith(root + os.sep)),
                None)


def _no_links_out(folder: Path, artifact: str) -> None:
    """Refuse an artifact folder (one whose files are not listed) holding a link that leads out of it."""
    entry = _link_out(folder)
    if entry is not None:
        raise ArtifactError(f"{entry}: a link out of the artifact folder {folder}; nothing outside it is read; "
                            f"{rebuild_hint(artifact)}")


def verify_files(folder: Path, doc: dict) -> None:
    """Refuse an artifact whose files are not the ones its build recorded (missing, another size,
    other contents), naming the file and the command that rebuilds it.  Contents are hashed once per
    file version (cached by path, size and mtime), so a 2.47M-document artifact costs a full read
    only the first time."""
    files = doc.get("files")
    artifact = doc.get("artifact", "?")
    if not isinstance(files, dict):
        if artifact in UNLISTED:  # a live LLM cache grows; the wheels are hashed by the manifest
            _no_links_out(folder, artifact)
            return
        raise ArtifactError(f"{folder / PARAMS}: records no list of its files, so they cannot be checked (damaged, "
                            f"tampered with, or built by a lexrag before files were recorded); {rebuild_hint(artifact)}")
    if not files and artifact not in PARAMS_ONLY:  # every other build records the files it wrote
        raise ArtifactError(f"{folder / PARAMS}: its list of files is empty, so none could be checked (damaged or tampered "
                            f"with); {rebuild_hint(artifact)}")
    for rel, meta in files.items():  # checked before any file is looked at: nothing outside the folder is touched
        _check_entry(folder, rel, meta, artifact)
    cache = _load_hash_cache()
    dirty = False
    try:
        for rel, meta in sorted(files.items()):
            p = folder / rel
            try:
                os.lstat(p)
            except FileNotFoundError:
                pass
            except OSError as e:  # a name too long for the file system, a component that is a file
                raise ArtifactError(f"{folder / PARAMS}: its file list names {rel[:80]!r}, which cannot be looked up "
                                    f"({e.strerror}; damaged or tampered with); {rebuild_hint(artifact)}") from None
            if not p.is_file():
                what = ("a folder" if p.is_dir() else "a FIFO, socket or device" if os.path.lexists(p) and not p.is_symlink()
                        else "a link that leads to no file" if p.is_symlink() else None)
                if what:
                    raise ArtifactError(f"{p}: {what} where artifact {artifact!r} has a file; {rebuild_hint(artifact)}")
                raise ArtifactError(f"{p}: missing from artifact {artifact!r} (it was there when it was built); {rebuild_hint(artifact)}")
            size = p.stat().st_size
            if size != meta.get("size"):
                raise ArtifactError(f"{p}: {size} bytes, but {meta.get('size')} when artifact {artifact!r} was built "
                                    f"(truncated or replaced); {rebuild_hint(artifact)}")
            st = p.stat()
            old = cache.get(f"{st.st_dev}:{st.st_ino}")
            digest = file_hash(p, cache)
            dirty = dirty or cache.get(f"{st.st_dev}:{st.st_ino}") != old
            if digest != meta.get("sha256") and old is not None:  # the cache may be what is wrong: read the file
                cache.pop(f"{st.st_dev}:{st.st_ino}", None)
                digest, dirty = file_hash(p, cache), True
            if digest != meta.get("sha256"):
                raise ArtifactError(f"{p}: its contents are not the ones artifact {artifact!r} was built with "
                                    f"(sha256 differs: replaced by another build?); {rebuild_hint(artifact)}")
    finally:
        if dirty:
            _save_hash_cache(cache)


@contextmanager
def reading(artifact: str, folder: str | Path) -> Iterator[None]:
    """Turn any failure to read an artifact's files (a truncated parquet, a damaged array, a
    missing key) into an :class:`ArtifactError` naming the folder and the command that rebuilds it."""
    try:
        yield
    except ArtifactError:
        raise
    except (OSError, ValueError, KeyError, IndexError, EOFError, TypeError, AttributeError, RecursionError) as e:
        first = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        raise ArtifactError(f"artifact {artifact!r} at {folder} cannot be read ({first}); {rebuild_hint(artifact)}") from e


def read_params(folder: str | Path, artifact: str, verify: bool = True) -> dict:
    """``params.json`` of artifact ``artifact`` in ``folder``; with ``verify`` also every recorded
    file checked (:func:`verify_files`).  Any problem is an :class:`ArtifactError` that names the
    file and how to rebuild it."""
    folder = Path(folder)
    path = folder / PARAMS
    if not folder.is_dir():
        raise ArtifactError(f"artifact {artifact!r} not found: {folder} is not a folder (make it: {rebuild_command(artifact)}; "
                            "or attach its Kaggle dataset)")
    if not path.is_file():
        raise ArtifactError(f"artifact {artifact!r} at {folder} has no {PARAMS}: the build did not finish; {rebuild_hint(artifact)}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ArtifactError(f"{path}: not valid JSON ({str(e)[:200] or type(e).__name__}); {rebuild_hint(artifact)}") from None
    if not isinstance(doc, dict):
        raise ArtifactError(f"{path}: not a params object (a JSON {type(doc).__name__}); {rebuild_hint(artifact)}")
    if doc.get("artifact") != artifact:
        got = doc.get("artifact")
        what = (f"says artifact {got!r}" if isinstance(got, str)
                else f"has artifact {short(got)}, not a name" if "artifact" in doc else "names no artifact")
        raise ArtifactError(f"{path}: {what}, but this folder is read as {artifact!r}: a folder of another artifact was put or "
                            f"attached in its place; give the {artifact!r} artifact's folder there ({rebuild_hint(artifact)})")
    if not isinstance(doc.get("params", {}), dict):
        raise ArtifactError(f"{path}: 'params' is not an object; {rebuild_hint(artifact)}")
    if verify:
        verify_files(folder, doc)
    return doc


def check_params(folder: str | Path, artifact: str, expected: Mapping[str, Any]) -> dict:
    """Read ``params.json`` and refuse when any expected param differs; names every difference."""
    doc = read_params(folder, artifact)
    have = doc.get("params", {})
    diffs = [f"{k}: artifact has {have.get(k)!r}, config wants {v!r}" for k, v in expected.items() if have.get(k) != v]
    if diffs:
        raise ArtifactError(
            f"artifact {artifact!r} at {folder} was built with a different config; rebuild it or change the config:\n  "
            + "\n  ".join(diffs)
        )
    return doc


def file_table(folder: str | Path) -> list[dict]:
    """Every file under ``folder`` with size and sha256, sorted by relative path."""
    folder = Path(folder)
    rows = []
    out = _link_out(folder)
    if out is not None:
        raise ArtifactError(f"{out}: a link out of {folder}; nothing outside it is read or listed: replace the link "
                            "with the file, or rebuild the folder")
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != "dataset-metadata.json":
            rows.append({"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size, "sha256": sha256_file(p)})
    return rows
