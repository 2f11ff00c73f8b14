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
from lexrag.registry import names, spec

__all__ = ["load_manifest", "save_manifest", "selected", "manifest_entry", "check"]


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
    for a in arts:
        if a["name"] in seen:
            raise ManifestError(f"{path}: artifact {str(a['name'])[:40]!r} is listed twice; keep one entry")
        seen.add(a["name"]) if isinstance(a["name"], str) else None
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


def selected(doc: dict, only: Sequence[str] | None) -> list[str]:
    """The artifact names ``--only`` names (all without it), in manifest order; a name the
    manifest does not hold, or an ``--only`` that names nothing, is a :class:`ManifestError`."""
    known = [a["name"] for a in doc["artifacts"]]
    if only is None:
        return known
    names = [n for n in (x.strip() for x in only) if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        what = "unknown artifact(s) " + ", ".join(unknown) if unknown else "names no artifact"
        raise ManifestError(f"--only {','.join(only)!r}: {what}; known: {', '.join(known)}")
    return [n for n in known if n in names]


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


def check(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None) -> list[str]:
    """Every difference between the artifact folders and the manifest (empty: all match)."""
    doc = load_manifest(manifest_path)
    out_corpus = functools.cache(lambda: corpus_id(Path(out_dir) / "corpus"))  # read once, for every artifact over it
    names = selected(doc, only)
    problems: list[str] = []
    for entry in doc["artifacts"]:
        name = entry["name"]
        if name not in names:
            continue
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
