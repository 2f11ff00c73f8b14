"""Writing outputs without losing data: the checks every writer runs before any work (a folder
that can be made and written, a path that is no link, FIFO or device, an output that lies in no
artifact folder), files replaced whole or not at all, and artifact folders built out of sight and
published in one rename (:func:`staged`, :func:`staged_set`), never deleting what a build did not
write (:func:`check_replaceable`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import logging
import os
import shutil
import stat
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from lexrag.errors import ArtifactError, OutputError

__all__ = ["PARAMS", "check_outside_artifacts", "check_plain_output", "check_output_file", "check_makeable", "check_replaceable",
           "enclosing_artifact", "publishes", "replace_text", "staged", "staged_set"]

PARAMS = "params.json"
log = logging.getLogger(__name__)


UNLISTED = frozenset({"llm_cache", "wheels"})  # artifacts whose params.json lists no files (see write_params' files)
PARAMS_ONLY = frozenset({"calibration"})  # artifacts whose params.json is all they hold (an empty file list)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process its parent has not reaped yet (a zombie) still answers kill(0): it builds nothing
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _sweep(dest: Path) -> None:
    """Remove staging and set-aside folders of ``dest`` left by builds that were killed (their
    process is gone)."""
    for leftover in [*dest.parent.glob(f".{dest.name}.building-*"), *dest.parent.glob(f".{dest.name}.old-*")]:
        try:
            pid = int(leftover.name.rsplit("-", 2)[-2])
        except (ValueError, IndexError):
            continue
        if not _pid_alive(pid):
            log.info("removing %s, left by a build that was killed or could not remove it", leftover)
            shutil.rmtree(leftover, ignore_errors=True)
            if os.path.lexists(leftover):
                warnings.warn(f"{leftover}, left by an earlier build, could not be removed (a file in it cannot be "
                              "deleted): remove it by hand")


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


def check_replaceable(dest: str | Path, new: Path | None = None) -> None:
    """A folder a build may replace: absent, empty, or an artifact (a ``params.json``, or the
    ``progress.json`` of an embeddings build under way).  A folder of other files, hidden ones
    included (or a file), is refused by name, so a build never deletes what it did not write.
    ``new``, at publish time, is the folder about to take its place: where the old ``params.json``
    lists no files (damaged, or of an artifact that lists none but is not the one being built), the
    files the new build wrote are the ones it may replace, and any other file is refused."""
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
        doc = _read_params(dest / PARAMS)
        listed = doc.get("files") if isinstance(doc, dict) else None
        known = set(listed) if isinstance(listed, dict) else set()  # no list (a bare params.json): every other file is unknown
        kind = doc.get("artifact") if isinstance(doc, dict) else None
        if not isinstance(kind, str) or kind in UNLISTED:
            if new is None:  # damaged, or an artifact listing no files: what may go is known once the new build is there
                return
            new_doc = _read_params(Path(new) / PARAMS)
            if isinstance(kind, str) and isinstance(new_doc, dict) and new_doc.get("artifact") == kind:
                return  # the same unlisted artifact rebuilt (wheels, an LLM cache export): its files are its own
            known |= {q.relative_to(new).as_posix() for q in Path(new).rglob("*") if q.is_file()}
        known |= {PARAMS, "dataset-metadata.json"}
        extra = sorted(q.relative_to(dest).as_posix() for q in dest.rglob("*")
                       if q.is_file() and not any(_own_leftover(part) for part in q.relative_to(dest).parts)
                       and q.relative_to(dest).as_posix() not in known)
        if extra:
            raise ArtifactError(f"{dest} holds {len(extra)} file(s) its build did not write ({', '.join(extra[:3])}"
                                f"{' ...' if len(extra) > 3 else ''}); replacing the folder would delete them: move "
                                "them out first")


def _read_params(path: Path):
    """The JSON of a ``params.json`` through the one bounded reader (a FIFO or device is refused, not
    blocked on); None when it is missing or damaged."""
    from lexrag.errors import LexragError
    from lexrag.inputfiles import read_json_file

    try:
        return read_json_file(path)
    except (LexragError, OSError):
        return None


def _replace_dir(src: Path, dest: Path) -> None:
    """Put folder ``src`` where ``dest`` is (the old ``dest`` renamed aside, then removed)."""
    _replace_many([(src, dest)])


def _replace_many(pairs: list[tuple[Path, Path]]) -> None:
    """Publish several folders as one step: every old folder is renamed aside first, then every new
    one moved in; when any rename fails, the ones done are undone and the old folders restored, so
    the destination holds either the whole old set or the whole new one."""
    for src, dest in pairs:
        check_replaceable(dest, src)
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
        if os.path.lexists(old):  # a file in it cannot be deleted (immutable, another owner's): said, not left unseen
            warnings.warn(f"the replaced folder {old} could not be removed (a file in it cannot be deleted); the new one "
                          f"is in place: remove {old} by hand (the next build retries)")


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


def check_output_file(out: str | Path, what: str, inputs: dict | None = None, protected: dict | None = None,
                      example: str = "out.json", error: type[Exception] = OutputError) -> Path:
    """The one check of a file a command writes when its work is done, made before the work: a
    file name (not a folder, nor a name ending in ``/``), not a link, device or FIFO, in a folder
    that can be made and written, none of the ``inputs`` (option -> path) and inside none of the
    ``protected`` folders (option -> folder: what the run reads) nor any artifact folder.  Returns
    the resolved path."""
    if str(out).endswith(("/", os.sep)):
        raise error(f"{what} {out} names a folder; give a file name such as {Path(out) / example}")
    try:
        check_plain_output(out, what)
        p = Path(out).resolve()
        if p.is_dir():
            raise error(f"{what} {out} is a folder; give a file name such as {Path(out) / example}")
        check_makeable(Path(out).parent, f"{what} {out}: the folder")
        if p.is_file():  # an immutable file (or one on a read-only disk) would fail only when the work is done
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
            except OSError as e:  # a mere read-only mode (EACCES) does not stop the rename that replaces it
                if e.errno in (errno.EPERM, errno.EROFS):
                    raise error(f"{what} {out} exists and cannot be replaced ({e.strerror or e}); remove its lock "
                                "or choose another path") from None
    except (OutputError, ArtifactError) as e:
        if isinstance(e, error):
            raise
        raise error(str(e)) from None
    for name, path in (inputs or {}).items():
        if path and os.path.lexists(path) and Path(path).resolve() == p:
            raise error(f"{what} {out} is the {name} file: writing it would overwrite the input; choose another path")
    for name, folder in (protected or {}).items():
        if folder and Path(folder).is_dir() and Path(folder).resolve() in p.parents:
            raise error(f"{what} {out} lies inside the {name} folder {folder}, whose files this run reads; write it elsewhere")
    check_outside_artifacts(p.parent, f"{what} {out}: its folder", "write it elsewhere", error)
    return p


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
    except OSError as e:  # named by the file asked for, not the hidden temporary one beside it
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
