"""The stage protocol: one small interface for every stage, grouped in phases.

A stage has a ``name``, a ``family``, a ``phase``, says whether it is ``essential`` (still run
when the time budget is spent), whether it is ``enabled`` under a config and the loaded
artifacts, and ``run(batch, ctx)`` over a :class:`BatchState` (a chunk of query states plus what
earlier stages produced).  What ``run`` returns depends on the phase:

=================  ==========================================================================
phase              ``run`` returns
=================  ==========================================================================
``REWRITE``        ``{query_id: [Variant, ...]}``: new query variants
``CONTENT``        ``[Ranking, ...]``: one per signal (``bm25_de``, ``dense_query``, ...)
``SEED_FUSION``    one ``Ranking``: the candidates that seed the graph signals
``GRAPH``          ``[Ranking, ...]``: graph and prior signals
``FUSION``         one ``Ranking``: all signals fused
``RERANK``         one ``Ranking``: the reordered candidates (reranker, verifier, agentic loop)
``COUNT``          one ``Ranking`` of family ``final``: the emitted documents
=================  ==========================================================================

The pipeline (:mod:`lexrag.pipeline`) walks the phases in this order, calls each enabled stage
on chunks of ``runtime.batch_size`` queries, times it, checks the budget before each call and
records what it skipped; stages never look at the clock.  A new stage is a class with these
attributes registered with :func:`register_stage`.
"""

from __future__ import annotations


import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from lexrag.config import section_names
from lexrag.errors import StageError
from lexrag.queries import QueryState
from lexrag.ranking import Ranking
from lexrag.registry import loadable
from lexrag.signals import register_signal

if TYPE_CHECKING:  # pragma: no cover
    from lexrag.config import Config
    from lexrag.llm.client import LLMClient
    from lexrag.models import ModelPool

__all__ = [
    "Phase",
    "Stage",
    "BatchState",
    "Context",
    "register_stage",
    "unregister_stage",
    "registered_stages",
    "stages_for",
    "asked_for",
    "needs_of",
    "stages_read",
    "STAGE_ORDER",
    "check_degrade_order",
    "RETRIEVAL_PHASES",
    "check_needs",
    "OptionalBM25Stage",
]

log = logging.getLogger(__name__)


def check_needs(stages: list["Stage"]) -> None:
    """Every part ``stages`` need is one a run can load (:func:`lexrag.registry.loadable`: the
    catalogue's artifacts with a load step and the parts no build makes).  Checked when a run
    picks its stages, when every spec is declared; a stage registers before them."""
    known = loadable()
    for stage in stages:
        bad = [n for n in getattr(stage, "needs", ()) if n not in known]
        if bad:
            raise StageError(f"stage {stage.name!r} needs {', '.join(map(repr, bad))}, which no artifact or part of the "
                             f"catalogue loads ({', '.join(known)})")


class Phase(IntEnum):
    REWRITE = 0
    CONTENT = 1
    SEED_FUSION = 2
    GRAPH = 3
    FUSION = 4
    RERANK = 5
    COUNT = 6


RETRIEVAL_PHASES = (Phase.CONTENT, Phase.SEED_FUSION, Phase.GRAPH, Phase.FUSION)


@runtime_checkable
class Stage(Protocol):
    name: str
    family: str
    phase: Phase
    essential: bool
    signals: tuple[str, ...]  # signal names it may emit (registered for config validation)
    needs: tuple[str, ...]  # the loaded parts it reads (lexrag.registry.loadable()), so a run says which stages a missing part turned off
    # (a stage that reads another stage's output also has reads_stages, those stages' names: where one of them did not
    # run for a query, the run status shows the reader partial for it, not "ran"; see stages_read.  Where a stage
    # itself does less than the config asks while its inputs are there, such as the count falling back to count.k
    # without the ranker's probabilities, it says so with ctx.note(stage=..., query_ids=...): the row is partial too.
    # Only llm_seeds reads a stage that may not run for some queries and leaves it nothing else to work on; the
    # stages that read the rewrite's variants search the question as written whatever the rewrite did.)
    # (a stage whose parts depend on its config also has needs_for(cfg): see needs_of)

    def enabled(self, cfg: "Config", art: Any) -> bool: ...

    def run(self, batch: "BatchState", ctx: "Context") -> Any: ...


class OptionalBM25Stage:
    """Shared by the optional content stages that search the BM25 index again (statutes, articles,
    feedback): lexical family, content phase, not essential, and on when the config section named
    like the stage is enabled, the lexical stage is on and a BM25 index is loaded."""

    family = "lexical"
    phase = Phase.CONTENT
    essential = False
    needs = ("bm25",)

    def enabled(self, cfg: "Config", art: Any) -> bool:
        return getattr(cfg, self.name).enabled and cfg.lexical.enabled and art.bm25 is not None


@dataclass
class BatchState:
    """A chunk of query states and what the stages produced so far.

    The dictionaries are shared by every chunk of one run (:meth:`chunk` makes a view), so a
    stage sees all signals of its queries however the run was chunked.
    """

    queries: list[QueryState]
    signals: dict[str, Ranking] = field(default_factory=dict)  # content, graph and prior signals
    seeds: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # seed fusion per query
    fused: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # fusion per query
    current: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # latest order (fused, reranked)
    current_by: dict[str, str] = field(default_factory=dict)  # query id -> stage that made its current order
    final: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # emitted documents
    relevance: dict[str, list[float]] = field(default_factory=dict)  # the learned ranker's probabilities, in its order
    skipped: dict[str, list[str]] = field(default_factory=dict)  # stage -> query ids it skipped
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> query id -> error
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    memory_added: dict[str, float] = field(default_factory=dict)  # stage -> GB of anonymous memory its runs left behind

    def chunk(self, queries: list[QueryState]) -> "BatchState":
        view = BatchState(queries)
        view.__dict__.update({k: v for k, v in self.__dict__.items() if k != "queries"})
        return view

    @property
    def query_ids(self) -> list[str]:
        return [q.query_id for q in self.queries]

    def signal_hits(self, query_id: str) -> list[Ranking]:
        """Every signal with its hits for one query (for a per-query fusion)."""
        return [Ranking(r.signal, r.family, {query_id: r.hits[query_id]}) for r in self.signals.values() if query_id in r.hits]


class LoadedArtifacts(Protocol):
    """What a stage may read of the loaded artifacts (:class:`lexrag.pipeline.Artifacts`)."""

    corpus: Any  # lexrag.index.corpus.Corpus
    bm25: Any  # lexrag.index.lexical.BM25Index or None
    graph: Any  # lexrag.index.graph.CitationGraph or None
    prior: Any  # lexrag.index.prior.TrainingPrior or None
    dense: Any  # lexrag.index.dense.DenseIndex or None

    @property
    def llm_ready(self) -> bool: ...

    def has_model(self, name: str) -> bool: ...

    def loader(self, name: str) -> Callable[[], Any]: ...


class RunBudget(Protocol):
    """The run's time budget as a stage sees it (:class:`lexrag.pipeline.Budget`)."""

    def exhausted(self) -> bool: ...

    def left(self) -> float: ...


class TextCache(Protocol):
    """Per-text results shared by the runs of one process (:class:`lexrag.pipeline.SignalCache`)."""

    def text_key(self, kind: str, section: Any, index: Any, text: str) -> tuple: ...

    def get_text(self, key: tuple) -> Any: ...

    def put_text(self, key: tuple, value: Any) -> None: ...


@dataclass
class Context:
    """What every stage may use: config, loaded artifacts, the model pool, the LLM client, the
    run's budget, the signal cache and the retrieval phases (the agentic loop's call)."""

    cfg: "Config"
    art: LoadedArtifacts
    models: "ModelPool | None" = None
    llm: "LLMClient | None" = None
    budget: RunBudget | None = None  # a stage that loops may stop early when it is spent
    signal_cache: TextCache | None = None  # shared by runs that may reuse signals (ablations, tuning)
    retrieve: "Callable[[list[QueryState]], dict[str, list[tuple[int, float]]]] | None" = None
    tallies: dict = field(default_factory=dict)  # counts a stage adds up over the run's batches (for one note a run)
    # stage -> note key -> (text, query ids): where a stage did less than the config asked (its row is partial)
    partial: dict = field(default_factory=dict)
    unlogged: dict = field(default_factory=dict)  # note key -> its latest text, logged once by flush_notes

    def note(self, key: str, text: str, stage: str | None = None, query_ids: list[str] = ()) -> None:
        """A note, one per ``key`` a run: a later one (with the run's totals so far) replaces the
        earlier.  With ``stage``, it says where that stage did less than the config asked, for
        ``query_ids`` (the run's total so far): the stage's status row is partial and carries it;
        else it is a status note.  Logged once, with the run's total, by :meth:`flush_notes` (a
        first chunk's count logged at once would contradict the total the status gives)."""
        if stage is not None:
            self.partial.setdefault(stage, {})[key] = (text, list(query_ids))
        else:
            old = self.tallies.get(("note", key))
            if old is not None and old in self.art.notes:
                self.art.notes.remove(old)
            self.art.notes.append(text)
            self.tallies[("note", key)] = text
        self.unlogged[key] = text

    def new_run(self) -> None:
        """Start the counts and notes of another run on this context (a searcher's serves many): the
        tallies, what stages fell short of, and the notes the last run added to the loaded artifacts'."""
        for key, text in self.tallies.items():
            if isinstance(key, tuple) and key[:1] == ("note",) and text in self.art.notes:
                self.art.notes.remove(text)
        self.tallies, self.partial, self.unlogged = {}, {}, {}

    def flush_notes(self) -> None:
        """Log each note made since the last flush once, in its final form (the end of a run)."""
        for text in self.unlogged.values():
            log.warning("%s", text)
        self.unlogged.clear()

    def model(self, name: str) -> Any:
        """The loaded model ``name`` (``encoder``, ``reranker``, ``llm``) from the model pool,
        loading it (and releasing another) when it is not resident."""
        return self.models.get(name, self.art.loader(name))


# The built-in stages in walk order.  Inside a phase the order matters: the verifier judges the
# reranked order, the agentic loop's round 0 observes the verified order, and the content
# signals are fused in this order (ties keep it).  A stage not listed here runs after the listed
# stages of its phase, in the order it was registered.
STAGE_ORDER: tuple[str, ...] = (
    "rewrite", "dictionary",
    "statutes", "articles", "bm25", "english", "citation_seeds", "llm_seeds", "dense", "feedback",
    "seed_fusion",
    "graph", "prior",
    "fusion",
    "ranker", "rerank", "verify", "agent",
    "count",
)

_STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage, replace: bool = False) -> Stage:
    """Add ``stage`` to the pipeline (in its phase, after the stages registered before it) and
    its signal names to the signal registry."""
    for attr in ("name", "family", "phase", "essential", "signals", "enabled", "run"):
        if not hasattr(stage, attr):
            raise StageError(f"stage {stage!r} has no {attr!r}; see lexrag.stages.base.Stage")
    if not isinstance(stage.phase, Phase):
        raise StageError(f"stage {stage.name!r}: phase must be a lexrag.stages.base.Phase, got {stage.phase!r}")
    needs = getattr(stage, "needs", ())
    if not isinstance(needs, tuple) or not all(isinstance(n, str) for n in needs):
        raise StageError(f"stage {stage.name!r}: needs must be a tuple of the names of loaded parts, got {needs!r}")
    read = getattr(stage, "reads_stages", ())
    if not isinstance(read, tuple) or not all(isinstance(n, str) for n in read) or stage.name in read:
        raise StageError(f"stage {stage.name!r}: reads_stages must be a tuple of the names of other stages whose "
                         f"output it reads, got {read!r}")
    if stage.name in _STAGES and not replace:
        raise StageError(f"a stage named {stage.name!r} is already registered (pass replace=True)")
    for s in stage.signals:
        register_signal(s, stage.family)
    _STAGES[stage.name] = stage
    return stage


def unregister_stage(name: str) -> None:
    _STAGES.pop(name, None)


def registered_stages() -> list[Stage]:
    """Every registered stage in phase order, and inside a phase in :data:`STAGE_ORDER` (stages
    it does not list after, in registration order)."""
    listed = {n: i for i, n in enumerate(STAGE_ORDER)}
    order = {n: len(listed) + i for i, n in enumerate(_STAGES)}
    return sorted(_STAGES.values(), key=lambda s: (int(s.phase), listed.get(s.name, order[s.name])))


def check_degrade_order(order, estimates=None) -> None:
    """Every name in ``runtime.degrade_order`` is a registered optional stage, and every key of
    ``runtime.stage_estimates_s`` a registered stage."""
    from lexrag.errors import ConfigError
    from lexrag.signals import _unknown

    optional = {s.name for s in _STAGES.values() if not s.essential}
    for i, group in enumerate(order):
        for name in group:
            if name not in optional:
                raise ConfigError(f"runtime.degrade_order[{i}]: {_unknown(name, optional, 'optional stage')}")
    for name in estimates or {}:
        if name not in _STAGES:
            raise ConfigError(f"runtime.stage_estimates_s: {_unknown(name, _STAGES, 'stage')}")


def stages_for(cfg: "Config", art: Any, phases: tuple[Phase, ...] | None = None) -> list[Stage]:
    """The enabled stages, in order, optionally only of ``phases``."""
    stages = [s for s in registered_stages() if (phases is None or s.phase in phases) and s.enabled(cfg, art)]
    check_needs(stages)
    return stages


class _AllLoaded:
    """Loaded artifacts with every part present, so ``stage.enabled(cfg, it)`` says whether the
    config alone switches a stage on."""

    bm25 = graph = prior = dense = calibration = corpus = object()
    llm_ready = True

    def has_model(self, name: str) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:  # any other part a registered artifact adds
        return object()


def blocked(cfg: "Config") -> dict[str, list[str]]:
    """The stages whose own switch (``<stage>.enabled``) is on but which cannot run because a switch
    they also need is off (verify without ``llm.enabled``, feedback without ``lexical.enabled``):
    stage name -> the switches that would let it run."""
    import copy

    every, on = _AllLoaded(), {s.name for s in asked_for(cfg)}
    switches = [n for n in section_names(cfg) if getattr(getattr(cfg, n), "enabled", True) is False]
    out: dict[str, list[str]] = {}
    for s in registered_stages():
        if s.name in on or s.phase == Phase.SEED_FUSION or getattr(getattr(cfg, s.name, None), "enabled", None) is not True:
            continue
        for name in switches:
            trial = copy.deepcopy(cfg)
            getattr(trial, name).enabled = True
            if s.enabled(trial, every):
                out.setdefault(s.name, []).append(f"{name}.enabled")
        out.setdefault(s.name, [])
    return out


def needs_of(stage: Stage, cfg: "Config") -> tuple[str, ...]:
    """The loaded parts ``stage`` reads under ``cfg``: what its ``needs_for(cfg)`` says where it has
    one (a subset of its ``needs``), else its ``needs``."""
    for_cfg = getattr(stage, "needs_for", None)
    return tuple(for_cfg(cfg)) if for_cfg is not None else tuple(getattr(stage, "needs", ()))


def stages_read(stage: Stage) -> tuple[str, ...]:
    """The stages whose output ``stage`` reads (its ``reads_stages``; none when it declares none)."""
    return tuple(getattr(stage, "reads_stages", ()))


def asked_for(cfg: "Config") -> list[Stage]:
    """The stages the config switches on, whatever is loaded (seed fusion, which follows from the
    graph and prior stages, left out)."""
    every = _AllLoaded()
    return [s for s in registered_stages() if s.phase != Phase.SEED_FUSION and s.enabled(cfg, every)]
