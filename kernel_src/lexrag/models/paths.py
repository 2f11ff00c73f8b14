"""Finding a model folder the way users attach models on Kaggle.

A model setting (``llm.model``, ``semantic.model``, ``rerank.model``) holds one or more
candidates separated by ``|``, tried in order; the first that matches wins.  A candidate is

- a path that exists (an absolute path, or one relative to an input root such as
  ``qwen2.5/transformers/7b-instruct``);
- a Kaggle Model handle ``owner/model/framework/variation`` (or ``model/framework/variation``),
  mounted as ``<input>/models/<owner>/<model>/<framework>/<variation>/<version>/`` or, in the
  classic layout, ``<input>/<model>/<framework>/<variation>/<version>/``; any version, the newest
  first;
- a folder name (``bge-m3``) at any depth among the inputs;
- a model identity from ``config.json``: its ``_name_or_path`` (``BAAI/bge-m3``, or its last part)
  or one of its ``architectures`` (``Qwen2ForCausalLM``).

A miss lists the model folders that were seen (folders holding ``config.json`` or
``modules.json``) with the exact setting that would pick each.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Iterable

from lexrag.errors import ArtifactError

__all__ = ["ModelNotFound", "candidates", "cache_name", "find_model", "is_model_dir", "model_folders", "sampled_digest",
           "setting_for"]

log = logging.getLogger(__name__)

SCAN_DEPTH = 7  # <input>/models/<owner>/<model>/<framework>/<variation>/<version>


class ModelNotFound(ArtifactError, FileNotFoundError):
    """No attached input holds the model a setting names.  ``fix`` says what would make it found
    (the model folders that were seen and the setting that picks one), for the run's status row."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message)
        self.fix = fix


def candidates(setting_value: str) -> list[str]:
    """The candidates of a model setting, in order (``a | b`` -> ``["a", "b"]``)."""
    return [c.strip() for c in str(setting_value or "").split("|") if c.strip()]


def cache_name(setting_value: str) -> str:
    """The name a model setting gives the LLM cache when ``llm.model_name`` is empty: the last
    path part of its first candidate."""
    first = (candidates(setting_value) or [""])[0]
    return Path(first.rstrip("/")).name or first


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
SAMPLE_BYTES = 1 << 16  # each weight file (and each file of tied artifact copies) is known by three chunks of this size
MAX_HEADER = 1 << 24  # a safetensors header longer than this is sampled like the rest (a real one is far smaller)


def weight_files(folder: str | Path) -> list[Path]:
    """The weight files under ``folder`` (safetensors, PyTorch, GGUF), in a fixed order."""
    folder = Path(folder)
    return sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())


def weights_digest(folder: str | Path, h=None):
    """Feed ``h`` (a new sha256 when None) each weight file's path, size, safetensors header (the
    names, shapes and dtypes of its tensors) and three chunks of its bytes (the start, the middle,
    the end): other weights with the same JSON files and file sizes (another version of a model, a
    fine-tune) differ, while a 15 GB folder is known from well under a megabyte read per file
    (``scripts/bench_fingerprint.py`` measures it)."""
    return sampled_digest(folder, weight_files(folder), h)


def sampled_digest(folder: str | Path, files: Iterable[Path], h=None):
    """Feed ``h`` (a new sha256 when None) each of ``files`` (under ``folder``, in the order given):
    its path below ``folder``, its size, a safetensors file's header, and three chunks of
    :data:`SAMPLE_BYTES` (the start, the middle, the end), so a large file is known from a few
    hundred kilobytes read.  A file's unread bytes are not covered: two files that differ only
    there give the same digest (a full sha256 tells those apart)."""
    import struct

    folder = Path(folder)
    h = h or hashlib.sha256()
    for p in files:
        size = p.stat().st_size
        h.update(f"{p.relative_to(folder)}\0{size}\0".encode())
        with open(p, "rb") as f:
            if p.suffix == ".safetensors" and size >= 8:
                n = struct.unpack("<Q", f.read(8))[0]
                if 0 < n <= min(MAX_HEADER, size - 8):
                    h.update(f.read(n))
            for at in sorted({0, max(size // 2 - SAMPLE_BYTES // 2, 0), max(size - SAMPLE_BYTES, 0)}):
                f.seek(at)
                h.update(f.read(SAMPLE_BYTES))
    return h


def model_fingerprint(folder: str | Path) -> str:
    """A model folder's identity, cheap to take: sha256 over its ``config.json`` (or a scripted
    stand-in's script) and :func:`weights_digest` of its weight files.  Two folders with the same
    name but other weights (a 14B for a 7B, another quantization, another version with the same
    files' sizes) differ."""
    folder = Path(folder)
    h = hashlib.sha256()
    for name in ("config.json", "generation_config.json", "lexrag_scripted.json"):
        f = folder / name
        if f.is_file():
            h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return weights_digest(folder, h).hexdigest()[:16]


def has_weights(d: Path) -> bool:
    """A folder that holds weights (or a scripted stand-in's script): a ``config.json`` alone is no model."""
    return (d / "lexrag_scripted.json").is_file() or any(p.suffix in WEIGHT_SUFFIXES and p.is_file() for p in d.rglob("*"))


def is_model_dir(d: Path) -> bool:
    return (d / "config.json").is_file() or (d / "modules.json").is_file()


def _subdirs(d: Path, seen: set | None = None) -> list[Path]:
    """The subfolders of ``d`` by name (hidden ones left out); with ``seen`` (the (device, inode)
    of every folder visited so far) a folder reached again through a link is left out, so a
    link to ``.`` or a loop of links cannot multiply the walk."""
    try:
        subs = sorted((Path(e.path) for e in os.scandir(d) if e.is_dir(follow_symlinks=True) and not e.name.startswith(".")),
                      key=lambda p: p.name)
    except OSError:
        return []
    if seen is None:
        return subs
    out = []
    for s in subs:
        try:
            st = os.stat(s)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append(s)
    return out


def _newest_first(subs: list[Path]) -> list[Path]:
    """Kaggle Model version folders (``1``, ``2``, ...) newest first; other names after, by name."""
    def version(p: Path) -> bool:
        return p.name.isascii() and p.name.isdigit()  # "²" is a digit to str.isdigit, not to int()

    return sorted(subs, key=lambda p: (not version(p), -int(p.name) if version(p) else 0, p.name))


def descend(d: Path) -> Path | None:
    """From a folder to the model folder inside it: ``d`` itself when it holds ``config.json``,
    else down through version folders (newest first) and single subfolders, at most four levels."""
    if is_model_dir(d):
        return d
    level = [d]
    for _ in range(4):
        nxt: list[Path] = []
        for cur in level:
            subs = _subdirs(cur)
            if all(s.name.isascii() and s.name.isdigit() for s in subs) or len(subs) == 1:
                for s in _newest_first(subs):
                    if is_model_dir(s):
                        return s
                    nxt.append(s)
        level = nxt
    return None


def model_folders(roots: Iterable[Path], depth: int = SCAN_DEPTH) -> list[Path]:
    """Every model folder under ``roots`` (breadth first, by name), not descending into one."""
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()  # every folder once, however many links lead to it
    for root in roots:
        try:
            st = os.stat(root)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen or not Path(root).is_dir():
            continue
        seen.add((st.st_dev, st.st_ino))
        inside = os.path.realpath(root) + os.sep  # a link that leads out of the inputs is not followed
        level = [Path(root)]
        for _ in range(depth + 1):
            nxt: list[Path] = []
            for d in level:
                if is_model_dir(d):
                    if d not in out:
                        out.append(d)
                    continue
                nxt.extend(s for s in _subdirs(d, seen) if os.path.realpath(s).startswith(inside))
            level = nxt
    return out


def _identity(d: Path) -> tuple[str, list[str]]:
    from lexrag.io.inputfiles import read_json_file

    try:  # a stray config.json (a FIFO, 100,000 levels deep, not JSON) is no model identity, never an error
        doc = read_json_file(d / "config.json", ArtifactError)
    except ArtifactError:
        return "", []
    if not isinstance(doc, dict):
        return "", []
    arch = doc.get("architectures")
    return str(doc.get("_name_or_path") or ""), [str(a) for a in arch] if isinstance(arch, list) else []


def _handle_parts(d: Path, root: Path) -> tuple[list[str], int]:
    """The parts of a model folder's path below the input root up to its Kaggle Model version
    folder (lower case, without the nested layout's ``models`` prefix), and that version (-1
    when there is none)."""
    try:
        parts = [p.lower() for p in d.relative_to(root).parts]
    except ValueError:
        return [], -1
    at = max((i for i, p in enumerate(parts) if p.isdigit() and i >= 3), default=None)
    version = -1
    if at is not None:
        parts, version = parts[:at], int(parts[at])
    if parts[:1] == ["models"]:
        parts = parts[1:]
    return parts, version


def _matches_handle(tail: list[str], want: list[str]) -> bool:
    """``want`` is ``owner/model/framework/variation``, ``model/framework/variation`` or
    ``owner/model``; the classic layout drops the owner."""
    if len(want) >= 3:
        return tail[-len(want):] == want or (len(want) == 4 and tail[-3:] == want[1:] and len(tail) == 3)
    if len(want) == 2:  # owner/model: a Kaggle Model of that owner, any framework and variation
        return len(tail) >= 4 and tail[-4:-2] == want
    return False


def setting_for(d: Path, roots: Iterable[Path]) -> str:
    """The candidate that picks model folder ``d``: its Kaggle Model handle when it is mounted as
    one, else its path relative to the input root (without the version folder)."""
    for root in roots:
        try:
            rel = d.relative_to(root)
        except ValueError:
            continue
        tail, version = _handle_parts(d, Path(root))
        if rel.parts[:1] == ("models",) and len(tail) == 4:
            return "/".join(tail)
        return "/".join(tail) if version >= 0 else rel.as_posix()
    return str(d)


# what the config.json ``architectures`` of each setting's model may end with: a folder that says it
# is another kind of model (a reranker fine-tuned from BGE-M3 names BGE-M3 too) is never picked
KINDS = {"llm.model": ("ForCausalLM", "LMHeadModel"), "rerank.model": ("ForSequenceClassification",),
         "semantic.model": ("Model", "ForMaskedLM")}


def _fits(d: Path, setting: str) -> bool:
    ends = KINDS.get(setting)
    arch = _identity(d)[1]
    return not ends or not arch or any(a.endswith(ends) and not (setting == "semantic.model" and a.endswith("LMHeadModel"))
                                       for a in arch)


def find_model(value: str, roots: list[Path], setting: str, search: bool) -> Path:
    """The model folder a setting names.  ``roots`` are the input roots; ``search`` (on Kaggle)
    also looks for handles, folder names and config identities among them (only folders whose
    config.json does not say they are another kind of model), otherwise only paths count."""
    cands = candidates(value)
    if not cands:
        raise ModelNotFound(f"no model named: set {setting} (e.g. {setting}=bge-m3, or overrides="
                            f"{{\"{setting}\": \"bge-m3\"}} in a notebook)")
    folders: list[Path] | None = None
    # paths, handles and folder names of every candidate before any config.json identity, so a
    # folder whose config merely descends from the named model never shadows the model itself
    for by_identity in (False, True):
        for c in cands:
            hit = None if by_identity else _by_path(c, roots, search)
            if hit is None and search:
                folders = [d for d in model_folders(roots) if _fits(d, setting)] if folders is None else folders
                hit = _by_scan(c, roots, folders, by_identity)
            if hit is not None:
                if len(cands) > 1 or c != str(hit):
                    log.info("%s: %r found at %s", setting, c, hit)
                return hit
    if not search:
        raise ModelNotFound(f"{setting}: no model folder at {' | '.join(cands)}: set {setting} to a folder holding the "
                            "model's config.json")
    seen = folders if folders is not None else [d for d in model_folders(roots) if _fits(d, setting)]
    lines = [f"{setting}: no model folder matches {' | '.join(cands)} (searched {', '.join(map(str, roots))} by path, "
             "Kaggle Model handle, folder name and config.json)"]
    if seen:
        picks = list(dict.fromkeys(f"{setting}={setting_for(d, roots)}" for d in seen[:10]))
        fix = (f"model folders seen: {', '.join(map(str, seen[:10]))}{' ...' if len(seen) > 10 else ''}"
               f"; to use one set {' or '.join(picks)}; or attach {cands[0]}")
        lines.append("; " + fix)
    else:
        fix = ""  # the status row keeps its usual fix (attach the model)
        lines.append("; no model folder (a folder holding config.json) among the inputs: attach the model "
                     "(a Kaggle Model or a dataset holding its folder)")
    raise ModelNotFound("".join(lines), fix)


def _by_path(c: str, roots: list[Path], search: bool) -> Path | None:
    """``c`` as a path, or (when searching) as a path relative to an input root."""
    direct = Path(c)
    if direct.is_dir():
        return descend(direct) or direct
    if search:
        for root in roots:
            if (Path(root) / c).is_dir():
                hit = descend(Path(root) / c)
                if hit is not None:
                    return hit
    return None


def _by_scan(c: str, roots: list[Path], seen: list[Path], by_identity: bool) -> Path | None:
    """``c`` as a Kaggle Model handle or a folder name among ``seen`` or, ``by_identity``, as the
    name or architecture in their config.json."""
    want = [p.lower() for p in c.strip("/").split("/")]
    low = "/".join(want)
    if by_identity:
        for d in seen:
            if not has_weights(d):  # a config.json naming BAAI/bge-m3 with no weights beside it is not that model
                continue
            name_or_path, arch = _identity(d)
            nop = name_or_path.lower().rstrip("/")
            if (nop and (nop == low or nop.endswith("/" + low))) or c in arch:
                return d
        return None
    if len(want) >= 2:
        hits = [(tail, version, d) for d in seen for r in roots
                for tail, version in [_handle_parts(d, Path(r))] if _matches_handle(tail, want)]
        if hits:  # an exact handle before an owner-less one; the first match's model, newest version
            hits.sort(key=lambda h: h[0] != want)
            return max((h for h in hits if h[0] == hits[0][0]), key=lambda h: h[1])[2]
    if len(want) == 1:  # a folder name: the model folder itself or a folder above it
        for d in seen:
            if any(p.lower() == low for p in _parts_below(d, roots)):
                return d
    return None


def _parts_below(d: Path, roots: list[Path]) -> list[str]:
    for r in roots:
        try:
            return list(d.relative_to(r).parts)
        except ValueError:
            continue
    return [d.name]
