"""The artifact registry (``artifacts_manifest.yaml``) and Kaggle dataset folders.

The manifest lists every artifact: name, Kaggle dataset id, builder, params, files with size
and sha256, doc count, package version.  ``rebuild`` builds artifacts into dataset folders
(files + ``params.json`` + ``dataset-metadata.json``) and records them; ``check`` compares
folders with the manifest and names every mismatch; ``upload`` pushes folders with the kaggle
CLI (a new version when the dataset exists).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import yaml

from lexrag import __version__
from lexrag.artifacts import file_table, read_params
from lexrag.config import Config
from lexrag.errors import LexragError

__all__ = ["load_manifest", "save_manifest", "rebuild", "check", "upload", "ManifestError", "ARTIFACT_ORDER"]

log = logging.getLogger(__name__)

ARTIFACT_ORDER = ("corpus", "bm25", "embeddings", "graph", "prior", "llm_cache", "wheels")


class ManifestError(LexragError, RuntimeError):
    pass


def load_manifest(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"{path}: manifest not found")
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    arts = doc.get("artifacts")
    if not isinstance(arts, list) or not all(isinstance(a, dict) and "name" in a and "dataset" in a for a in arts):
        raise ManifestError(f"{path}: 'artifacts' must be a list of entries with at least name and dataset")
    return doc


def save_manifest(path: str | Path, doc: dict) -> None:
    Path(path).write_text(
        "# Artifact registry: written by build_datasets.py; checked by build_datasets.py --check.\n"
        + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120),
        encoding="utf-8",
    )


def _entry(doc: dict, name: str) -> dict:
    for a in doc["artifacts"]:
        if a["name"] == name:
            return a
    raise ManifestError(f"artifact {name!r} is not in the manifest; known: {[a['name'] for a in doc['artifacts']]}")


def _dataset_metadata(folder: Path, entry: dict, owner: str) -> None:
    meta = {
        "title": entry.get("title", entry["dataset"]),
        "id": f"{owner}/{entry['dataset']}",
        "licenses": [{"name": entry.get("license", "CC0-1.0")}],
        "description": entry.get("description", ""),
    }
    (folder / "dataset-metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def _build_wheels(folder: Path, entry: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    pkg = Path(__file__).resolve().parents[1]
    subprocess.check_call([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(pkg)])
    extra = entry.get("params", {}).get("extra_wheels", [])
    if extra:
        plats = entry["params"].get("platforms", ["manylinux2014_x86_64"])
        pyver = str(entry["params"].get("python_version", "3.11"))
        subprocess.check_call(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
             *[a for p in plats for a in ("--platform", p)], "--python-version", pyver, "-d", str(folder), *extra]
        )
    from lexrag.artifacts import write_params

    write_params(folder, "wheels", "lexrag.kaggle.datasets._build_wheels", entry.get("params", {}))


def rebuild(
    manifest_path: str | Path,
    out_dir: str | Path,
    cfg: Config,
    laws: str | Path | None = None,
    courts: str | Path | None = None,
    only: Sequence[str] | None = None,
    owner: str | None = None,
    law_keys: str | Path | None = None,
    train: str | Path | None = None,
    llm_cache: str | Path | None = None,
) -> dict:
    """Build the selected artifacts into ``out_dir/<name>/`` and record them in the manifest.
    The prior is built only when a training file is given (never from validation gold); the LLM
    cache only when a cache folder that a live run filled is given (it is exported compact)."""
    from lexrag.index.build import build_index
    from lexrag.index.corpus import build_corpus
    from lexrag.index.prior import build_prior

    doc = load_manifest(manifest_path)
    owner = owner or doc.get("owner", "lexrag")
    names = list(only) if only else [a["name"] for a in doc["artifacts"]]
    out = Path(out_dir)
    for name in ARTIFACT_ORDER:
        if name not in names:
            continue
        entry = _entry(doc, name)
        folder = out / name
        if name == "corpus":
            if not laws:
                raise ManifestError("building the corpus needs --laws")
            build_corpus(folder, laws, courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=law_keys)
        elif name == "embeddings" and not cfg.semantic.model:
            if only and "embeddings" in only:
                raise ManifestError("building embeddings needs --set semantic.model=FOLDER (and a GPU at 2.47M documents)")
            continue
        elif name in ("bm25", "embeddings", "graph"):
            if build_index(name, cfg, out / "corpus", folder) is False:
                raise ManifestError(f"{name} at {folder} is incomplete; run again to resume")
        elif name == "prior":
            if not train:
                if only and "prior" in only:
                    raise ManifestError("building the prior needs --train (a training CSV with gold_citations)")
                continue
            build_prior(train, folder)
        elif name == "llm_cache":
            if not llm_cache:
                if only and "llm_cache" in only:
                    raise ManifestError("building the LLM cache needs --llm-cache DIR (the llm.cache_dir of a live run)")
                continue
            from lexrag.llm.cache import export_cache

            export_cache(llm_cache, folder)
        elif name == "wheels":
            _build_wheels(folder, entry)
        params = read_params(folder, name)
        if name != "wheels":
            entry["params"] = params["params"]
        _dataset_metadata(folder, entry, owner)
        entry.update(
            {
                "version": __version__,
                "doc_count": params.get("n_docs", params.get("n_entries")),
                "sources": params.get("sources") or params.get("corpus_id"),
                "files": file_table(folder),
            }
        )
        log.info("%s: %d files, %.1f MB -> %s", name, len(entry["files"]), sum(f["size"] for f in entry["files"]) / 1e6, folder)
    save_manifest(manifest_path, doc)
    return doc


def check(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None) -> list[str]:
    """Every difference between the artifact folders and the manifest (empty: all match)."""
    doc = load_manifest(manifest_path)
    problems: list[str] = []
    for entry in doc["artifacts"]:
        name = entry["name"]
        if only and name not in only:
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
            elif h["size"] != f["size"]:
                problems.append(f"{name}: {path} has size {h['size']}, manifest says {f['size']}")
            elif h["sha256"] != f["sha256"]:
                problems.append(f"{name}: {path} sha256 {h['sha256'][:12]}…, manifest says {f['sha256'][:12]}…")
        for path in sorted(set(have) - set(listed)):
            problems.append(f"{name}: {path} is not in the manifest")
        if (folder / "params.json").is_file():
            v = read_params(folder, name).get("version")
            if v != entry.get("version"):
                problems.append(f"{name}: built by lexrag {v}, manifest says {entry.get('version')}")
    return problems


def upload(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None, message: str = "") -> None:
    """Push each artifact folder with the kaggle CLI: a new version if the dataset exists, else create it."""
    if shutil.which("kaggle") is None:
        raise ManifestError("the kaggle CLI is not on PATH: pip install kaggle and put your API token in place (see the kaggle CLI docs)")
    problems = check(manifest_path, out_dir, only)
    if problems:
        raise ManifestError("refusing to upload artifacts that do not match the manifest:\n  " + "\n  ".join(problems))
    doc = load_manifest(manifest_path)
    for entry in doc["artifacts"]:
        if only and entry["name"] not in only:
            continue
        folder = Path(out_dir) / entry["name"]
        meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
        exists = subprocess.run(["kaggle", "datasets", "status", meta["id"]], capture_output=True, text=True).returncode == 0
        msg = message or f"lexrag {__version__}"
        cmd = (["kaggle", "datasets", "version", "-p", str(folder), "-m", msg, "--dir-mode", "zip"] if exists
               else ["kaggle", "datasets", "create", "-p", str(folder), "--dir-mode", "zip"])
        log.info("%s", " ".join(cmd))
        subprocess.check_call(cmd)
