"""The build and load steps of the corpus and its indexes, and the checks a build makes first.

The steps are bound to their catalogue entries in :mod:`lexrag.pipeline.build`, which walks them
for ``python -m lexrag build``, ``build_datasets.py``, the build notebooks and the benchmarks.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lexrag.errors import ArtifactError, CsvInputError
from lexrag.io.csvio import check_input_file
from lexrag.index.corpus import Corpus
from lexrag.registry import build_order

__all__ = ["check_build_inputs", "courts_beside", "warn_gold_outside"]

log = logging.getLogger(__name__)


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


def check_build_inputs(out: Path, laws, courts=None, law_keys=None, train=None, abbreviations=None, dictionary=None,
                       headings=None, laws_en=None) -> None:
    """Raise :class:`CsvInputError` (:class:`ArtifactError` for the dictionary) naming the first
    input that cannot be used for a build into ``out``."""
    import csv

    from lexrag.index.dictionary_sources import check_source
    from lexrag.io.outputs import check_outside_artifacts

    check_outside_artifacts(out, "--out", "build the artifacts into a folder of their own (nothing was built)")
    replaced = [out / a.name for a in build_order() if a.in_build]  # the folders `lexrag build` may replace
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
