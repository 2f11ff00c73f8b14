"""Publishing artifact folders without losing data: a folder is built out of sight and put in
place by renames (:func:`staged`, or :func:`staged_set` for several together), and never deletes
what a build did not write (:func:`check_replaceable`).  A publish writes a journal first, so a
build killed in the middle of one is rolled back by the next build: the old set comes back whole.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import inspect
import json
import logging
import os
import re
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from lexrag.errors import ArtifactError
from lexrag.io.outputs import PARAMS, check_makeable, lock_folder, owner_gone

__all__ = ["OWN_LEFTOVERS", "PARAMS_ONLY", "UNLISTED", "check_replaceable", "publishes", "staged", "staged_set"]

log = logging.getLogger(__name__)
JOURNAL = ".lexrag-publish-"  # the journal of a publish under way, beside the folders it replaces
# the names a publish gives: each old folder set aside, and its journal (the tag: pid and 8 random hex digits)
SET_ASIDE = re.compile(r"^\.(?P<name>.+)\.old-(?P<tag>\d+-[0-9a-f]{8})$")
JOURNAL_NAME = re.compile(r"^\.lexrag-publish-(?P<done>done-)?(?P<tag>\d+-[0-9a-f]{8})\.json$")


UNLISTED = frozenset({"llm_cache", "wheels"})  # artifacts whose params.json lists no files (see write_params' files)


PARAMS_ONLY = frozenset({"calibration"})  # artifacts whose params.json is all they hold (an empty file list)


_SAID: set[Path] = set()  # unreadable journals this process has warned about


def _delete(folder: Path) -> None:
    """Remove a replaced folder; one that was a link (an artifact folder linked from elsewhere) loses
    the link only, never what it points to."""
    if folder.is_symlink():
        with contextlib.suppress(OSError):
            folder.unlink()
    else:
        shutil.rmtree(folder, ignore_errors=True)


def _remove(leftover: Path) -> None:
    log.info("removing %s, left by a build that was killed or could not remove it", leftover)
    _delete(leftover)
    if os.path.lexists(leftover):
        warnings.warn(f"{leftover}, left by an earlier build, could not be removed (a file in it cannot be "
                      "deleted): remove it by hand")


@contextmanager
def _publish_lock(folder: Path) -> Iterator[None]:
    """Hold the publish lock of ``folder`` (an exclusive ``flock`` on the folder itself, released
    when the process ends, also when it is killed): one publish at a time, so every journal found
    while holding it is one a killed build left."""
    def held() -> None:  # said, then waited for: another build publishes there (seconds, as a rule)
        log.warning("%s: another build is publishing there; waiting for it to finish (stop it, or build into another "
                    "folder, if it never does)", folder)

    fd = lock_folder(folder, str(folder), held, "do not build into it from two processes at once")
    try:
        yield
    finally:
        os.close(fd)


def _recover(folder: Path) -> None:
    """Under the publish lock: finish or undo the publishes in ``folder`` that a killed build left
    half done, from their journals.  One killed while moving folders is rolled back (each old folder
    put back where it was, the new one that took its place removed), so the folder holds the whole
    old set again; one killed while removing the old folders finishes removing them; a journal torn
    before any folder was moved is removed.  A set-aside folder without a journal (a removal that
    failed, or a build of an earlier version) goes where its artifact is in place, else is put back."""
    from lexrag.errors import LexragError
    from lexrag.io.inputfiles import read_json_file

    entries = list(folder.iterdir())
    aside = {(m["tag"], m["name"]) for e in entries if (m := SET_ASIDE.match(e.name)) and e.is_dir() and not e.is_symlink()}
    kept = set()  # the tags of journals that cannot be read: their folders are left for the user
    for journal in sorted(e for e in entries if JOURNAL_NAME.match(e.name)):
        if journal.is_dir() or journal.is_symlink():  # a folder or link of the user's under a journal's name: not ours
            warnings.warn(f"{journal} has the name of a publish journal but is a folder or a link: left alone; rename it")
            continue
        m = JOURNAL_NAME.match(journal.name)
        tag, done = m["tag"], bool(m["done"])
        try:  # through the bounded reader: a FIFO or a damaged file is refused, not blocked on
            moved = read_json_file(journal)["moved"]
            if not isinstance(moved, list) or not all(isinstance(n, str) and n and "/" not in n and n not in (".", "..")
                                                      for n in moved):
                raise ValueError("a name that is no plain folder name")
        except (LexragError, OSError, ValueError, KeyError, TypeError):
            if any(t == tag for t, _ in aside):
                if journal not in _SAID:  # a build recovers before it builds and again before it publishes: said once
                    _SAID.add(journal)
                    warnings.warn(f"{journal}, the journal of a killed build's publish, cannot be read: look at the hidden "
                                  f"'.NAME.old-{tag}' folders in {folder} (the earlier artifacts), then remove it")
                kept.add(tag)
                continue
            moved = []  # torn before any folder was set aside: nothing to undo
        for name in moved:  # each old folder's hidden name follows from its artifact's name and the journal's tag
            old, dest = folder / f".{name}.old-{tag}", folder / name
            if (tag, name) not in aside:
                continue
            aside.discard((tag, name))
            if done:
                _remove(old)
                continue
            if os.path.lexists(dest):
                if dest.is_symlink() or not (dest / PARAMS).is_file():  # not a folder this publish moved in
                    warnings.warn(f"{old}, the earlier {name} set aside by a killed build, is kept: {dest} is not the "
                                  "artifact that build moved in; move one of them away")
                    kept.add(tag)  # the journal stays, and the folder with it, until the user decides
                    continue
                _remove(dest)
            os.replace(old, dest)
            warnings.warn(f"a build was killed while publishing: the earlier {dest} is put back")
        if tag not in kept:
            journal.unlink(missing_ok=True)
    for tag, name in sorted(aside):
        old, dest = folder / f".{name}.old-{tag}", folder / name
        if tag in kept or not (old / PARAMS).is_file():
            continue
        if os.path.lexists(dest):  # no journal says a publish set it aside: it may be the user's, so it is never deleted
            warnings.warn(f"{old} is named like an earlier {name} a build set aside, but no journal says so: left alone; "
                          "remove it by hand if it is one")
        else:
            os.replace(old, dest)
            warnings.warn(f"a build was killed while publishing: the earlier {dest} is put back")


def _sweep(dest: Path) -> None:
    """Remove staging and set-aside folders of ``dest`` left by builds that were killed (their
    process is gone), after putting back what a publish killed half way set aside (:func:`_recover`)."""
    with _publish_lock(dest.parent):
        _recover(dest.parent)
    for leftover in dest.parent.glob(f".{glob.escape(dest.name)}.building-*"):
        if owner_gone(leftover.name, f".{dest.name}.building-"):
            _remove(leftover)


@contextmanager
def staged(dest: str | Path) -> Iterator[Path]:
    """Build an artifact folder out of sight, then publish it.

    Yields a fresh folder beside ``dest`` (``.<name>.building-<pid>-<random>``); when the block
    ends without an exception it replaces ``dest`` (the old folder is moved aside first and removed
    after), otherwise it is removed and ``dest`` stays as it was.  So a failed or killed build never
    destroys the artifact already there, and a run never reads a half-written one (a killed build
    leaves only its staging folder, which the next build of the same artifact removes).
    """
    dest = Path(os.path.abspath(dest))  # "~/x" given quoted is a folder named "~" here: no library may expand it
    check_makeable(dest.parent)
    check_replaceable(dest)  # before the work: what the publish would refuse is refused now, not after an hour
    made = _to_make(dest.parent)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-{os.getpid()}-", dir=dest.parent))
    os.chmod(tmp, 0o755)
    try:
        yield tmp
        _replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(made)
        raise


def _to_make(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first: the folders a build makes."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


def _remove_empty(made: list[Path]) -> None:
    """Remove the folders of ``made`` that are empty, deepest first: a failed first build leaves no
    empty folder that looks like output."""
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


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
        outer = _read_params(dest / PARAMS) if (dest / PARAMS).is_file() else None
        listed = outer.get("files") if isinstance(outer, dict) else None
        # a folder whose files the artifact lists as its own is its part (bm25_en's index/, with its params.json)
        parts = {str(f).split("/", 1)[0] for f in listed if "/" in str(f)} if isinstance(listed, dict) else set()
        for entry in dest.iterdir():
            if (entry.is_dir() and not entry.name.startswith(".") and entry.name not in parts
                    and next(entry.rglob(PARAMS), None) is not None):
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
        known |= {PARAMS, "dataset-metadata.json"} | {f"{part}/{PARAMS}" for part in parts}
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
    from lexrag.io.inputfiles import read_json_file

    try:
        return read_json_file(path)
    except (LexragError, OSError):
        return None


def _replace_dir(src: Path, dest: Path) -> None:
    """Put folder ``src`` where ``dest`` is (the old ``dest`` renamed aside, then removed)."""
    _replace_many([(src, dest)])


def _replace_many(pairs: list[tuple[Path, Path]]) -> None:
    """Publish several folders (all in one parent folder) as one step: a journal naming the folders
    to be replaced is written first, every old folder is renamed aside, then every new one
    moved in, and the journal marked done before the old folders are removed.  When a rename fails
    the ones done are undone at once; when the process is killed, the next build reads the journal
    and does the same (:func:`_recover`).  So the destination holds the whole old set or the whole
    new one."""
    if not pairs:
        return
    folder = pairs[0][1].parent
    with _publish_lock(folder):
        _recover(folder)  # a publish killed before this one is undone first
        for src, dest in pairs:
            check_replaceable(dest, src)
            meta = dest / "dataset-metadata.json"  # a dataset folder rebuilt by a build that writes none (a notebook)
            if meta.is_file() and not meta.is_symlink() and not os.path.lexists(src / meta.name):
                shutil.copyfile(meta, src / meta.name)
        tag = f"{os.getpid()}-{os.urandom(4).hex()}"
        moves = [(dest, dest.with_name(f".{dest.name}.old-{tag}")) for _, dest in pairs if os.path.lexists(dest)]
        journal = folder / f"{JOURNAL}{tag}.json"
        if moves:
            try:
                journal.write_text(json.dumps({"moved": [dest.name for dest, _ in moves]}), encoding="utf-8")
            except BaseException:  # a full disk: nothing moved yet, and no torn journal left
                journal.unlink(missing_ok=True)
                raise
        moved_aside: list[tuple[Path, Path]] = []
        moved_in: list[tuple[Path, Path]] = []
        try:
            for dest, old in moves:
                os.replace(dest, old)
                moved_aside.append((dest, old))
            for src, dest in pairs:
                os.replace(src, dest)
                moved_in.append((src, dest))
            if moves:
                journal = journal.rename(folder / f"{JOURNAL}done-{tag}.json")
        except BaseException:
            for src, dest in reversed(moved_in):
                with contextlib.suppress(OSError):
                    os.replace(dest, src)
            for dest, old in reversed(moved_aside):
                with contextlib.suppress(OSError):
                    os.replace(old, dest)
            journal.unlink(missing_ok=True)
            raise
        for _, old in moved_aside:
            _delete(old)
            if os.path.lexists(old):  # a file in it cannot be deleted (immutable, another owner's): said, not left unseen
                warnings.warn(f"the replaced folder {old} could not be removed (a file in it cannot be deleted); the new "
                              f"one is in place: remove {old} by hand (the next build retries)")
        journal.unlink(missing_ok=True)


@contextmanager
def staged_set(out: str | Path) -> Iterator[Path]:
    """Build several artifacts together: yields a staging folder; when the block succeeds, every
    folder built in it replaces its namesake in ``out`` as one step (the others in ``out`` stay);
    when it fails, ``out`` is untouched.  So the artifacts of one build (a corpus and the indexes
    built over it) are published together.  The folders it made for ``out`` are removed again when
    they end empty (a failed first build, or one that built nothing)."""
    out = Path(os.path.abspath(out))  # "~/x" given quoted is a folder named "~" here: no library may expand it
    made = _to_make(out)
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
        _remove_empty(made)


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
