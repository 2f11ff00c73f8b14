"""The artifact registry, ``artifacts_manifest.yaml``: read (every entry checked), written, selected
from (``--only``), and compared with the dataset folders (:func:`check`, which names every
mismatch).

The manifest lists every artifact: name, Kaggle dataset id, builder, params, files with size
and sha256, doc count, package version, the fields of its ``params.json``.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Callable, Sequence

import yaml

from lexrag.artifacts import corpus_id, file_table, read_params
from lexrag.errors import LexragError, ManifestError
from lexrag.io.outputs import replace_text
from lexrag.pipeline import catalogue  # noqa: F401  (declares every artifact: the names a manifest may hold)
from lexrag.registry import names, spec

__all__ = ["load_manifest", "save_manifest", "selected", "manifest_entry", "check", "unlisted", "spec_fields",
           "SPEC_FIELDS"]

SPEC_FIELDS = ("dataset", "title", "description", "builder")  # what a manifest entry says that its spec says first


def spec_fields(name: str) -> dict:
    """The manifest fields of artifact ``name`` that its spec fixes (dataset, title, description,
    builder): written into its entry by every build, so the manifest follows the code."""
    a = spec(name)
    return {k: getattr(a, k) for k in SPEC_FIELDS}


def load_manifest(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise ManifestError(f"{path}: manifest not found")  # a folder or a FIFO: read_yaml_file names what it is
    from lexrag.config.yamlio import read_yaml_file

    doc = read_yaml_file(path, ManifestError) or {}
    if not isinstance(doc, dict):
        raise ManifestError(f"{path}: expected a mapping with 'artifacts', got {type(doc).__name__}")
    arts = doc.get("artifacts")
    if not isinstance(arts, list) or not all(isinstance(a, dict) and "name" in a and "dataset" in a for a in arts):
        raise ManifestError(f"{path}: 'artifacts' must be a list of entries with at least name and dataset")
    known = set(names())
    seen: set = set()
    for i, a in enumerate(arts, 1):
        if not isinstance(a["name"], str):  # a list or a mapping: no artifact's name, and unhashable besides
            raise ManifestError(f"{path}: artifact entry {i}: name {str(a['name'])[:60]!r} is a "
                                f"{type(a['name']).__name__}, not a name; write one of {', '.join(sorted(known))}")
        if a["name"] in seen:
            raise ManifestError(f"{path}: artifact {str(a['name'])[:40]!r} is listed twice; keep one entry")
        seen.add(a["name"])
        if a["name"] not in known:  # a name is a folder under --out: never a path that leads elsewhere
            raise ManifestError(f"{path}: artifact name {str(a['name'])[:80]!r} is not one lexrag builds "
                                f"({', '.join(sorted(known))})")
        files = a.get("files") or []
        if not isinstance(files, list) or not all(isinstance(f, dict) and {"path", "size", "sha256"} <= set(f)
                                                  for f in files):
            raise ManifestError(f"{path}: artifact {a['name']!r}: 'files' must be a list of entries with path, size "
                                "and sha256")
        bad = next((f for f in files if not re.fullmatch(r"[0-9a-fA-F]{64}", str(f["sha256"]))), None)
        if bad is not None:  # else a check would show two digests that look alike and call them different
            raise ManifestError(f"{path}: artifact {a['name']!r}: {str(bad['path'])[:80]}: sha256 "
                                f"{str(bad['sha256'])[:80]!r} is not 64 hex digits; rebuild the entry "
                                f"(build_datasets.py --only {a['name']}) or restore the manifest")
    return doc


def selected(doc: dict, only: Sequence[str] | None, source: str | Path = "the manifest") -> list[str]:
    """The artifact names ``--only`` names (all without it), in manifest order; a name the
    manifest does not hold, or an ``--only`` that names nothing, is a :class:`ManifestError`
    (one that lexrag builds is said to be missing from the manifest ``source``)."""
    known = [a["name"] for a in doc["artifacts"]]
    if only is None:
        return known
    wanted = [n for n in (x.strip() for x in only) if n]
    dropped = [n for n in wanted if n not in known and n in names()]  # lexrag builds it: the entry is what is missing
    if dropped:
        raise ManifestError(f"--only {','.join(only)!r}: {source} has no {', '.join(dropped)} "
                            f"entr{'y' if len(dropped) == 1 else 'ies'}; restore "
                            f"{'it' if len(dropped) == 1 else 'them'} (git, or the committed artifacts_manifest.yaml)")
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        what = "unknown artifact(s) " + ", ".join(unknown) if unknown else "names no artifact"
        raise ManifestError(f"--only {','.join(only)!r}: {what}; known: {', '.join(known)}")
    return [n for n in known if n in wanted]


def save_manifest(path: str | Path, doc: dict) -> None:
    replace_text(path, "# Artifact registry: written by build_datasets.py; checked by build_datasets.py --check.\n"
                 + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))


def manifest_entry(doc: dict, name: str) -> dict:
    for a in doc["artifacts"]:
        if a["name"] == name:
            return a
    raise ManifestError(f"artifact {name!r} is not in the manifest; known: {[a['name'] for a in doc['artifacts']]}")


def _other_corpus(out: Path, name: str, corpus_id: Callable[[], str]) -> list[str]:
    """A problem line when artifact ``name`` in ``out`` was built over another corpus than ``out/corpus``
    (whose id ``corpus_id()`` gives)."""
    if name == "corpus" or name not in names() or "corpus" not in spec(name).depends_on \
            or not (out / "corpus" / "params.json").is_file():
        return []
    try:
        recorded = read_params(out / name, name, verify=False).get("corpus_id")
        loaded = corpus_id()
    except LexragError:  # a damaged params.json is named by the checks above
        return []
    wrong = recorded is not None and recorded != loaded  # an artifact that records no corpus id cannot be checked
    return [f"{name}: built over another corpus than {out / 'corpus'}; rebuild it (--only {name})"] if wrong else []


def _off_spec(manifest_path: str | Path, entry: dict) -> list[str]:
    """A problem line for each field of ``entry`` that its spec fixes (:data:`SPEC_FIELDS`) and
    that says otherwise: a hand edit, which an upload would publish (its title, its description)
    or a reader would run (its builder)."""
    name, lines = entry["name"], []
    for field, want in spec_fields(name).items():
        if field not in entry:
            lines.append(f"{manifest_path}: {name}: the entry has no {field}; restore it ({want[:60]!r}: its spec's) "
                         f"or rebuild the entry (build_datasets.py --only {name})")
        elif entry[field] != want:
            lines.append(f"{manifest_path}: {name}: {field} {str(entry[field])[:60]!r} is not its spec's "
                         f"({want[:60]!r}); restore the field or rebuild the entry (build_datasets.py --only {name})")
    return lines


def unlisted(manifest_path: str | Path, out_dir: str | Path) -> list[str]:
    """A problem line for each dataset folder under ``out_dir`` that the manifest has no entry
    for: an artifact lexrag builds, or a folder holding a dataset-metadata.json (an upload
    sends only what the manifest lists, so it would be left behind unsaid)."""
    listed = {a["name"] for a in load_manifest(manifest_path)["artifacts"]}
    out = Path(out_dir)
    if not out.is_dir():
        return []
    lines = []
    for folder in sorted(out.iterdir()):
        if folder.name in listed or folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
            continue
        if folder.name in names() or (folder / "dataset-metadata.json").is_file():
            lines.append(f"{folder}: a dataset folder that {manifest_path} has no entry for, so an upload skips it; "
                         f"restore its entry (git, or the committed artifacts_manifest.yaml) and check again, "
                         f"or move the folder out of {out}")
    return lines


def check(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None) -> list[str]:
    """Every difference between the artifact folders and the manifest (empty: all match)."""
    doc = load_manifest(manifest_path)
    out_corpus = functools.cache(lambda: corpus_id(Path(out_dir) / "corpus"))  # read once, for every artifact over it
    names = selected(doc, only, manifest_path)
    problems: list[str] = []
    for entry in doc["artifacts"]:
        name = entry["name"]
        if name not in names:
            continue
        problems.extend(_off_spec(manifest_path, entry))
        folder = Path(out_dir) / name
        listed = {f["path"]: f for f in entry.get("files") or []}
        if not listed:
            problems.append(f"{name}: the manifest lists no files (never built: run build_datasets.py)")
            continue
        if not folder.is_dir():
            problems.append(f"{name}: folder {folder} is missing")
            continue
        have = {f["path"]: f for f in file_table(folder)}
        for path, f in listed.items():
            h = have.get(path)
            if h is None:
                problems.append(f"{name}: {path} is missing")
            elif not isinstance(f.get("size"), int) or isinstance(f.get("size"), bool):
                problems.append(f"{name}: {path}: the manifest's size is {str(f.get('size'))[:30]!r}, not a whole "
                                "number (a hand-edited manifest? re-record it: build_datasets.py --record)")
            elif h["size"] != f["size"]:
                problems.append(f"{name}: {path} has size {h['size']}, manifest says {f['size']}")
            elif h["sha256"] != str(f["sha256"]).lower():  # hex digits in either case: one digest (sha256sum -c)
                problems.append(f"{name}: {path} sha256 {h['sha256'][:12]}…, manifest says {f['sha256'][:12]}…")
        for path in sorted(set(have) - set(listed)):
            problems.append(f"{name}: {path} is not in the manifest")
        try:
            meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or not meta.get("id"):
                problems.append(f"{name}: dataset-metadata.json has no id (rebuild the folder)")
            elif str(meta["id"]).rpartition("/")[2] != entry.get("dataset"):  # an upload would go to another dataset
                problems.append(f"{name}: dataset-metadata.json's id is {str(meta['id'])[:80]!r}, the manifest's "
                                f"dataset {entry.get('dataset')!r}; rebuild the folder (--owner sets the owner)")
        except (OSError, ValueError) as e:
            problems.append(f"{name}: dataset-metadata.json is missing or not JSON ({type(e).__name__}); rebuild the "
                            "folder")
        if name == "wheels":
            from lexrag.io.wheels import missing_wheels

            problems.extend(f"wheels: the manifest lists no wheel of {m}"
                            for m in missing_wheels(entry.get("params", {}), list(listed)))
        if (folder / "params.json").is_file():
            try:
                v = read_params(folder, name, verify=False).get("version")  # the file differences are listed above
            except LexragError as e:  # a damaged params.json is one problem among the others, not the end of the list
                problems.append(f"{name}: {e}")
                continue
            if v != entry.get("version"):
                problems.append(f"{name}: built by lexrag {v}, manifest says {entry.get('version')}")
            problems.extend(_other_corpus(Path(out_dir), name, out_corpus))
    return problems
