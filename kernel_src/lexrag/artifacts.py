"""Artifact folders: files plus ``params.json`` (artifact, builder, params, version, doc count,
source hashes).  Loading checks the recorded params against the config and refuses a mismatch
with a message naming every differing field.  No pickle anywhere.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from lexrag import __version__
from lexrag.errors import ArtifactError

__all__ = ["ArtifactError", "write_params", "read_params", "check_params", "sha256_file", "file_table", "staged",
           "publishes"]

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
    """Remove staging folders of ``dest`` left by builds that were killed (their process is gone)."""
    for leftover in dest.parent.glob(f".{dest.name}.building-*"):
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
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-{os.getpid()}-", dir=dest.parent))
    os.chmod(tmp, 0o755)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        os.replace(dest, old / dest.name)
    os.replace(tmp, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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


def write_params(folder: str | Path, artifact: str, builder: str, params: Mapping[str, Any], **extra: Any) -> dict:
    """Write ``params.json`` last, atomically: a folder without it is an unfinished build."""
    folder = Path(folder)
    doc = {"artifact": artifact, "builder": builder, "version": __version__, "params": dict(params), **extra}
    tmp = folder / (PARAMS + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / PARAMS)
    return doc


def read_params(folder: str | Path, artifact: str) -> dict:
    folder = Path(folder)
    path = folder / PARAMS
    if not folder.is_dir():
        raise ArtifactError(f"artifact {artifact!r} not found: {folder} is not a folder (build it with `python -m lexrag build` or build_datasets.py, or attach its Kaggle dataset)")
    if not path.is_file():
        raise ArtifactError(f"artifact {artifact!r} at {folder} has no {PARAMS}: the build did not finish; rebuild it")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ArtifactError(f"{path}: not valid JSON ({e})") from e
    if doc.get("artifact") != artifact:
        raise ArtifactError(f"{path}: is artifact {doc.get('artifact')!r}, expected {artifact!r}")
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
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != "dataset-metadata.json":
            rows.append({"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size, "sha256": sha256_file(p)})
    return rows
