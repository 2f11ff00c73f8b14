"""The catalogue of what a run loads and a build makes: one :class:`ArtifactSpec` per part.

Each artifact declares its spec in the module that owns it (``SPEC = declare(ArtifactSpec(...))``
beside its load and build steps): the corpus and the indexes in :mod:`lexrag.index`, the ranker in
:mod:`lexrag.stages.ranker` (its build, which runs the pipeline, bound by :mod:`lexrag.pipeline.ranker_fit`;
BM25's likewise by :mod:`lexrag.index.bm25_build`), the LLM cache in
:mod:`lexrag.llm.cache`, the wheels in :mod:`lexrag.io.wheels`; the parts a run loads that no
build makes (the dense index with its encoder, the reranker, the calibration, the LLM) in
:mod:`lexrag.pipeline.artifacts`.  A spec says its name, dataset, title and description, the
build inputs it reads, its build and load steps, the command that rebuilds it, how to get it
back when it is missing, and its licence; the manifest's fields, the build command lines' input
flags (:data:`INPUTS`), the run status's fixes and ``build_datasets.py`` read them from here.
:mod:`lexrag.pipeline.catalogue` imports every owning module, so the catalogue is whole wherever
a run or a build is; below it, a module sees its own entry (a message names its rebuild command).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from lexrag.config import Config

__all__ = ["ArtifactSpec", "BuildInput", "BuildInputs", "INPUTS", "ARTIFACTS", "spec", "names", "declare", "withdraw",
           "rebuild_command", "fix_for", "build_order", "bind_build", "add_input_arguments", "input_flag", "loadable"]


@dataclass(frozen=True)
class BuildInput:
    """A file a build reads, as the build command lines take it: ``field`` of :class:`BuildInputs`,
    its flag and the help both ``lexrag build`` and ``build_datasets.py`` show."""

    field: str
    flag: str
    metavar: str
    help: str
    datasets_only: bool = False  # read only by build_datasets.py (what `lexrag build` never makes reads it)


INPUTS: tuple[BuildInput, ...] = (
    BuildInput("laws", "--laws", "LAWS.csv", "laws_de.csv: the law paragraphs (needed to build the corpus)"),
    BuildInput("courts", "--courts", "COURTS.csv", "court_considerations.csv (default: the one beside --laws, when there is one)"),
    BuildInput("law_keys", "--law-keys", "KEYS.txt", "law citation keys, one per line; keys missing from --laws join with "
               "empty text"),
    BuildInput("abbreviations", "--abbreviations", "JSON", "abbrev-translations.json of the competition's starter kit: the "
               "French and Italian abbreviations of the law codes, so citations written with them resolve"),
    BuildInput("headings", "--headings", "HEADINGS.csv", "citation,article_heading,path CSV (scripts/make_headings.py makes one "
               "from public Fedlex-derived snapshots): each law paragraph's article heading and the headings above it, indexed "
               "beside its text"),
    BuildInput("train", "--train", "TRAIN.csv", "a training CSV with gold_citations: builds the prior, and the ranker with a "
               "config that switches it on (never the validation file)"),
    BuildInput("dictionary", "--dictionary", "FILE", "the English-German dictionary for the dictionary artifact: Ding's "
               "/usr/share/trans/de-en (Debian trans-de-en) or FreeDict's /usr/share/dictd/freedict-eng-deu.index"),
    BuildInput("laws_en", "--laws-en", "LAWS_EN.csv", "citation,text,title CSV of the laws' English texts keyed by their German "
               "citations: builds the English BM25 index (bm25_en) that english.enabled searches; its licence is not settled, so keep "
               "it private"),
    BuildInput("llm_cache", "--llm-cache", "DIR", "an LLM cache folder a live run filled (llm.cache_dir): shipped for replay",
               datasets_only=True),
)


def input_flag(name: str) -> str:
    """How a user gives build input ``name`` (a :class:`BuildInputs` field): its flag and a
    placeholder, with what it is."""
    i = next(i for i in INPUTS if i.field == name)
    return f"{i.flag} {i.metavar} ({i.help.split(':')[0]})"


def add_input_arguments(parser: argparse.ArgumentParser, datasets: bool, required: tuple[str, ...] = ()) -> None:
    """Add the build-input flags of :data:`INPUTS` to ``parser``: those ``lexrag build`` reads, and
    with ``datasets`` those only ``build_datasets.py`` reads; ``required`` among them required."""
    for i in INPUTS:
        if datasets or not i.datasets_only:
            parser.add_argument(i.flag, required=i.field in required, metavar=i.metavar, help=i.help)


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
    """One part of the catalogue: an artifact a build makes (``dataset`` set) or a part a run loads
    that no build makes (a model, the calibration: ``dataset`` empty, ``fix`` says how to get it)."""

    name: str
    depends_on: tuple[str, ...] = ()
    switch: str | None = None  # config field that asks for it ("lexical.enabled"); None: always
    needs_input: str | None = None  # BuildInputs field without which the build skips it ("train")
    reads: tuple[str, ...] = ()  # every BuildInputs field its build step reads (the input flags it owns)
    dataset: str = ""  # its Kaggle dataset; empty for a part no build makes
    title: str = ""  # the dataset's title
    description: str = ""  # what the dataset holds (the manifest and dataset-metadata.json)
    builder: str = ""  # the build_datasets.py command recorded in the manifest
    notebook: str | None = None
    attr: str | None = None  # the Artifacts attribute its load step fills; None: not loaded by a run
    model: str | None = None  # config field naming a model folder its load step reads ("toy.model"): located first,
    # put in Artifacts.model_paths under the artifact's name; its loader goes in Artifacts.loaders for the model pool
    in_build: bool = True  # `lexrag build` makes it (wheels and the LLM cache come from build_datasets.py only)
    build_with: str | None = None  # BuildInputs field: built whenever it is given, even with the switch off
    rebuild: str = ""  # the command that rebuilds it, for the messages that refuse a broken one
    fix: str = ""  # how to get it back when a run misses it (default: attach its dataset or rebuild it)
    only_when_wanted: bool = False  # with needs_input: built only when the config also asks for it (the ranker)
    # what its dataset's licence is: "competition" (built from the competition's files or its training gold:
    # the competition's rules govern it, kept private), "own" (the licence its params.json records: its
    # source's), "wheels" (the carried packages' own licences, listed in the dataset)
    licence: str = "competition"
    build: Callable | None = None  # step(cfg, dest, inputs) -> bool | None (False: incomplete, run again to resume);
    # the wheels' step(dest, manifest_entry)
    load: Callable | None = None  # an artifact's step(folder, cfg, art) -> object; a part's step(loading)
    # the module that binds its build step (bind_build), when the build sits a floor above the load: BM25's
    # build imports the index it writes; the ranker's runs the pipeline.  Declared with its load, every
    # message about it names its rebuild wherever it is loaded.
    build_in: str | None = None

    @property
    def input_flag(self) -> str | None:
        return input_flag(self.needs_input) if self.needs_input else None

    @property
    def is_artifact(self) -> bool:
        return bool(self.dataset)

    def to_build(self, cfg: "Config", inputs: "BuildInputs") -> bool:
        """``lexrag build`` makes it: its input is there, and the config asks for it, or it reads an
        input of its own (the prior from --train), or the input it is built with is given."""
        if not self.is_artifact or not self.in_build:
            return False
        if self.only_when_wanted:
            return self.has_input(inputs) and self.wanted(cfg)
        return self.has_input(inputs) and (bool(self.needs_input) or self.wanted(cfg)
                                           or bool(self.build_with and getattr(inputs, self.build_with)))

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

    def how_to_get(self) -> str:
        """How to provide it when a run misses it: its own ``fix``, else attach its dataset (built
        over the attached corpus, when it is) or rebuild it."""
        if self.fix:
            return self.fix
        over = " built over the attached corpus" if "corpus" in self.depends_on else ""  # the dictionary reads no corpus
        return f"attach the {self.dataset} dataset{over}, or build it: {self.rebuild}"


ARTIFACTS: list[ArtifactSpec] = []  # in declaration order; build_order() is the order a build follows


def declare(s: ArtifactSpec) -> ArtifactSpec:
    """Add a part to the catalogue, once, where its module is imported (in whatever order the
    modules are: :func:`build_order` orders them, and says what an entry depends on that no
    entry provides)."""
    _check_names(s)
    if any(a.name == s.name for a in ARTIFACTS):
        raise ValueError(f"an artifact named {s.name!r} is already registered")
    unknown = [f for f in (s.needs_input, s.build_with, *s.reads) if f and f not in {i.field for i in INPUTS}]
    if unknown:
        raise ValueError(f"artifact {s.name!r} reads build inputs {unknown}, which INPUTS does not hold")
    if s.is_artifact and s.build is None and not s.build_in:
        raise ValueError(f"artifact {s.name!r}: a dataset needs its build step (or build_in, the module that binds it)")
    if (s.attr is not None) != (s.is_artifact and s.load is not None):
        raise ValueError(f"artifact {s.name!r}: give a load step exactly when attr names what it fills")
    ARTIFACTS.append(s)
    return s


_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a plain folder name: the build writes OUT/<name>, a dataset holds <name>/


def _check_names(s: ArtifactSpec) -> None:
    """Refuse, in one line, a spec whose name is no plain folder name ("../evil" would write outside
    the build's folder, "" into the folder itself), whose ``switch`` or ``model`` names no config
    field, or whose ``depends_on`` or ``reads`` is not a tuple of names: each would fail only later,
    in a build or a run, with a traceback."""
    if not isinstance(s.name, str) or not _NAME.fullmatch(s.name):
        raise ValueError(f"artifact name {s.name!r} is not a plain folder name: use lower-case letters, digits and _, "
                         "starting with a letter (e.g. 'toy_index')")
    for what in ("depends_on", "reads"):
        value = getattr(s, what)
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"artifact {s.name!r}: {what}={value!r} must be a tuple of names, e.g. ('corpus',)")
    for what in ("switch", "model"):
        value = getattr(s, what)
        if value is None or (what == "switch" and value == "prior"):  # "prior": the config's uses_prior()
            continue
        problem = _config_field_problem(value, "lexical.enabled" if what == "switch" else "semantic.model")
        if problem:
            raise ValueError(f"artifact {s.name!r}: {what}={value!r} {problem}")


def _config_field_problem(value: object, example: str) -> str:
    """Why ``value`` is not ``section.field`` naming a field of the config ("" when it is one); a
    section registered with :func:`lexrag.config.register_section` counts (register it first)."""
    import dataclasses

    from lexrag.config import EXTRA_SECTIONS, Config  # the same floor; the config imports nothing of the registry

    if not isinstance(value, str) or value.count(".") != 1:
        return f"must be 'section.field' naming a config field, e.g. {example!r}"
    section, fld = value.split(".")
    sections = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # each section's dataclass
    cls = EXTRA_SECTIONS.get(section) or sections.get(section)
    if cls is None:
        return (f"names no config section {section!r}: register the section first (lexrag.config.register_section) "
                "or use one of " + ", ".join([*sections, *EXTRA_SECTIONS]))
    if fld not in {f.name for f in dataclasses.fields(cls)}:
        known = ", ".join(f.name for f in dataclasses.fields(cls))
        return f"names no field of config section {section!r}; its fields: {known}"
    return ""


def bind_build(name: str, step: Callable) -> ArtifactSpec:
    """Give declared artifact ``name`` its build step, from the module its spec names in
    ``build_in`` (a floor above the module that declares it)."""
    import dataclasses

    i = next((i for i, a in enumerate(ARTIFACTS) if a.name == name), None)
    if i is None:
        raise ValueError(f"no artifact named {name!r} is declared: import the module that declares it first")
    a = ARTIFACTS[i]
    if a.build is not None or a.build_in != getattr(step, "__module__", None):  # a step of the module the spec names
        raise ValueError(f"artifact {name!r}: its build step is bound by {a.build_in or 'its own declaration'}, once")
    ARTIFACTS[i] = dataclasses.replace(a, build=step)
    return ARTIFACTS[i]


def withdraw(name: str) -> None:
    ARTIFACTS[:] = [a for a in ARTIFACTS if a.name != name]


def rebuild_command(name: str) -> str:
    """The command that rebuilds ``name`` (for a part no build makes, how to get it)."""
    for a in ARTIFACTS:
        if a.name == name:
            return a.rebuild or a.fix
    return "rebuild the artifact"


def fix_for(part: str) -> str:
    """How to provide missing part ``part`` (from its spec), or "" for a name the catalogue lacks."""
    for a in ARTIFACTS:
        if a.name == part:
            return a.how_to_get()
    return ""


def names() -> list[str]:
    """The artifacts a dataset holds, in build order."""
    return [a.name for a in build_order()]


def loadable() -> list[str]:
    """Every part a run can load after the corpus: an artifact with a load step, or a part."""
    return [a.name for a in ARTIFACTS if a.name != "corpus" and a.load is not None]


def build_order() -> list[ArtifactSpec]:
    """The artifacts a dataset holds in the order a build makes them: each after what it depends
    on, level by level, the corpus first and then by name within a level (the same order however
    the modules were imported)."""
    by_name = {a.name: a for a in ARTIFACTS}
    level: dict[str, int] = {}

    def depth(name: str, seen: tuple[str, ...]) -> int:
        if name not in by_name:
            raise ValueError(f"artifact {seen[-1]!r} depends on {name!r}, which no entry of the catalogue provides")
        if name in seen:
            raise ValueError(f"artifacts depend on each other in a circle: {' -> '.join(seen + (name,))}")
        if name not in level:
            level[name] = 1 + max((depth(d, seen + (name,)) for d in by_name[name].depends_on), default=-1)
        return level[name]

    arts = [a for a in ARTIFACTS if a.is_artifact]
    for a in ARTIFACTS:
        depth(a.name, ())
    return sorted(arts, key=lambda a: (level[a.name], a.name != "corpus", a.name))


def spec(name: str) -> ArtifactSpec:
    for a in ARTIFACTS:
        if a.name == name:
            return a
    raise KeyError(f"no artifact named {name!r}; known: {', '.join(a.name for a in ARTIFACTS)}")
