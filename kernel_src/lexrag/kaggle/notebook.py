"""The inference notebook's body: answer ``test.csv`` and always leave a valid, scored file.

The notebook's first cell (standard library only, before lexrag is installed) writes a fallback
``submission.csv`` with every query id; :func:`run_submission` then loads what it can
(``Artifacts.load(degrade=True)``: only the corpus is required), runs the pipeline with failing
stages contained per query (``runtime.on_stage_error: skip``) under a budget that counts from the
notebook's start, and replaces the file only with a validated one.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from lexrag.config import load_config
from lexrag.errors import ArtifactError
from lexrag.eval.status import measured, measured_table, run_status
from lexrag.eval.submission import validate_submission, write_submission
from lexrag.paths import paths_for, resolve_paths
from lexrag.pipeline import Artifacts, Budget, run_pipeline
from lexrag.queries import load_queries

__all__ = ["run_submission", "build_artifact", "build_corpus_cell", "build_embeddings_cell"]

log = logging.getLogger(__name__)


def run_submission(config: str | None = "kaggle", overrides: Mapping[str, Any] | None = None, queries: str | Path | None = None,
                   artifacts_dir: str | Path | None = None, out: str | Path | None = None,
                   started_at: float | None = None) -> dict:
    """Answer the queries (``test.csv`` from the competition input by default) into ``out``
    (``submission.csv`` in the working folder).  Returns a summary: the run status (OK, DEGRADED)
    with its stage table (``status``, ``status_table``, ``stages``), queries, citations written,
    seconds per stage, stages skipped, dropped or failed, parts missing, cost per stage."""
    cfg = load_config(config, overrides)
    cfg.runtime = replace(cfg.runtime, on_stage_error="skip")
    if os.environ.get("CI"):
        cfg.runtime.progress = False
    paths = resolve_paths(cfg.paths)
    queries_file = Path(queries) if queries else paths.input_file("test.csv")
    out_path = Path(out) if out else paths.working_dir / "submission.csv"
    from lexrag.io.outputs import (check_makeable, check_name_room, check_outside_artifacts, check_plain_output, file_mode,
                                sweep_leftovers)

    check_name_room(out_path, f"out_path {out_path}", ArtifactError)  # the answer is written under a longer name first
    check_makeable(out_path.parent, "the folder of submission.csv (the Kaggle working folder: LEXRAG_KAGGLE_WORKING "
                   "where emulated)")  # before any work: the answers must have somewhere to go
    check_plain_output(out_path, "submission.csv:")
    check_outside_artifacts(out_path.parent, f"{out_path}: its folder", "set paths.working_dir (LEXRAG_KAGGLE_WORKING "
                            "where emulated) to a folder outside the artifacts")
    qs = load_queries(queries_file, cfg.query.max_chars)
    budget = Budget.since(cfg.runtime.time_budget_s, started_at, cfg.runtime.reserve_s)
    t0 = time.perf_counter()
    art = Artifacts.load(paths_for(artifacts_dir, cfg.paths), cfg, degrade=True)
    load_s = time.perf_counter() - t0
    res = run_pipeline(qs, art, cfg, paths=paths, budget=budget)
    import tempfile

    out_path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".candidate", ".tmp"):  # a killed run's
        sweep_leftovers(out_path, suffix)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out_path.name}.{os.getpid()}-", suffix=".candidate", dir=out_path.parent)
    except OSError as e:  # named by the file asked for, not the temporary name the system refused
        raise OSError(e.errno, e.strerror, str(out_path)) from e
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            write_submission(tmp, res.predictions, res.query_ids)
        except OSError as e:  # a full disk: named by the file asked for, not the hidden candidate beside it
            raise OSError(e.errno, e.strerror, str(out_path)) from e
        problems = validate_submission(tmp, [q.query_id for q in qs], art.corpus.citations)
        if problems:  # never replace a valid fallback with a broken file
            raise RuntimeError(f"the submission failed validation, the fallback file stays: {problems[:5]}")
        if out_path.is_dir():
            raise ArtifactError(f"{out_path} is a folder, so the submission cannot be written there: remove it")
        os.chmod(tmp, file_mode(out_path))  # the fallback's mode (the umask's), not the temporary file's 0600
        tmp.replace(out_path)
    finally:
        tmp.unlink(missing_ok=True)
    status = run_status(cfg, art, res)
    summary = {
        "status": status.status, "status_table": status.table() + "\n" + measured_table(m := measured(cfg, res, art)),
        "stages": status.to_dict()["stages"], "measured": m,
        "submission": str(out_path), "queries": len(qs), "citations": sum(len(v) for v in res.predictions.values()),
        "empty_rows": sum(1 for v in res.predictions.values() if not v), "load_s": round(load_s, 1),
        "seconds": {k: round(v, 2) for k, v in res.timings.items()}, "budget_elapsed_s": round(budget.elapsed(), 1),
        "skipped": {k: len(v) for k, v in res.skipped.items()}, "dropped": res.dropped, "failed": res.failed,
        "missing": art.missing,
        "model_loads": res.model_loads, "cost": res.cost_totals(),
    }
    log.info("wrote %s: %d queries, %d citations; %s", out_path, len(qs), summary["citations"], status.headline)
    return summary


def build_artifact(name: str, config: str | None = None, overrides: Mapping[str, Any] | None = None,
                   artifacts_dir: str | Path | None = None) -> str:
    """A build notebook's one call: build artifact ``name`` (``bm25``, ``graph``, ...) through its
    build step over the corpus in ``artifacts_dir`` (written beside it), or over the corpus
    this session built or an attached one (written to the working folder on Kaggle).  Returns
    the line the notebook prints: what was built, where, how big, and any warning about it."""
    from lexrag.artifacts import read_params
    from lexrag.index.corpus import Corpus
    from lexrag.pipeline.build import build_step
    from lexrag.registry import BuildInputs

    cfg = load_config(config, overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(artifacts_dir) / name if artifacts_dir else paths.output_dir / name
    t0 = time.perf_counter()
    if build_step(name)(cfg, out, BuildInputs(corpus_dir=corpus_dir, corpus=Corpus(corpus_dir))) is False:
        return f"{name}: incomplete after {time.perf_counter() - t0:.1f}s -> {out}: run again to resume"
    p = read_params(out, name, verify=False)
    sizes = ", ".join(f"{k} {p[k]}" for k in ("n_docs", "vocab_size", "n_nodes", "n_edges", "communities") if k in p)
    line = f"{name}: built in {time.perf_counter() - t0:.1f}s -> {out} ({sizes})"
    if name == "graph" and not p.get("n_edges"):
        from lexrag.index.graph import NO_COURT_EDGES

        line += f"\nwarning: {NO_COURT_EDGES}"
    return line


def build_corpus_cell(config: str | None = None, overrides: Mapping[str, Any] | None = None, laws=None, courts=None,
                      abbreviations=None, dictionary=None, out_dir=None, headings=None) -> str:
    """Notebook 01's one call: the corpus (and the dictionary, when a dictionary file is given or
    attached) built from its parameters; ``courts``, ``dictionary`` or ``headings`` False: left
    out; None: the input's, when there is one (the headings: ``laws_de_headings.csv``).  Returns the lines the notebook prints."""
    import json

    from lexrag.index.build import courts_beside
    from lexrag.index.corpus import build_corpus
    from lexrag.index.dictionary import build_dictionary
    from lexrag.index.dictionary_sources import check_source
    from lexrag.config.notebook import notebook_path
    from lexrag.io.outputs import check_outside_artifacts

    laws, abbreviations, out_dir = (notebook_path(n, v) for n, v in
                                    (("laws", laws), ("abbreviations", abbreviations), ("out_dir", out_dir)))
    headings = False if headings is False else notebook_path("headings", headings)  # False: none
    courts = False if courts is False else notebook_path("courts", courts)  # False: laws only
    dictionary = False if dictionary is False else notebook_path("dictionary", dictionary)
    cfg = load_config(config, overrides)
    paths = resolve_paths(cfg.paths)
    laws = laws or paths.input_file("laws_de.csv")
    if abbreviations is None:  # without it, questions citing "Art. 17 LAI" find nothing for it
        abbreviations = _input_file(paths, "abbrev-translations.json")
    if dictionary is None:
        dictionary = _input_file(paths, "de-en")
    if headings is None:  # the statute headings file a user made (scripts/make_headings.py) and attached
        headings = _input_file(paths, "laws_de_headings.csv")
    out = Path(out_dir) if out_dir else paths.output_dir
    check_outside_artifacts(out, "parameter out_dir", "give the artifacts folder that holds (or will hold) corpus/")
    if dictionary:  # a wrong dictionary path fails now, not after the corpus is built
        check_source(Path(dictionary))
    courts = courts_beside(laws, courts, say=False)  # said once, here
    lines = [f"courts: {courts or 'none: laws only, so a graph over this corpus has no court edges'}",
             f"abbreviations: {abbreviations or NO_ABBREVIATIONS}",
             f"headings: {headings or NO_HEADINGS}"]
    report = build_corpus(out / "corpus", laws, courts, cfg.corpus, progress=cfg.runtime.progress, abbreviations=abbreviations,
                          headings=headings or None)
    h = report.get("headings", {})
    lines.append(json.dumps({"n_docs": report["n_docs"], "code_aliases": report.get("code_aliases", 0),
                             **({"law_docs_with_heading": h["law_docs_with_heading"], "law_docs_without": h["law_docs_without"]}
                                if h else {})}))
    if dictionary:
        d = build_dictionary(dictionary, out / "dictionary")
        lines.append(f"dictionary: {len(d.entries)} English keys from {dictionary} ({d.doc['licence'].split(' (')[0]})")
    else:
        lines.append("dictionary: none given, so English questions are searched as written where the LLM does not translate")
    return "\n".join(lines)


NO_HEADINGS = ("none: BM25 indexes the laws without their article headings (make laws_de_headings.csv with "
               "scripts/make_headings.py and attach it, or pass headings=PATH)")
NO_ABBREVIATIONS = "none: questions citing a French or Italian abbreviation (Art. 17 LAI) find nothing for it"


def _input_file(paths, name: str) -> Path | None:
    """An input file the build reads when it is there (None when no input holds it as a file)."""
    from lexrag.paths import InputNotFound

    try:
        found = paths.input_file(name)
    except InputNotFound:
        return None
    return found if Path(found).is_file() else None


def build_embeddings_cell(config: str | None = "kaggle", overrides: Mapping[str, Any] | None = None, artifacts_dir=None,
                          out_dir=None, resume_from=None, max_shards: int | None = None, time_budget_s: float = 0.0) -> str:
    """Notebook 04's one call: the embeddings of the corpus in ``artifacts_dir`` (or the one built
    or attached), resumed from ``resume_from``; returns the line the notebook prints."""
    from lexrag.errors import LexragError
    from lexrag.pipeline.build import build_index
    from lexrag.config.notebook import notebook_mapping, notebook_path

    artifacts_dir, out_dir, resume_from = (notebook_path(n, v) for n, v in
                                           (("artifacts_dir", artifacts_dir), ("out_dir", out_dir), ("resume_from", resume_from)))
    overrides = notebook_mapping("overrides", overrides)  # papermill's -p passes a string: read as YAML, as the others
    # the kaggle preset places the encoder on cuda:1 for inference; a build encodes on every GPU there is
    cfg = load_config(config, {"semantic.device": "auto", **overrides} if config == "kaggle" else overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(out_dir) if out_dir else (Path(artifacts_dir) / "embeddings" if artifacts_dir else paths.output_dir / "embeddings")
    if (out / "corpus").is_dir():  # the artifacts root: the shards would lie loose beside corpus/, where no run looks
        raise LexragError(f"parameter out_dir {out} holds corpus/: it is the artifacts folder, not the embeddings folder; "
                          f"give {out / 'embeddings'}")
    t0 = time.perf_counter()
    done = build_index("embeddings", cfg, corpus_dir, out, model=paths.model(cfg.semantic.model, "semantic.model"),
                       max_shards=max_shards, time_budget_s=time_budget_s, resume_from=resume_from)
    return f"embeddings {'complete' if done else 'incomplete: run again to resume'} in {time.perf_counter() - t0:.1f}s -> {out}"
