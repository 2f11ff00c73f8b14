"""The artifact catalogue: every artifact a run can load or a build can make, declared once.

Each :class:`ArtifactSpec` says what an artifact is: what it depends on, the config switch or
build input that asks for it, its Kaggle dataset and build notebook, the
:class:`lexrag.pipeline.Artifacts` attribute it fills, and the command that rebuilds it.  These
are plain data, so every floor of the package can read them (an index's error message names its
rebuild command).  The functions that build and load each artifact are bound to these entries in
:mod:`lexrag.pipeline.build`, the floor that sees every step; adding an artifact is one entry
here, one there, and its two steps in the module that owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from lexrag.config import Config

__all__ = ["ArtifactSpec", "BuildInputs", "ARTIFACTS", "spec", "names", "declare", "withdraw", "rebuild_command"]


@dataclass
class BuildInputs:
    """The files a build reads; ``corpus_dir`` is the corpus the indexes are built over."""

    laws: str | Path | None = None
    courts: str | Path | None = None
    law_keys: str | Path | None = None
    train: str | Path | None = None
    abbreviations: str | Path | None = None
    headings: str | Path | None = None  # citation,article_heading,path: the laws' headings, indexed beside their text
    laws_en: str | Path | None = None  # citation,text,title: English texts of the laws keyed by their German citations
    llm_cache: str | Path | None = None
    dictionary: str | Path | None = None  # a bilingual dictionary file (Ding's de-en)
    corpus_dir: str | Path | None = None
    corpus: Any = None  # a loaded lexrag.index.corpus.Corpus, shared by the index builds
    extra: dict = field(default_factory=dict)  # passed to the build step (embeddings: model, max_shards, ...)


@dataclass(frozen=True)
class ArtifactSpec:
    name: str
    depends_on: tuple[str, ...] = ()
    switch: str | None = None  # config field that asks for it ("lexical.enabled"); None: always
    needs_input: str | None = None  # BuildInputs field without which the build skips it ("train")
    input_flag: str | None = None  # how a user gives that input ("--train TRAIN.csv")
    dataset: str = ""
    notebook: str | None = None
    attr: str | None = None  # the Artifacts attribute its load step fills; None: not loaded by a run
    model: str | None = None  # config field naming a model folder its load step reads ("toy.model"): located first,
    # put in Artifacts.model_paths under the artifact's name; its loader goes in Artifacts.loaders for the model pool
    in_build: bool = True  # `lexrag build` makes it (wheels and the LLM cache come from build_datasets.py only)
    build_with: str | None = None  # BuildInputs field: built whenever it is given, even with the switch off
    rebuild: str = ""  # the command that rebuilds it, for the messages that refuse a broken one
    only_when_wanted: bool = False  # with needs_input: built only when the config also asks for it (the ranker)
    # what its dataset's licence is: "competition" (built from the competition's files or its training gold:
    # the competition's rules govern it, kept private), "own" (the licence its params.json records: its
    # source's), "wheels" (the carried packages' own licences, listed in the dataset)
    licence: str = "competition"

    def to_build(self, cfg: "Config", inputs: "BuildInputs") -> bool:
        """``lexrag build`` makes it: its input is there, and the config asks for it, or it reads an
        input of its own (the prior from --train), or the input it is built with is given."""
        if self.only_when_wanted:
            return self.in_build and self.has_input(inputs) and self.wanted(cfg)
        return (self.in_build and self.has_input(inputs)
                and (bool(self.needs_input) or self.wanted(cfg) or bool(self.build_with and getattr(inputs, self.build_with))))

    def wanted(self, cfg: "Config") -> bool:
        """The config asks for it (``switch`` on, or no switch)."""
        if self.switch is None:
            return True
        if self.switch == "prior":
            return bool(cfg.uses_prior())
        section, fld = self.switch.split(".")
        return bool(getattr(getattr(cfg, section), fld))

    def has_input(self, inputs: BuildInputs) -> bool:
        return self.needs_input is None or bool(getattr(inputs, self.needs_input))


ARTIFACTS: list[ArtifactSpec] = [
    ArtifactSpec("corpus", needs_input="laws", input_flag="--laws laws_de.csv", dataset="lexrag-corpus",
                 notebook="01_build_corpus", attr="corpus",
                 rebuild="python -m lexrag build --laws LAWS.csv [--courts COURTS.csv] [--abbreviations abbrev-translations.json] "
                         "[--headings HEADINGS.csv] --out ARTIFACTS (or build_datasets.py --only corpus)"),
    ArtifactSpec("bm25", ("corpus",),
                 switch="lexical.enabled", dataset="lexrag-bm25", notebook="02_build_bm25", attr="bm25",
                 rebuild="python -m lexrag build ... --out ARTIFACTS (or build_datasets.py --only bm25)"),
    ArtifactSpec("embeddings", ("corpus",),
                 switch="semantic.enabled", dataset="lexrag-embeddings", notebook="04_build_embeddings",
                 rebuild="notebooks/04_build_embeddings (or build_datasets.py --only embeddings) on a GPU"),
    ArtifactSpec("graph", ("corpus",),
                 switch="graph.enabled", dataset="lexrag-graph", notebook="03_build_graph", attr="graph", build_with="courts",
                 rebuild="python -m lexrag build ... --courts COURTS.csv --out ARTIFACTS (or build_datasets.py --only graph)"),
    ArtifactSpec("prior", switch="prior", needs_input="train", input_flag="--train TRAIN.csv (a training CSV with gold_citations)",
                 dataset="lexrag-prior", attr="prior",
                 rebuild="python -m lexrag build ... --train TRAIN.csv --out ARTIFACTS (or build_datasets.py --only prior)"),
    ArtifactSpec("ranker", ("corpus", "bm25"), switch="ranker.enabled", needs_input="train", only_when_wanted=True,
                 input_flag="--train TRAIN.csv (a training CSV with gold_citations)", dataset="lexrag-ranker", attr="ranker",
                 rebuild="python -m lexrag build ... --train TRAIN.csv --config CONFIG --out ARTIFACTS, CONFIG the one "
                         "that runs it (exam) (or build_datasets.py --only ranker --train TRAIN.csv --config CONFIG)"),
    ArtifactSpec("dictionary", switch="dictionary.enabled", needs_input="dictionary", licence="own",
                 input_flag="--dictionary FILE (Ding's de-en file: apt-get install trans-de-en puts it at /usr/share/trans/de-en)",
                 dataset="lexrag-dictionary", attr="dictionary",
                 rebuild="python -m lexrag build ... --dictionary /usr/share/trans/de-en --out ARTIFACTS "
                         "(or build_datasets.py --only dictionary --dictionary FILE)"),
    ArtifactSpec("bm25_en", ("corpus",), switch="english.enabled", needs_input="laws_en", build_with="laws_en", licence="own",
                 input_flag="--laws-en laws_en.csv (English texts of the laws keyed by their German citations)",
                 dataset="lexrag-bm25-en", attr="bm25_en",
                 rebuild="python -m lexrag build ... --laws-en laws_en.csv --out ARTIFACTS "
                         "(or build_datasets.py --only corpus,bm25_en --laws-en laws_en.csv)"),
    ArtifactSpec("llm_cache", switch="llm.enabled", needs_input="llm_cache",
                 input_flag="--llm-cache DIR (the llm.cache_dir of a live run)", dataset="lexrag-llm-cache", in_build=False,
                 rebuild="a live run fills llm.cache_dir; build_datasets.py --only llm_cache --llm-cache DIR exports it "
                         "(or attach the lexrag-llm-cache dataset)"),
    ArtifactSpec("wheels", dataset="lexrag-wheels", in_build=False, licence="wheels",
                 rebuild="python build_datasets.py --only wheels --out DATASETS"),
]


def declare(s: ArtifactSpec) -> ArtifactSpec:
    """Add an artifact's entry (after the built-in ones; its dependencies must come first); its
    steps are bound by :func:`lexrag.pipeline.build.register_artifact`, which calls this."""
    if any(a.name == s.name for a in ARTIFACTS):
        raise ValueError(f"an artifact named {s.name!r} is already registered")
    missing = [d for d in s.depends_on if d not in names()]
    if missing:
        raise ValueError(f"artifact {s.name!r} depends on {missing}, which no earlier entry provides")
    ARTIFACTS.append(s)
    return s


def withdraw(name: str) -> None:
    ARTIFACTS[:] = [a for a in ARTIFACTS if a.name != name]


OTHER_REBUILDS = {"calibration": "python -m lexrag calibrate --queries FILE --artifacts ARTIFACTS"}  # not datasets


def rebuild_command(name: str) -> str:
    """The command that rebuilds artifact ``name``."""
    for a in ARTIFACTS:
        if a.name == name and a.rebuild:
            return a.rebuild
    return OTHER_REBUILDS.get(name, "rebuild the artifact")


def names() -> list[str]:
    return [a.name for a in ARTIFACTS]


def spec(name: str) -> ArtifactSpec:
    for a in ARTIFACTS:
        if a.name == name:
            return a
    raise KeyError(f"no artifact named {name!r}; known: {', '.join(names())}")
