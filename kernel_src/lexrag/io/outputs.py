"""Writing outputs without losing data: the checks every writer runs before any work (a folder
that can be made and written, a path that is no link, FIFO or device, an output that lies in no
artifact folder) and files replaced whole or not at all.  Artifact folders are published by
:mod:`lexrag.io.publish`.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

from lexrag.errors import ArtifactError, OutputError

__all__ = ["PARAMS", "check_makeable", "claim_folder", "lock_folder", "check_name_room", "check_outside_artifacts", "check_output_file",
           "check_plain_output", "enclosing_artifact", "file_mode", "owner_gone", "pid_alive", "replace_text", "sweep_leftovers"]

PARAMS = "params.json"


def check_makeable(folder: str | Path, what: str = "", writable: bool = True) -> None:
    """Refuse, naming it, an output folder that cannot be made because a file stands there (the
    folder itself or one above it), or (with ``writable``) one where nothing can be written (a
    read-only disk or folder: tried by creating and removing a file in it, or in the nearest folder
    above it that exists); ``what`` names the parameter (``--out``, ``out_dir``).  The one check
    every writer runs before any work, so no work is done for an output that cannot be written."""
    if str(folder) == "-":  # the shell's name for standard output: a folder named "-" would be made instead
        raise OutputError(f"{what or 'the output folder'} -: the output is a folder, not standard output; give a folder name")
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

TMP_NAME_EXTRA = 32  # a whole-or-nothing write's temporary name beside the file: "." + NAME + ".<pid>-<8>.candidate"


def check_name_room(path: Path, what: str, error: type[Exception] = OutputError) -> None:
    """Refuse a file name too long to leave room for the temporary name it is written under."""
    there = next((d for d in (path.parent, *path.parent.parents) if d.is_dir()), Path("/"))
    try:
        limit = os.pathconf(there, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    n = len(os.fsencode(path.name))
    if n + TMP_NAME_EXTRA > limit:
        what = what if len(what) <= 160 else f"{what[:100]}...{what[-50:]} ({len(what)} characters)"
        if n > limit:  # as the system says it for any path
            raise error(f"{what}: a name in this path is longer than the file system allows ({limit} bytes a name); use a "
                        "shorter path")
        raise error(f"{what}: its name is {n} bytes; it is written whole under a temporary name beside it, up to "
                    f"{TMP_NAME_EXTRA} bytes longer, and this file system allows {limit}: choose a name of at most "
                    f"{limit - TMP_NAME_EXTRA} bytes")


def check_output_file(out: str | Path, what: str, inputs: dict | None = None, protected: dict | None = None,
                      example: str = "out.json", error: type[Exception] = OutputError) -> Path:
    """The one check of a file a command writes when its work is done, made before the work: a
    file name (not a folder, nor a name ending in ``/``), not a link, device or FIFO, in a folder
    that can be made and written, none of the ``inputs`` (option -> path) and inside none of the
    ``protected`` folders (option -> folder: what the run reads) nor any artifact folder.  Returns
    the resolved path."""
    if str(out).endswith(("/", os.sep)):
        if Path(str(out).rstrip("/" + os.sep)).is_file():  # "FILE/": the file itself meant, with a slash too many
            raise error(f"{what} {out} ends with a slash, but {str(out).rstrip('/' + os.sep)} is a file; give the file's "
                        "name without the slash (it is replaced), or a folder's name with a file name after it")
        raise error(f"{what} {out} names a folder; give a file name such as {Path(out) / example}")
    if str(out) == "-":  # the shell convention for standard output: a file named "-" would be written instead
        raise error(f"{what} -: the output is a file, not standard output; give a file name such as {example}")
    try:
        check_name_room(Path(os.path.abspath(out)), f"{what} {out}", error)  # first: a name past the limit fails every call
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not): a leftover named by a live process is its own.
    A number no process can have (0, negative, past the system's range) names none."""
    if not 0 < pid < 2**31:  # kill(0) and kill(-n) would ask about process groups
        return False
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


def owner_gone(name: str, prefix: str) -> bool:
    """Whether ``name``, written as ``PREFIX<pid>`` or ``PREFIX<pid>-...`` by a process of the kit, names a
    process that is gone; a name without a pid there is not the kit's (False)."""
    pid = name[len(prefix):].split("-")[0] if name.startswith(prefix) else ""
    return pid.isdigit() and not pid_alive(int(pid))


_CLAIMED: dict[str, int] = {}


def claim_folder(folder: str | Path, what: str, error: type[Exception] = OutputError) -> None:
    """Make ``folder`` (which exists) this process's output folder until the process ends: an
    exclusive ``flock`` on the folder, released when the process ends or is killed.  A run whose
    outputs are several files (metrics, per-query table, report) so never mixes its files with
    another run's.  While another process holds it, ``error`` names the folder; claiming it again
    in the same process does nothing.  A file system without locks is said in a warning."""
    key = os.path.realpath(folder)
    if key in _CLAIMED:
        return

    def held() -> None:
        raise error(f"{what} {folder}: another run writes its outputs there now (its files would mix with this "
                    "run's); give another folder, or wait for that run to end") from None

    _CLAIMED[key] = lock_folder(key, f"{what} {folder}", held, "do not write outputs there from two runs at once")


def lock_folder(folder: str | Path, name: str, held: Callable[[], None], unlocked: str) -> int:
    """An exclusive ``flock`` on ``folder`` itself, released when the returned descriptor is closed
    or the process ends (also when it is killed).  While another process holds it, ``held()`` runs:
    it raises to refuse, or says so and returns to wait for the lock.  A file system without locks
    is a warning naming ``name`` and saying ``unlocked`` (what to avoid), and nothing is locked."""
    import fcntl
    import warnings

    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            held()
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
    except OSError as e:
        warnings.warn(f"{name}: the file system refuses a lock ({e.strerror or e}); {unlocked}")
    return fd


def sweep_leftovers(path: Path, suffix: str) -> None:
    """Remove the hidden ``.NAME.<pid>-*<suffix>`` files beside ``path`` that a writer of it left
    when it was killed (its process is gone); a live writer's are left alone."""
    for left in path.parent.glob(f".{glob.escape(path.name)}.*-*{suffix}"):
        with contextlib.suppress(OSError):
            if owner_gone(left.name, f".{path.name}."):
                left.unlink()


def replace_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: into a hidden temporary file beside it,
    flushed to disk, then renamed over it.  On any failure (a full disk, an interrupt) the
    temporary file is removed and the file that was there stays as it was."""
    path = Path(path)
    check_plain_output(path)
    sweep_leftovers(path, ".tmp")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent)
    except OSError as e:  # named by the file asked for, not the temporary name the system refused
        raise OSError(e.errno, e.strerror, str(path)) from e
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
