"""Artifact folders: files plus ``params.json`` (artifact, builder, params, version, doc count,
source hashes, the size and sha256 of every file, and a sha256 of params.json's own content).
Loading checks the recorded params against the config and refuses a mismatch with a message naming
every differing field, refuses a params.json whose fields were edited after the build, and refuses a
file that is missing, truncated or replaced, naming it and the command that rebuilds it.  Builders
write into a staging folder that replaces the artifact only when complete
(:func:`lexrag.io.publish.staged`).  No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from lexrag import __version__
from lexrag.errors import ArtifactError, ArtifactMissing, short
from lexrag.io.hashcache import file_hash, load_hash_cache, save_hash_cache, sha256_file
from lexrag.io.inputfiles import read_json_file
from lexrag.io.outputs import PARAMS, replace_text
from lexrag.io.publish import PARAMS_ONLY, UNLISTED
from lexrag.registry import rebuild_command

__all__ = ["ArtifactError", "ParamsEdited", "PARAMS", "DIGEST", "write_params", "read_params", "check_params",
           "file_table", "reading", "rebuild_hint", "verify_files", "params_digest", "seal", "corpus_id",
           "check_corpus_id", "read_params_json", "digest_stale"]
log = logging.getLogger(__name__)

# the field of params.json holding the sha256 of the rest of the document: the file hashes cover
# every other file, this covers params.json itself (an edited signals list or BM25 setting, the file
# hashes re-recorded or not, is refused)
DIGEST = "params_sha256"
_UNSEALED_SAID: set[str] = set()  # params.json files without a digest already logged (once each per process)


class ParamsEdited(ArtifactError):
    """A params.json whose content is not the one its build wrote (its digest differs): the folder
    is still that artifact's (its name was checked first), so a build of it may replace it."""


def params_digest(doc: Mapping[str, Any]) -> str:
    """sha256 of ``doc`` without its :data:`DIGEST` field, as canonical JSON (keys sorted, no
    whitespace, UTF-8): the same for a document however it was indented or its keys ordered."""
    rest = {k: v for k, v in doc.items() if k != DIGEST}
    blob = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def digest_stale(doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` records a :data:`DIGEST` that is not the digest of its content (a field
    edited after the build); a document without one is not stale (it cannot be checked)."""
    if DIGEST not in doc:
        return False
    try:
        got = params_digest(doc)
    except (ValueError, TypeError, RecursionError):  # nesting too deep to serialise: not a document a build wrote
        return True
    want = doc[DIGEST]
    return not isinstance(want, str) or got != want.lower()


def read_params_json(path: str | Path) -> Any:
    """The one reading of a params.json, wherever one is read (loading an artifact, choosing among
    attached copies): UTF-8 with or without a byte-order mark, a key given twice keeps the last (as
    Python's and JavaScript's parsers read it; the digest, of the content as read, then tells whether
    that is what the build wrote).  Not a file, too large or not JSON is an :class:`ArtifactError`
    naming the file (without the rebuild command: the caller knows the artifact)."""
    return read_json_file(path, ArtifactError, last_wins=True)


def seal(doc: dict) -> dict:
    """``doc`` (a params document as read back from JSON) with its :data:`DIGEST` set to the digest
    of the rest, as :func:`write_params` writes it."""
    doc[DIGEST] = params_digest(doc)
    return doc


def rebuild_hint(artifact: str) -> str:
    """How to rebuild ``artifact``, for the messages that refuse a broken one."""
    return f"rebuild it: {rebuild_command(artifact)}"


def _files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != PARAMS
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def write_params(folder: str | Path, artifact: str, builder: str, params: Mapping[str, Any], files: bool = True,
                 **extra: Any) -> dict:
    """Write ``params.json`` last, atomically: a folder without it is an unfinished build.  With
    ``files`` (the default) it records every file's size and sha256, which loading checks; always
    the :data:`DIGEST` of its own content, so that loading refuses a field edited afterwards.
    Returns the document as written."""
    folder = Path(folder)
    doc = {"artifact": artifact, "builder": builder, "version": __version__, "params": dict(params), **extra}
    doc.pop(DIGEST, None)  # a digest passed on from an earlier params.json is of that document: computed anew below
    if files:
        cache = load_hash_cache()
        doc["files"] = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_hash(p, cache)}
                        for p in _files_of(folder)}
        save_hash_cache(cache)
    doc = seal(json.loads(json.dumps(doc)))  # as read back (tuples as lists, keys as strings): the digest is of that
    replace_text(folder / PARAMS, json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True))
    return doc


def _check_digest(path: Path, doc: dict, artifact: str) -> None:
    """Refuse a params.json whose content is not the one its build wrote (its :data:`DIGEST`
    differs).  One without a digest is loaded with a warning, once per file: it may be from a lexrag
    before params.json recorded one, or one whose digest was deleted with an edit, and nothing in it
    tells which (the version is the same), so refusing it would refuse every older build; its fields
    are then checked by type and against the config only (a BM25 index also against the settings
    bm25s recorded beside its scores, :meth:`lexrag.index.lexical.BM25Index.load`)."""
    if DIGEST not in doc:
        key = str(path.resolve())
        if key not in _UNSEALED_SAID:
            _UNSEALED_SAID.add(key)
            log.warning("%s records no %s, so an edit of its fields cannot be told from its build (an older build, or "
                        "its digest deleted with an edit): loaded as it reads; %s (the rebuilt one records a digest)",
                        path, DIGEST, rebuild_hint(artifact))
        return
    if digest_stale(doc):
        raise ParamsEdited(f"{path}: edited after the build (its {DIGEST} is not the digest of its content: a field "
                           f"was changed by hand or by another tool, and the build's settings are not known); "
                           f"{rebuild_hint(artifact)}")


def _check_entry(folder: Path, rel: Any, meta: Any, artifact: str) -> None:
    """Refuse a ``files`` entry of params.json that is not a file name inside ``folder``: an absolute
    path, a ``..``, a backslash or drive, or a link out of the folder would make loading stat, open and
    hash a file elsewhere (and its messages tell that file's size)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("size"), int) or isinstance(meta.get("size"), bool) \
            or meta["size"] < 0 or not isinstance(meta.get("sha256"), str):
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
    cache = load_hash_cache()
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
            want = meta["sha256"].lower()  # hex digits in either case are the same digest (sha256sum -c)
            if digest != want and old is not None:  # the cache may be what is wrong: read the file
                cache.pop(f"{st.st_dev}:{st.st_ino}", None)
                digest, dirty = file_hash(p, cache), True
            if digest != want:
                raise ArtifactError(f"{p}: its contents are not the ones artifact {artifact!r} was built with "
                                    f"(sha256 differs: replaced by another build?); {rebuild_hint(artifact)}")
    finally:
        if dirty:
            save_hash_cache(cache)


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
        if folder.name == PARAMS and folder.is_file():  # the artifact's params.json given for its folder
            raise ArtifactError(f"artifact {artifact!r} not found: {folder} is the artifact's {PARAMS}; give the folder "
                                f"that holds it, {folder.parent}")
        if folder.parent.is_file():  # --artifacts a file (a CSV given for the folder)
            raise ArtifactError(f"artifact {artifact!r} not found: {folder.parent} is a file, not a folder; give the folder "
                                "that holds the artifacts (the --out of python -m lexrag build)")
        if (folder.parent / PARAMS).is_file():  # --artifacts ARTS/corpus: an artifact folder given for the folder holding them
            raise ArtifactError(f"artifact {artifact!r} not found: {folder.parent} is itself an artifact folder (it has a "
                                f"{PARAMS}); give the folder that holds the artifacts, {folder.parent.parent}")
        aside = sorted(folder.parent.glob(f".{folder.name}.old-*")) if folder.parent.is_dir() else []
        if aside:  # a build killed while publishing: the earlier set is there, hidden
            raise ArtifactError(f"artifact {artifact!r} not found: {folder} is missing, and {aside[0].name} beside it holds "
                                "the earlier one, set aside by a build killed while publishing: the next build into "
                                f"{folder.parent} puts the earlier set back first (or rename it back by hand)")
        raise ArtifactMissing(f"artifact {artifact!r} not found: {folder} is not a folder (make it: {rebuild_command(artifact)}; "
                              "or attach its Kaggle dataset)")
    if not path.is_file():
        raise ArtifactError(f"artifact {artifact!r} at {folder} has no {PARAMS}: the build did not finish; {rebuild_hint(artifact)}")
    try:
        doc = read_params_json(path)
    except ArtifactError as e:  # names the file and what is wrong with it (not JSON, not UTF-8, a FIFO)
        raise ArtifactError(f"{e}; {rebuild_hint(artifact)}") from None
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
    # last: a damage with a message of its own (a file list naming a file outside, a replaced file)
    # is named by it; the digest then refuses any other edit
    _check_digest(path, doc, artifact)
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


def check_corpus_id(folder: str | Path, artifact: str, recorded: Any, loaded: str | None) -> None:
    """Refuse an index (``artifact`` at ``folder``) recorded over another corpus than the loaded one,
    saying what a corpus id covers and how to rebuild the index."""
    if loaded is not None and recorded != loaded:
        root = Path(folder).parent
        aside = sorted(root.glob(".corpus.old-*")) if root.is_dir() else []
        if aside:  # a build killed while publishing: the new corpus is in place, the earlier set beside it
            raise ArtifactError(f"{artifact} at {folder} was built over another corpus than the one in {root / 'corpus'}, and "
                                f"{aside[0].name} beside it holds the earlier corpus, set aside by a build killed while "
                                f"publishing: the next build into {root} puts the earlier set back first")
        raise ArtifactError(f"{artifact} at {folder} was built over corpus {short(recorded)}, the loaded corpus is {loaded!r} "
                            "(a corpus id covers the sources, the document count and the table as written, so a corpus "
                            "rebuilt from other data, with another corpus.chunk_rows or by another lexrag is another "
                            f"corpus); {rebuild_hint(artifact)}")


def corpus_id(corpus_dir: str | Path) -> str:
    """Identity of a corpus artifact: a hash of its recorded sources, doc count and the contents of
    its table (so a shuffled build of the same sources is another corpus)."""
    p = read_params(corpus_dir, "corpus", verify=False)  # the files are checked where the corpus is loaded
    table = (p.get("files") or {}).get("corpus.parquet", {}).get("sha256")
    blob = json.dumps({"sources": p.get("sources"), "n_docs": p.get("n_docs"), **({"table": table} if table else {})},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
