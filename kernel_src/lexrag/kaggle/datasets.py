"""Kaggle dataset folders: each selected artifact built into ``<out>/<name>/`` (its files,
``params.json`` and ``dataset-metadata.json`` with its licence), the set put in place whole, and
recorded in the manifest (:mod:`lexrag.kaggle.manifest`); :mod:`lexrag.kaggle.upload` pushes them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

from lexrag import __version__
from lexrag.artifacts import ArtifactError, file_table, read_params, read_params_json
from lexrag.config import Config
from lexrag.errors import ManifestError
from lexrag.io.publish import staged_set
from lexrag.kaggle.manifest import load_manifest, manifest_entry, save_manifest, selected, spec_fields
from lexrag.pipeline.build import build_step, warn_left_over_corpus
from lexrag.registry import INPUTS, BuildInputs, build_order, names, spec

__all__ = ["rebuild", "dataset_licence", "write_dataset_metadata", "check_owner"]

log = logging.getLogger(__name__)


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
            own = read_params_json(folder / "params.json").get("license_id")
        except (ArtifactError, AttributeError):
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


def write_dataset_metadata(folder: Path, entry: dict, owner: str) -> None:
    """Kaggle's dataset-metadata.json, its licence and description from :func:`dataset_licence`;
    its title and description are the spec's (a hand edit of the manifest entry is never published)."""
    name, note = dataset_licence(folder, entry)
    said = spec_fields(entry["name"]) if entry.get("name") in names() else entry
    meta = {
        "title": said.get("title") or entry["dataset"],
        "id": f"{owner}/{entry['dataset']}",
        "licenses": [{"name": name}],
        "description": " ".join(x for x in (said.get("description", ""), note) if x),
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
    names = selected(doc, only, manifest_path)
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

    given = {"laws": laws, "courts": courts, "law_keys": law_keys, "train": train, "abbreviations": abbreviations,
             "dictionary": dictionary, "headings": headings, "laws_en": laws_en, "llm_cache": llm_cache}
    readers = {i.field: {a.name for a in build_order() if i.field in (a.needs_input, a.build_with, *a.reads)}
               for i in INPUTS}  # which artifacts read each input, as their specs say
    read = {f: v if readers[f] & set(names) else None for f, v in given.items()}
    check_build_inputs(out, **{f: v for f, v in read.items() if f != "llm_cache"})
    if read["llm_cache"] and not (Path(llm_cache) / "params.json").is_file():
        raise ManifestError(f"--llm-cache {llm_cache}: not an LLM cache folder (the llm.cache_dir of a live run, holding "
                            "params.json and cache.sqlite)")
    flag = {i.field: i.flag for i in INPUTS}
    by_corpus = [flag[f] for f, v in given.items() if v and not read[f] and readers[f] == {"corpus"}]
    ignored = [flag[f] for f, v in given.items() if v and not read[f] and readers[f] != {"corpus"}]
    if ignored:
        log.warning("%s: not read, because --only leaves out what reads them", ", ".join(ignored))
    if by_corpus:
        log.warning("%s: read only when the corpus is built, and --only leaves it out; add corpus to --only "
                    "(then rebuild the graph too) or leave %s out", ", ".join(by_corpus),
                    "them" if len(by_corpus) > 1 else "it")
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
            entry = manifest_entry(doc, name)
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
            write_dataset_metadata(target, entry, owner)
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
