"""The build and load steps of the corpus and its indexes, and the checks a build makes first.

The steps are bound to their catalogue entries in :mod:`lexrag.pipeline.build`, which walks them
for ``python -m lexrag build``, ``build_datasets.py``, the build notebooks and the benchmarks.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lexrag.artifacts import corpus_id
from lexrag.config import Config
from lexrag.errors import ArtifactError, CsvInputError
from lexrag.io.csvio import check_input_file
from lexrag.index.corpus import Corpus, build_corpus
from lexrag.index.graph import LEIDEN_SEED, build_graph
from lexrag.index.bm25_build import build_bm25
from lexrag.index.prior import build_prior
from lexrag.registry import ARTIFACTS

__all__ = ["check_build_inputs", "courts_beside", "has_court_edges", "warn_gold_outside"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- steps (bound in lexrag.pipeline.build)


def build_corpus_step(cfg: Config, dest: Path, inputs) -> dict:
    return build_corpus(dest, inputs.laws, inputs.courts, cfg.corpus, progress=cfg.runtime.progress, law_keys=inputs.law_keys,
                 abbreviations=inputs.abbreviations, headings=inputs.headings)


def build_bm25_step(cfg: Config, dest: Path, inputs):
    corpus = inputs.corpus or Corpus(inputs.corpus_dir, lookups=False)
    absent = corpus.missing_fields(cfg.lexical.fields)
    if absent:  # said, not silent: the index is built, without what those fields would add
        log.warning("bm25: lexical.fields names %s, which the corpus lacks (it was built without --headings): indexed as "
                    "empty; build the corpus with --headings HEADINGS.csv (scripts/make_headings.py makes one) for the "
                    "statute headings", " and ".join(absent))
    return build_bm25(corpus.iter_texts(fields=cfg.lexical.fields), dest, cfg.lexical, corpus_id=corpus_id(inputs.corpus_dir),
                      progress=cfg.runtime.progress, n_docs_hint=len(corpus))


def build_graph_step(cfg: Config, dest: Path, inputs):
    corpus = inputs.corpus or Corpus(inputs.corpus_dir)  # with the citation lookups the graph reads
    graph = build_graph(corpus, dest, cfg.graph.resolutions, LEIDEN_SEED, corpus_id=corpus_id(inputs.corpus_dir),
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
                              aliases=art.corpus.aliases_digest, parents=art.corpus.parents)


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


def check_build_inputs(out: Path, laws, courts=None, law_keys=None, train=None, abbreviations=None, dictionary=None,
                       headings=None, laws_en=None) -> None:
    """Raise :class:`CsvInputError` (:class:`ArtifactError` for the dictionary) naming the first
    input that cannot be used for a build into ``out``."""
    import csv

    from lexrag.index.dictionary import check_source
    from lexrag.io.outputs import check_outside_artifacts

    check_outside_artifacts(out, "--out", "build the artifacts into a folder of their own (nothing was built)")
    replaced = [out / a.name for a in ARTIFACTS if a.in_build]  # the folders `lexrag build` may replace
    if dictionary is not None:
        try:
            check_source(Path(dictionary))
        except ArtifactError as e:
            raise ArtifactError(f"{e} (nothing was built or changed in {out})") from None
    for path, what, required in ((laws, "--laws", ("citation", "text")), (courts, "--courts", ("citation", "text")),
                                 (law_keys, "--law-keys", ()), (train, "--train", ("query_id", "gold_citations")),
                                 (abbreviations, "--abbreviations", ()),
                                 (headings, "--headings", ("citation", "article_heading", "path")),
                                 (laws_en, "--laws-en", ("citation", "text"))):
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
