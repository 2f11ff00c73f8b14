"""The artifact registry (``artifacts_manifest.yaml``) and Kaggle dataset folders.

The manifest lists every artifact: name, Kaggle dataset id, builder, params, files with size
and sha256, doc count, package version, the fields of its ``params.json``.  ``rebuild`` builds
artifacts into dataset folders (files + ``params.json`` + ``dataset-metadata.json``) and records
them; ``check`` compares folders with the manifest and names every mismatch; ``upload`` pushes
folders with the kaggle CLI (a new version when the dataset exists).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Sequence

import yaml

from lexrag import __version__
from lexrag.artifacts import corpus_id, file_table, read_params
from lexrag.io.outputs import replace_text
from lexrag.io.publish import staged_set
from lexrag.config import Config
from lexrag.errors import LexragError, ManifestError

__all__ = ["load_manifest", "save_manifest", "rebuild", "check", "upload", "ManifestError"]

from lexrag.pipeline.build import build_step, warn_left_over_corpus
from lexrag.registry import BuildInputs, build_order, names, spec

log = logging.getLogger(__name__)



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
        if not isinstance(files, list) or not all(isinstance(f, dict) and {"path", "size", "sha256"} <= set(f) for f in files):
            raise ManifestError(f"{path}: artifact {a['name']!r}: 'files' must be a list of entries with path, size and sha256")
        bad = next((f for f in files if not re.fullmatch(r"[0-9a-fA-F]{64}", str(f["sha256"]))), None)
        if bad is not None:  # else a check would show two digests that look alike and call them different
            raise ManifestError(f"{path}: artifact {a['name']!r}: {str(bad['path'])[:80]}: sha256 {str(bad['sha256'])[:80]!r} is "
                                "not 64 hex digits; rebuild the entry (build_datasets.py --only "
                                f"{a['name']}) or restore the manifest")
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


def _entry(doc: dict, name: str) -> dict:
    for a in doc["artifacts"]:
        if a["name"] == name:
            return a
    raise ManifestError(f"artifact {name!r} is not in the manifest; known: {[a['name'] for a in doc['artifacts']]}")


COMPETITION_RULES = ("Built from the competition's files or its training questions' gold: their use is governed by the "
                     "competition's rules, so this dataset is created private (kaggle datasets create; never make it "
                     "public) and is for the competition only.")


def dataset_licence(folder: Path, entry: dict) -> tuple[str, str]:
    """(Kaggle licence name, a sentence for the description) of an artifact's dataset, from its
    registry entry: the competition's rules for what is built from competition data, its source's
    licence where its params.json records one (the dictionary, the English texts), the carried
    packages' licences for the wheels (``LICENSES.md``, written by the wheels build)."""

    kind = spec(entry["name"]).licence if entry.get("name") in names() else "competition"
    if kind == "own":
        try:
            own = json.loads((folder / "params.json").read_text(encoding="utf-8")).get("license_id")
        except (OSError, ValueError, AttributeError):
            own = None
        return (own if isinstance(own, str) and own else entry.get("license", "unknown")), ""
    if kind == "wheels":
        from lexrag.io.wheels import LICENCES_FILE

        listed = folder / LICENCES_FILE
        gpl = ""
        if listed.is_file():
            rows = [ln.split("|")[1:4] for ln in listed.read_text(encoding="utf-8").splitlines() if ln.startswith("| ")][1:]
            gpl = ", ".join(f"{n.strip()} ({lic.strip()})" for n, _, lic in rows if "GPL" in lic.upper())
        return "other", ("Each package keeps its own licence (LICENSES.md lists them, licenses/ holds their files); "
                         + (f"under the GPL: {gpl}; " if gpl else "") + "lexrag itself is MIT.")
    return "other", COMPETITION_RULES


SPEC_FIELDS = ("dataset", "title", "description", "builder")  # what a manifest entry says that its spec says first


def spec_fields(name: str) -> dict:
    """The manifest fields of artifact ``name`` that its spec fixes (dataset, title, description,
    builder): written into its entry by every build, so the manifest follows the code."""
    a = spec(name)
    return {k: getattr(a, k) for k in SPEC_FIELDS}


def _dataset_metadata(folder: Path, entry: dict, owner: str) -> None:
    """Kaggle's dataset-metadata.json, its licence and description from :func:`dataset_licence`."""
    name, note = dataset_licence(folder, entry)
    meta = {
        "title": entry.get("title", entry["dataset"]),
        "id": f"{owner}/{entry['dataset']}",
        "licenses": [{"name": name}],
        "description": " ".join(x for x in (entry.get("description", ""), note) if x),
    }
    (folder / "dataset-metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def check_owner(owner) -> None:
    """A Kaggle user or organisation name, which becomes every dataset's id (``OWNER/lexrag-...``)."""
    import re

    if not isinstance(owner, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,49}", owner):
        raise ManifestError(f"owner {str(owner)[:60]!r} is not a Kaggle user or organisation name (letters, digits, - and _); "
                            "give --owner YOUR_KAGGLE_USER")


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
    abbreviations: str | Path | None = None,
    dictionary: str | Path | None = None,
    headings: str | Path | None = None,
    laws_en: str | Path | None = None,
) -> dict:
    """Build the selected artifacts into ``out_dir/<name>/`` and record them in the manifest.
    The prior is built only when a training file is given (never from validation gold); the LLM
    cache only when a cache folder that a live run filled is given (it is exported compact)."""

    doc = load_manifest(manifest_path)
    owner = owner or doc.get("owner", "lexrag")
    check_owner(owner)
    names = selected(doc, only)
    out = Path(out_dir)
    from lexrag.io.outputs import check_makeable
    from lexrag.io.publish import check_replaceable

    check_makeable(out, "--out")
    for a in build_order():  # the folders this selection replaces
        if a.name in names:
            check_replaceable(out / a.name)
    # every input the selection reads is checked before anything is built, so a wrong path costs seconds
    if "corpus" in names and not laws:
        raise ManifestError("building the corpus needs --laws (or leave corpus out with --only, or --check to build nothing)")
    from lexrag.index.build import check_build_inputs

    check_build_inputs(out, laws if "corpus" in names else None, courts if "corpus" in names else None,
                       law_keys if "corpus" in names else None, train if {"prior", "ranker"} & set(names) else None,
                       abbreviations if "corpus" in names else None, dictionary if "dictionary" in names else None,
                       headings if "corpus" in names else None, laws_en if "bm25_en" in names else None)
    if llm_cache and "llm_cache" in names and not (Path(llm_cache) / "params.json").is_file():
        raise ManifestError(f"--llm-cache {llm_cache}: not an LLM cache folder (the llm.cache_dir of a live run, holding "
                            "params.json and cache.sqlite)")
    ignored = [flag for flag, v, arts in (("--laws", laws, {"corpus"}), ("--courts", courts, {"corpus"}),
                                          ("--train", train, {"prior", "ranker"}), ("--llm-cache", llm_cache, {"llm_cache"}),
                                          ("--dictionary", dictionary, {"dictionary"}), ("--laws-en", laws_en, {"bm25_en"}))
               if v and not arts & set(names)]
    if ignored:
        log.warning("%s: not read, because --only leaves out what reads them", ", ".join(ignored))
    unread = ([flag for flag, v in (("--law-keys", law_keys), ("--abbreviations", abbreviations), ("--headings", headings)) if v]
              if "corpus" not in names else [])
    if unread:
        log.warning("%s: read only when the corpus is built, and --only leaves it out; add corpus to --only "
                    "(then rebuild the graph too) or leave %s out", ", ".join(unread), "them" if len(unread) > 1 else "it")
    built: list[str] = []
    inputs = BuildInputs(laws=laws, courts=courts, law_keys=law_keys, train=train, abbreviations=abbreviations,
                         headings=headings, laws_en=laws_en,
                         llm_cache=llm_cache, dictionary=dictionary, corpus_dir=out / "corpus")
    done: list[tuple[str, dict, dict]] = []
    # every dataset folder is built in one staging folder with its dataset-metadata.json, and the set is put in
    # place in one step: a failed or killed build leaves the set that was there (the embeddings resume in place;
    # the wheels come again from pip's own cache), and a corpus never goes without the indexes built with it
    with staged_set(out) as stage:
        if "corpus" in names:
            inputs.corpus_dir = stage / "corpus"
        for a in build_order():
            name = a.name
            if name not in names:
                continue
            entry = _entry(doc, name)
            if name == "embeddings" and not cfg.semantic.model:
                if only and "embeddings" in only:
                    raise ManifestError("building embeddings needs --set semantic.model=FOLDER (and a GPU at 2.47M documents)")
                log.warning("embeddings: skipped (needs --set semantic.model=FOLDER; the manifest entry stays as it was)")
                continue
            if not a.has_input(inputs):
                if name == "corpus" or (only and name in only):
                    raise ManifestError(f"building the {name.replace('_', ' ')} needs {a.input_flag}")
                log.warning("%s: skipped (needs %s; the manifest entry stays as it was)", name, a.input_flag.split(" (")[0])
                continue
            step = build_step(name)
            target = (out if name == "embeddings" else stage) / name  # the embeddings resume in place
            result = step(cfg, target, inputs) if name != "wheels" else step(target, entry)
            if result is False:
                raise ManifestError(f"{name} at {out / name} is incomplete; run again to resume")
            params = read_params(target, name)
            entry.update(spec_fields(name))
            if name != "wheels":
                entry["params"] = params["params"]
            _dataset_metadata(target, entry, owner)
            done.append((name, entry, params))
    for name, entry, params in done:
        folder = out / name
        entry.update(
            {
                "version": __version__,
                "doc_count": params.get("n_docs", params.get("n_entries")),
                "sources": params.get("sources") or params.get("corpus_id"),
                # the fields of its params.json, which its code decides (tests/test_manifest_fresh.py compares them
                # with a build of the demo data, so a writer that gains or loses one fails until this is re-recorded)
                "params_json_keys": sorted(params),
                "files": file_table(folder),
            }
        )
        log.info("%s: %d files, %.1f MB -> %s", name, len(entry["files"]), sum(f["size"] for f in entry["files"]) / 1e6, folder)
        built.append(name)
    save_manifest(manifest_path, doc)
    if "corpus" in built:  # an index left over the replaced corpus: said now, not when a run refuses it
        warn_left_over_corpus(out, names)
    doc["built"] = built  # not saved: what this call built, for the check that follows it
    return doc


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
                problems.append(f"{name}: {path}: the manifest's size is {str(f.get('size'))[:30]!r}, not a whole number "
                                "(a hand-edited manifest? re-record it: build_datasets.py --record)")
            elif h["size"] != f["size"]:
                problems.append(f"{name}: {path} has size {h['size']}, manifest says {f['size']}")
            elif h["sha256"] != str(f["sha256"]).lower():  # hex digits in either case are the same digest (sha256sum -c)
                problems.append(f"{name}: {path} sha256 {h['sha256'][:12]}…, manifest says {f['sha256'][:12]}…")
        for path in sorted(set(have) - set(listed)):
            problems.append(f"{name}: {path} is not in the manifest")
        try:
            meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or not meta.get("id"):
                problems.append(f"{name}: dataset-metadata.json has no id (rebuild the folder)")
            elif str(meta["id"]).rpartition("/")[2] != entry.get("dataset"):  # an upload would go to another dataset
                problems.append(f"{name}: dataset-metadata.json's id is {str(meta['id'])[:80]!r}, the manifest's dataset "
                                f"{entry.get('dataset')!r}; rebuild the folder (--owner sets the owner)")
        except (OSError, ValueError) as e:
            problems.append(f"{name}: dataset-metadata.json is missing or not JSON ({type(e).__name__}); rebuild the folder")
        if name == "wheels":
            from lexrag.io.wheels import missing_wheels

            problems.extend(f"wheels: the manifest lists no wheel of {m}" for m in missing_wheels(entry.get("params", {}), list(listed)))
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


def _kaggle(cmd: list[str], timeout: float | None) -> tuple[int, str]:
    """Run the kaggle CLI; its exit code and the last 4 KB of what it said (stdout and stderr, read in
    any encoding): a CLI that floods its output holds no more memory than that.  ``timeout``
    (seconds, None for none) raises :class:`subprocess.TimeoutExpired` with the CLI killed."""
    import select
    import time

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail, end = b"", None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wait = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([p.stdout], [], [], wait)[0]:
                raise subprocess.TimeoutExpired(cmd, timeout or 0)
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                break
            tail = (tail + data)[-4096:]
        return p.wait(None if end is None else max(0.0, end - time.monotonic())), tail.decode("utf-8", "replace").strip()
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


STATUS_TIMEOUT_S = 120  # `kaggle datasets status` answers in seconds; an upload itself may take an hour


def upload(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None, message: str = "",
           owner: str | None = None) -> None:
    """Push each artifact folder with the kaggle CLI: a new version if the dataset exists, else
    create it; ``owner`` (a Kaggle user or organisation) replaces the owner the folders were built for."""
    if shutil.which("kaggle") is None:
        raise ManifestError("the kaggle CLI is not on PATH: pip install kaggle and put your API token in place (see the kaggle CLI docs)")
    problems = check(manifest_path, out_dir, only)
    if problems:
        raise ManifestError("refusing to upload artifacts that do not match the manifest:\n  " + "\n  ".join(problems))
    doc = load_manifest(manifest_path)
    names = selected(doc, only)
    for entry in doc["artifacts"]:
        if entry["name"] not in names:
            continue
        folder = Path(out_dir) / entry["name"]
        if owner:
            _dataset_metadata(folder, entry, owner)
        meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
        log.info("asking Kaggle whether %s exists (kaggle datasets status, at most %d s)", meta["id"], STATUS_TIMEOUT_S)
        try:  # a stalled network must not hold the upload for ever
            status_rc, said = _kaggle(["kaggle", "datasets", "status", meta["id"]], STATUS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ManifestError(f"kaggle datasets status {meta['id']} gave no answer in {STATUS_TIMEOUT_S} s (no network?); "
                                "nothing was uploaded for it") from None
        if status_rc != 0 and not any(w in said.lower() for w in ("404", "not found", "does not exist")):
            # not an answer about the dataset (no network, a bad token): creating it anew would be wrong
            raise ManifestError(f"kaggle datasets status {meta['id']} failed: {said.splitlines()[-1] if said else 'no output'}; "
                                "nothing was uploaded for it")
        msg = message or f"lexrag {__version__}"
        cmd = (["kaggle", "datasets", "version", "-p", str(folder), "-m", msg, "--dir-mode", "zip"] if status_rc == 0
               else ["kaggle", "datasets", "create", "-p", str(folder), "--dir-mode", "zip"])
        log.info("%s (uploading %.1f MB; the kaggle CLI says nothing until it is done)", " ".join(cmd),
                 sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6)
        rc, tail = _kaggle(cmd, None)
        said = [x for x in tail.splitlines() if re.search(r"\berror\b", x, re.IGNORECASE)] or tail.splitlines() or ["no output"]
        if rc != 0 or re.search(r"\berror\b", tail, re.IGNORECASE):  # the CLI exits 0 on some refusals of the API
            raise ManifestError(f"{' '.join(cmd[:3])} for {entry['name']} failed (exit {rc}): {said[-1]}")
        log.info("%s: kaggle said: %s", entry["name"], said[-1])
