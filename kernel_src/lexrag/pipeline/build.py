"""Building artifacts: each spec of the catalogue (:mod:`lexrag.registry`) built by its own step.

:func:`build_artifacts` (``python -m lexrag build``) and :func:`build_index` (the build
notebooks and the benchmarks) walk the catalogue in build order; ``build_datasets.py`` reads it
too; :func:`register_artifact` adds an artifact of one's own (a spec with its build and load
steps).  A build step is ``step(cfg, dest, inputs) -> bool | None`` over a
:class:`lexrag.registry.BuildInputs` (``False``: incomplete, run again to resume); the wheels'
step, which reads its manifest entry, is ``step(dest, entry)``.  A load step is
``step(folder, cfg, art) -> object``, where ``art`` holds what is loaded already (the corpus first).
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path
from typing import Callable

from lexrag.artifacts import ArtifactError
from lexrag.config import Config
from lexrag.index import build as index
from lexrag.pipeline import catalogue  # noqa: F401  (declares every artifact)
from lexrag.index.corpus import Corpus
from lexrag.io.outputs import PARAMS
from lexrag.io.publish import check_replaceable, staged_set
from lexrag.registry import ArtifactSpec, BuildInputs, build_order, declare, names, rebuild_command, spec, withdraw

__all__ = ["build_step", "register_artifact", "unregister_artifact", "build_artifacts", "build_index"]

log = logging.getLogger(__name__)


def build_step(name: str) -> Callable:
    """The build step of artifact ``name``."""
    if name not in names():
        raise KeyError(f"no artifact named {name!r}; known: {', '.join(names())}")
    return spec(name).build


def register_artifact(entry: ArtifactSpec) -> ArtifactSpec:
    """Add an artifact of one's own: its spec with its build step, and its load step when a run
    loads it (``entry.attr`` names the attribute that step fills), after the built-in ones."""
    return declare(entry)


def unregister_artifact(name: str) -> None:
    withdraw(name)


def build_index(name: str, cfg: Config, corpus_dir: str | Path, dest: str | Path, corpus: Corpus | None = None, **kw):
    """Build index artifact ``name`` over the corpus artifact at ``corpus_dir`` into ``dest`` with the
    config's parameters, through its build step: an index is an artifact built over the corpus from
    no input of its own (bm25, embeddings, graph); ``kw`` go to ``build_embeddings``
    (``max_shards``, ``time_budget_s``, ``resume_from``, ``model``)."""
    indexes = [a.name for a in build_order() if "corpus" in a.depends_on and a.needs_input is None and a.in_build]
    if name not in indexes:
        raise ValueError(f"no index artifact named {name!r} ({' | '.join(indexes)})")
    return build_step(name)(cfg, Path(dest), BuildInputs(corpus_dir=corpus_dir, corpus=corpus, extra=kw))


def warn_left_over_corpus(out: Path, rebuilt: list[str], inputs: BuildInputs | None = None) -> None:
    """Warn about each index in ``out`` over the corpus a build replaces that it does not rebuild
    (``rebuilt``), and a calibration fitted there: it stays over the old corpus, and runs refuse it."""
    def why(a: ArtifactSpec) -> str:  # why this build leaves it (when the build's inputs are known)
        if inputs is None:
            return ""
        if not a.has_input(inputs):
            return f" (it is built from {a.input_flag}, not given)"
        return f" ({a.switch} is off" + (f" and --{a.build_with} is not given)" if a.build_with else ")")

    for a in build_order():
        if "corpus" in a.depends_on and a.name not in rebuilt and (out / a.name / PARAMS).is_file():
            log.warning("%s: this build replaces the corpus but not %s%s, so it stays over the old corpus and runs refuse "
                        "it: rebuild it (%s) or remove the folder", a.name, out / a.name, why(a), a.rebuild)
    if (out / "calibration" / PARAMS).is_file():  # not a build's artifact: `lexrag calibrate` writes it
        log.warning("calibration: %s was fitted over the corpus this build replaces, and runs refuse it when the new one "
                    "differs: run it again (%s) or remove the folder", out / "calibration", rebuild_command("calibration"))


def build_artifacts(
    cfg: Config,
    laws: str | Path,
    out_dir: str | Path,
    courts: str | Path | None = None,
    law_keys: str | Path | None = None,
    train: str | Path | None = None,
    abbreviations: str | Path | None = None,
    dictionary: str | Path | None = None,
    headings: str | Path | None = None,
    laws_en: str | Path | None = None,
) -> dict:
    """Build every artifact this config needs under ``out_dir``: ``corpus/``, then ``bm25/``,
    ``embeddings/`` and ``graph/`` as switched on, and ``prior/`` when a training file is given.

    Every input is checked first (it exists, is a file, has the columns it needs, does not lie
    inside a folder the build replaces), so a wrong path fails in seconds, not after hours; each
    artifact is built in a staging folder and replaces the old one only when it is complete."""
    out = Path(out_dir)
    index.check_build_inputs(out, laws, courts, law_keys, train, abbreviations, dictionary, headings, laws_en)
    inputs = BuildInputs(laws=laws, courts=courts, law_keys=law_keys, train=train, abbreviations=abbreviations,
                         dictionary=dictionary, headings=headings, laws_en=laws_en)
    # what this build makes (the graph whenever court considerations are given, so a run may switch it on
    # though the defaults leave it off)
    todo = [a for a in build_order() if a.to_build(cfg, inputs)]
    for a in build_order():  # asked for by the config, but its input is not given: said, not silently left out
        if a.in_build and a.switch and a.wanted(cfg) and not a.has_input(inputs):
            warnings.warn(f"{a.switch} is on, but {a.name} is not built: it is built from {a.input_flag}, which this "
                          "build was not given")
    if any(a.name == "corpus" for a in todo):  # an index this build leaves would lie over the replaced corpus
        warn_left_over_corpus(out, [a.name for a in todo], inputs)
    for a in todo:  # before any work: a folder of other files there is never replaced
        check_replaceable(out / a.name)
    with staged_set(out) as stage:
        inputs.corpus_dir = stage / "corpus"
        for a in todo:
            t = time.perf_counter()
            result = build_step(a.name)(cfg, stage / a.name, inputs)
            if a.name == "corpus":
                inputs.corpus = Corpus(stage / "corpus", lookups=False)  # the graph build makes them when it needs them
                report = result
                log.info("corpus: %d documents in %.1fs", len(inputs.corpus), time.perf_counter() - t)
                if train:
                    index.warn_gold_outside(train, inputs.corpus)
                continue
            if result is False:
                raise ArtifactError(f"{a.name}: incomplete (a shard or time limit); build it with "
                                    f"notebooks/{a.notebook} or build_datasets.py --only {a.name}, which resume")
            if a.name != "prior":
                log.info("%s: built in %.1fs", a.name, time.perf_counter() - t)
    return report
