"""Builders: every artifact from the competition CSVs, through one call per artifact.

:func:`build_index` is the one builder call shared by :func:`build_artifacts` (``python -m lexrag
build``), ``build_datasets.py``, the build notebooks and the benchmarks.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

from lexrag.artifacts import ArtifactError, corpus_id
from lexrag.config import Config
from lexrag.errors import CsvInputError
from lexrag.csvio import check_input_file
from lexrag.index.corpus import Corpus, build_corpus
from lexrag.index.graph import build_graph
from lexrag.index.bm25_build import build_bm25
from lexrag.index.prior import build_prior
from lexrag.outputs import PARAMS
from lexrag.publish import check_replaceable, staged_set

__all__ = ["build_artifacts", "build_index"]

log = logging.getLogger(__name__)


def build_index(name: str, cfg: Config, corpus_dir: str | Path, dest: str | Path, corpus: Corpus | None = None, **kw):
    """Build index artifact ``name`` (``bm25`` | ``embeddings`` | ``graph``) over the corpus artifact
    at ``corpus_dir`` into ``dest`` with the config's parameters, through its registry build step;
    ``kw`` go to ``build_embeddings`` (``max_shards``, ``time_budget_s``, ``resume_from``, ``model``)."""
    from lexrag.registry import BuildInputs, spec

    if name not in ("bm25", "embeddings", "graph"):
        raise ValueError(f"no index artifact named {name!r} (bm25 | embeddings | graph)")
    return spec(name).build_step()(cfg, Path(dest), BuildInputs(corpus_dir=corpus_dir, corpus=corpus, extra=kw))


# ---------------------------------------------------------------- registry steps (lexrag.registry)


def build_corpus_step(cfg: Config, dest: Path, inputs) -> dict:
    return build_corpus(dest, inputs.laws, inputs.courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=inputs.law_keys,
                 abbreviations=inputs.abbreviations)


def build_bm25_step(cfg: Config, dest: Path, inputs):
    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    return build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), dest, cfg.lexical, corpus_id=corpus_id(inputs.corpus_dir),
                      progress=cfg.runtime.progress, n_docs_hint=len(corpus))


def build_graph_step(cfg: Config, dest: Path, inputs):
    corpus = inputs.corpus or Corpus(inputs.corpus_dir)  # with the citation lookups the graph reads
    graph = build_graph(corpus, dest, cfg.graph.resolutions, cfg.graph.leiden_seed, corpus_id=corpus_id(inputs.corpus_dir),
                        progress=cfg.runtime.progress)
    if not has_court_edges(graph):
        log.warning("graph: %s", NO_COURT_EDGES)  # not the staging folder's path, gone when this is read
    return graph


def build_embeddings_step(cfg: Config, dest: Path, inputs):
    from lexrag.index.embeddings import build_embeddings

    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    kw, sc = dict(inputs.extra), cfg.semantic
    return build_embeddings(corpus, kw.pop("model", sc.model), dest, corpus_id=corpus_id(inputs.corpus_dir),
                            shard_size=sc.shard_size, batch_size=sc.batch_size, max_seq=sc.max_seq, fields=sc.fields,
                            device=sc.device, fp16=sc.fp16, devices=sc.devices or None, progress=cfg.runtime.progress, **kw)


def build_prior_step(cfg: Config, dest: Path, inputs) -> None:
    p = build_prior(inputs.train, dest)
    log.info("prior: %d training queries from %s", len(p), inputs.train)


def load_corpus_step(folder: Path, cfg: Config, art) -> Corpus:
    return Corpus(folder)


def load_bm25_step(folder: Path, cfg: Config, art):
    from lexrag.index.lexical import BM25Index

    index = BM25Index.load(folder, cfg.lexical, corpus_id=corpus_id(art.corpus_dir), n_docs=len(art.corpus))
    index.check_corpus(art.corpus, folder)
    return index


def load_graph_step(folder: Path, cfg: Config, art):
    from lexrag.index.graph import CitationGraph

    return CitationGraph.load(folder, len(art.corpus), corpus_id=corpus_id(art.corpus_dir), resolutions=cfg.graph.resolutions,
                              aliases=art.corpus.aliases_digest)


def load_prior_step(folder: Path, cfg: Config, art):
    from lexrag.index.prior import TrainingPrior

    return TrainingPrior.load(folder)


COURTS_FILE = "court_considerations.csv"


def courts_beside(laws: str | Path | None, courts: str | Path | bool | None, say: bool = True) -> Path | None:
    """The court considerations a corpus build reads: ``courts`` as given; when it is ``None``,
    ``court_considerations.csv`` beside ``laws`` if there is one (the competition ships them side
    by side); ``False`` (or ``""``, ``"false"``, ``"none"``) for laws only.  Each choice is logged
    (unless ``say`` is off: a caller that prints its own line), since a corpus without courts
    gives a graph without edges."""
    warn, info = (log.warning, log.info) if say else (lambda *a: None, lambda *a: None)
    if isinstance(courts, str) and courts.strip().lower() in ("", "false", "none", "no"):
        courts = False
    if courts is False:
        warn("courts: off by request: the corpus holds laws only (no graph is built unless graph.enabled is on, and "
             "then without court edges)")
        return None
    if courts is not None and courts is not True:
        return Path(courts)
    beside = Path(laws).parent / COURTS_FILE if laws else None
    if beside is not None and beside.is_file():
        info("courts: %s (beside the laws file; pass courts=False / --no-courts for laws only)", beside)
        return beside
    warn("courts: none given and no %s beside %s: the corpus holds laws only (no graph is built unless "
         "graph.enabled is on, and then without court edges)", COURTS_FILE, laws)
    return None


NO_COURT_EDGES = ("the graph has no court edges (the corpus holds no court considerations that cite): runs leave the "
                  "graph signals off over it; build the corpus with court_considerations.csv (notebook 01) and rebuild")


def has_court_edges(graph) -> bool:
    """A graph with at least one citation edge; without one (a law-only corpus) the graph signals
    carry nothing but article siblings, which lowered Macro F1 on held-out legal areas."""
    return graph.adj.nnz > 0


def check_build_inputs(out: Path, laws, courts=None, law_keys=None, train=None, abbreviations=None) -> None:
    """Raise :class:`CsvInputError` naming the first input that cannot be used for a build into ``out``."""
    import csv

    from lexrag.outputs import check_outside_artifacts

    check_outside_artifacts(out, "--out", "build the artifacts into a folder of their own (nothing was built)")
    from lexrag.registry import ARTIFACTS

    replaced = [out / a.name for a in ARTIFACTS if a.in_build]  # the folders `lexrag build` may replace
    for path, what, required in ((laws, "--laws", ("citation", "text")), (courts, "--courts", ("citation", "text")),
                                 (law_keys, "--law-keys", ()), (train, "--train", ("query_id", "gold_citations")),
                                 (abbreviations, "--abbreviations", ())):
        if path is None:
            continue
        p = Path(path)
        try:  # missing, a folder, or UTF-16/UTF-32 text
            check_input_file(p)
        except CsvInputError as e:
            raise CsvInputError(f"{what} {e} (nothing was built or changed in {out})") from None
        for folder in replaced:
            if folder.resolve() in p.resolve().parents:
                raise CsvInputError(f"{what} {p} lies inside {folder}, which the build replaces; move it out first")
        if required:
            try:
                with open(p, encoding="utf-8-sig", errors="replace", newline="") as f:
                    header = [h.strip() for h in next(csv.reader(f), [])]
            except csv.Error as e:
                raise CsvInputError(f"{what} {p}: line 1: the header is not valid CSV ({e})") from None
            missing = [c for c in required if c not in header]
            if missing:
                raise CsvInputError(f"{what} {p}: missing column(s) {', '.join(missing)}; header is {header} "
                                    f"(nothing was built or changed in {out})")


def warn_gold_outside(train: str | Path, corpus: Corpus) -> int:
    """Warn, naming the file and a few examples, when gold citations of the training file are not
    citations of the corpus: what is trained on them (the prior, the ranker) cannot learn from them,
    and a wrong file (another corpus's gold, the laws file) shows here.  Returns their count."""
    from lexrag.queries import load_gold

    gold = load_gold(train)
    outside = corpus.lacks(c for cs in gold.values() for c in cs)
    total = sum(len(cs) for cs in gold.values())
    if outside:
        log.warning("--train %s: %d of %d gold citations are not citations of the corpus (e.g. %s): nothing is learned from "
                    "them; give the laws, --law-keys and court considerations they come from, or check it is the right "
                    "training file", train, len(outside), total, "; ".join(repr(c) for c in outside[:3]))
    return len(outside)


def build_artifacts(
    cfg: Config,
    laws: str | Path,
    out_dir: str | Path,
    courts: str | Path | None = None,
    law_keys: str | Path | None = None,
    train: str | Path | None = None,
    abbreviations: str | Path | None = None,
    dictionary: str | Path | None = None,
) -> dict:
    """Build every artifact this config needs under ``out_dir``: ``corpus/``, then ``bm25/``,
    ``embeddings/`` and ``graph/`` as switched on, and ``prior/`` when a training file is given.

    Every input is checked first (it exists, is a file, has the columns it needs, does not lie
    inside a folder the build replaces), so a wrong path fails in seconds, not after hours; each
    artifact is built in a staging folder and replaces the old one only when it is complete."""
    from lexrag.registry import ARTIFACTS, BuildInputs

    out = Path(out_dir)
    check_build_inputs(out, laws, courts, law_keys, train, abbreviations)
    inputs = BuildInputs(laws=laws, courts=courts, law_keys=law_keys, train=train, abbreviations=abbreviations,
                         dictionary=dictionary)
    # what this build makes (the graph whenever court considerations are given, so a run may switch it on
    # though the defaults leave it off)
    todo = [a for a in ARTIFACTS if a.to_build(cfg, inputs)]
    for a in ARTIFACTS:  # asked for by the config, but its input is not given: said, not silently left out
        if a.in_build and a.switch and a.wanted(cfg) and not a.has_input(inputs):
            warnings.warn(f"{a.switch} is on, but {a.name} is not built: it is built from {a.input_flag}, which this "
                          "build was not given")
    if any(a.name == "corpus" for a in todo):  # an index this build leaves would lie over the replaced corpus
        for a in ARTIFACTS:
            if "corpus" in a.depends_on and a not in todo and (out / a.name / PARAMS).is_file():
                why = (f"it is built from {a.input_flag}, not given" if not a.has_input(inputs) else
                       f"{a.switch} is off" + (f" and --{a.build_with} is not given" if a.build_with else ""))
                log.warning("%s: this build replaces the corpus but not %s (%s), so it stays over the old corpus and "
                            "runs refuse it: rebuild it (%s) or remove the folder", a.name, out / a.name, why, a.rebuild)
    for a in todo:  # before any work: a folder of other files there is never replaced
        check_replaceable(out / a.name)
    with staged_set(out) as stage:
        inputs.corpus_dir = stage / "corpus"
        for a in todo:
            t = time.perf_counter()
            result = a.build_step()(cfg, stage / a.name, inputs)
            if a.name == "corpus":
                inputs.corpus = Corpus(stage / "corpus", lookups=False)  # the graph build makes them when it needs them
                report = result
                log.info("corpus: %d documents in %.1fs", len(inputs.corpus), time.perf_counter() - t)
                if train:
                    warn_gold_outside(train, inputs.corpus)
                continue
            if result is False:
                raise ArtifactError(f"{a.name}: incomplete (a shard or time limit); build it with "
                                    f"notebooks/{a.notebook} or build_datasets.py --only {a.name}, which resume")
            if a.name != "prior":
                log.info("%s: built in %.1fs", a.name, time.perf_counter() - t)
    return report
