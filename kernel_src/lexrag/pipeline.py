"""The pipeline: orchestration only.

:func:`run_pipeline` turns queries into query states and walks the phases (rewrite -> content
-> seed fusion -> graph and prior -> fusion -> rerank -> count) over them.  Each enabled stage
runs on chunks of ``runtime.batch_size`` queries: the walk times every call, checks the time
budget before it (past the budget only essential stages run: citation seeds, BM25, fusion,
count) and records which queries each stage skipped, then checks every ranking at the border.
Phase by phase over all queries means each model is loaded once per phase and the encoder,
the reranker and the LLM take turns on one GPU (see :class:`lexrag.models.ModelPool`).
:func:`retrieve` runs the retrieval phases alone for any query texts (the agentic loop's call).
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from lexrag import stages as _stages  # noqa: F401  (registers the built-in stages)
from lexrag.config import Config
from lexrag.errors import ArtifactError, LexragError, StageError
from lexrag.index.build import corpus_id, has_court_edges
from lexrag.modelpaths import cache_name, find_model
from lexrag.index.corpus import Corpus
from lexrag.index.graph import CitationGraph
from lexrag.index.lexical import BM25Index
from lexrag.index.prior import TrainingPrior
from lexrag.models import ModelPool, load_causal_lm, load_encoder, usable_gpus
from lexrag.queries import Query, QueryState, Variant
from lexrag.ranking import Ranking
from lexrag.stages.base import (
    RETRIEVAL_PHASES,
    BatchState,
    Context,
    Phase,
    Stage,
    asked_for,
    check_degrade_order,
    stages_for,
)
from lexrag.stages.count import unique_citations, with_whole_articles

__all__ = ["Artifacts", "RunResult", "Budget", "SignalCache", "run_pipeline", "retrieve", "make_context", "walk"]

log = logging.getLogger(__name__)


@dataclass
class Artifacts:
    """Everything a run loads, loaded once; models are only located here (their folders checked)
    and loaded on first use through the model pool."""

    corpus: Corpus
    bm25: BM25Index | None
    graph: CitationGraph | None = None
    prior: TrainingPrior | None = None
    dense: object | None = None  # lexrag.index.semantic.DenseIndex
    model_paths: dict[str, Path] = field(default_factory=dict)  # encoder, reranker, llm
    loaders: dict[str, Callable[[], Any]] = field(default_factory=dict)
    cache_dirs: list[Path] = field(default_factory=list)  # read-only LLM caches found by the resolver
    llm_replay: bool = False  # LLM answers only from caches (llm.mode replay, or no model folder when degrading)
    missing: dict[str, str] = field(default_factory=dict)  # parts left out when degrading: name -> why
    calibration: object | None = None  # lexrag.stages.count.Calibration (count.method adaptive)

    def has_model(self, name: str) -> bool:
        return name in self.loaders

    def loader(self, name: str) -> Callable[[], Any]:
        if name not in self.loaders:
            raise ArtifactError(f"no {name} model configured for this run")
        return self.loaders[name]

    @classmethod
    def load(cls, folder: str | Path | None, cfg: Config, paths=None, degrade: bool = False) -> "Artifacts":
        """Load from ``folder`` (holding ``corpus/``, ``bm25/``, ...) or, when ``paths`` (a
        :class:`lexrag.kaggle.paths.Paths`) is given, from wherever the resolver finds each
        artifact and model.  Only what the config switches on is loaded; a missing artifact or
        model folder is an error now, before any query runs (in LLM replay mode the LLM folder
        is not needed).  With ``degrade=True`` (the Kaggle notebook) only the corpus is required:
        any other part that is missing or broken is logged, listed in ``missing``, and its stages
        stay off; a missing LLM folder falls back to replaying an attached cache."""
        check_degrade_order(cfg.runtime.degrade_order, cfg.runtime.stage_estimates_s)  # before any slow load
        if paths is not None:  # several copies of an artifact among the inputs: the set built over one corpus
            wanted = ["corpus"] + [n for n, on in (("bm25", cfg.lexical.enabled), ("graph", cfg.graph.enabled),
                                                    ("prior", cfg.uses_prior()), ("embeddings", cfg.semantic.enabled)) if on]
            chosen = paths.artifact_set(wanted)
            locate = lambda name: chosen.get(name) or paths.artifact(name)  # noqa: E731
        else:
            locate = lambda name: Path(folder) / name  # noqa: E731
        model_path = ((lambda value, setting: paths.model(value, setting)) if paths is not None
                      else (lambda value, setting: find_model(value, [], setting, search=False)))
        corpus_dir = locate("corpus")
        corpus = Corpus(corpus_dir)
        cid = corpus_id(corpus_dir)
        art = cls(corpus=corpus, bm25=None)

        def part(name: str, fn: Callable[[], None]) -> None:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - degrading: any broken part is left out, logged
                if not degrade:
                    raise
                art.missing[name] = f"{type(e).__name__}: {e}".splitlines()[0]
                off = [s.name for s in asked_for(cfg) if name in getattr(s, "needs", ())]
                log.warning("%s is not available (%s); stages switched off: %s", name, art.missing[name],
                            ", ".join(off) or "none the config asks for")

        if cfg.lexical.enabled:
            part("bm25", lambda: setattr(art, "bm25", BM25Index.load(locate("bm25"), cfg.lexical, corpus_id=cid)))
        if cfg.graph.enabled:
            part("graph", lambda: setattr(art, "graph", CitationGraph.load(locate("graph"), len(corpus), corpus_id=cid,
                                                                            resolutions=cfg.graph.resolutions,
                                                                            aliases=corpus.aliases_digest)))
        if art.graph is not None and not has_court_edges(art.graph):
            art.graph = None
            art.missing["graph"] = ("the graph has no court edges (its corpus holds no court considerations that cite); "
                                    "rebuild the corpus with court_considerations.csv, then the graph")
            log.warning("graph: left off (%s)", art.missing["graph"])
        if cfg.uses_prior():
            part("prior", lambda: setattr(art, "prior", TrainingPrior.load(locate("prior"))))
        if cfg.semantic.enabled:
            part("semantic", lambda: art._load_dense(cfg, locate, model_path, cid))
        if cfg.rerank.enabled:
            part("reranker", lambda: art._load_reranker(cfg, model_path))
        # through the resolver: the calibration this session wrote (`lexrag calibrate` without --artifacts), else an attached one
        art._load_calibration(cfg, (lambda name: paths.built(name)) if paths is not None else locate, cid, part)
        if cfg.llm.enabled:
            lc = cfg.llm
            if paths is not None and not lc.replay_dirs:
                own = Path(llm_cache_dir(cfg, paths)).resolve()
                art.cache_dirs = [f for f in paths.find_artifacts("llm_cache") if Path(f).resolve() != own]
            if lc.mode == "replay":
                art.llm_replay = True
                with contextlib.suppress(LexragError, OSError):
                    art.model_paths["llm"] = model_path(lc.model, "llm.model")
            else:
                part("llm", lambda: art._load_llm(cfg, model_path, degrade))
                if "llm" in art.missing and (art.cache_dirs or lc.replay_dirs):
                    log.warning("no LLM folder: answering the LLM calls from the attached cache only (replay)")
                    art.llm_replay = True
        return art

    def _load_calibration(self, cfg: Config, locate, cid: str, part) -> None:
        """The calibration named by ``count.calibration`` (an error when absent), or the
        ``calibration`` artifact when there is one (small: loaded whatever the count method, so a
        run or an ablation can switch to the adaptive count)."""
        from lexrag.stages.count import Calibration

        adaptive = cfg.count.method == "adaptive" and cfg.count.w_cal > 0  # w_cal 0: the term is off, nothing to read
        if cfg.count.calibration:  # named explicitly: it must be there
            part("calibration", lambda: setattr(self, "calibration", Calibration.load(cfg.count.calibration, cid)))
            return
        try:
            folder = locate("calibration")
        except LexragError:
            folder = None
        if folder is None or not (Path(folder) / "params.json").is_file():
            if not adaptive:
                return
            self.missing["calibration"] = "no calibration artifact (run `python -m lexrag calibrate`)"
            log.warning("count.method=adaptive without a calibration: n_cal is left out of the count "
                        "(run `python -m lexrag calibrate --queries FILE --artifacts DIR`)")
            return
        if adaptive:
            part("calibration", lambda: setattr(self, "calibration", Calibration.load(folder, cid)))
        else:
            try:
                self.calibration = Calibration.load(folder, cid)
            except LexragError as e:
                log.warning("calibration at %s not used: %s", folder, e)

    def _load_dense(self, cfg: Config, locate, model_path, cid: str) -> None:
        from lexrag.index.semantic import DenseIndex, Embeddings, choose_index_kind

        sc = cfg.semantic
        enc = self._model("encoder", model_path(sc.model, "semantic.model"), "semantic.model")
        emb = Embeddings(locate("embeddings"), len(self.corpus), cid, enc,
                         expected={"fields": list(sc.fields), "max_seq": sc.max_seq})
        kind = choose_index_kind(emb, sc.index)
        self.dense = DenseIndex(emb, kind, sc.nlist, sc.pq_m, sc.nprobe, sc.rescore_k, use_gpu=sc.faiss_gpu)
        self.loaders["encoder"] = lambda: load_encoder(enc, sc.device, sc.fp16, sc.max_seq)

    def _load_reranker(self, cfg: Config, model_path) -> None:
        from lexrag.stages.rerank import Reranker

        rc = cfg.rerank
        rr = self._model("reranker", model_path(rc.model, "rerank.model"), "rerank.model")
        self.loaders["reranker"] = lambda: Reranker(rr, rc.device, rc.max_length, rc.batch_size)

    def _load_llm(self, cfg: Config, model_path, degrade: bool = False) -> None:
        lc = cfg.llm
        lm = self._model("llm", model_path(lc.model, "llm.model"), "llm.model")
        from lexrag.llm.scripted import is_scripted, load_scripted

        if is_scripted(lm):  # the scripted stand-in (demo and tests): fixed answers, no weights
            load_scripted(lm)  # a broken script is an error now, before any query runs
            self.loaders["llm"] = lambda: load_scripted(lm)
            return
        if degrade and lc.device != "cpu" and not usable_gpus():
            self.model_paths.pop("llm", None)
            raise ArtifactError("no usable GPU (compute capability >= 7.0): a 7B LLM on the CPU would not finish in the "
                                "budget (set llm.device=cpu to force it)")
        self.loaders["llm"] = lambda: load_causal_lm(lm, lc.quantization, lc.device, lc.compute_dtype)

    @property
    def llm_ready(self) -> bool:
        """An LLM can answer: a model folder to load, or a cache to replay."""
        return self.has_model("llm") or self.llm_replay

    def _model(self, name: str, path: Path, setting: str) -> Path:
        if not Path(path).is_dir():
            raise ArtifactError(f"{name} model folder not found: {path} (attach the model dataset or set {setting})")
        self.model_paths[name] = Path(path)
        return Path(path)


def llm_cache_dir(cfg: Config, paths=None) -> Path:
    if cfg.llm.cache_dir:
        return Path(cfg.llm.cache_dir)
    return (paths.working_dir if paths is not None else Path(".")) / "llm_cache"


@dataclass
class Budget:
    """Wall-clock budget in seconds from ``start`` (``perf_counter`` time), less ``reserve``
    seconds kept for writing the output; 0 = unlimited.  ``dropped`` holds the optional stages
    the run has given up on (see :func:`walk`), for the whole run."""

    seconds: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    reserve: float = 0.0
    dropped: dict[str, str] = field(default_factory=dict)  # stage -> why

    def left(self) -> float:
        """Seconds left before the reserve (infinite when unlimited)."""
        if self.seconds <= 0:
            return float("inf")
        return self.seconds - self.reserve - (time.perf_counter() - self.start)

    @classmethod
    def since(cls, seconds: float, started_at: float | None, reserve: float = 0.0) -> "Budget":
        """A budget that started at wall-clock time ``started_at`` (``time.time()``, e.g. the
        notebook's first cell), so loading models and artifacts counts against it."""
        start = time.perf_counter() - (time.time() - started_at) if started_at is not None else time.perf_counter()
        return cls(seconds, start, reserve)

    def exhausted(self) -> bool:
        return self.seconds > 0 and time.perf_counter() - self.start > self.seconds - self.reserve

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


@dataclass
class RunResult:
    query_ids: list[str]
    predictions: dict[str, list[str]]
    ranked: dict[str, list[str]]
    signals: list[Ranking]
    fused: Ranking  # all signals fused
    current: Ranking  # the order the count stage cut (fused, or reranked where the reranker ran)
    timings: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)  # queries some stage skipped for lack of time
    skipped: dict[str, list[str]] = field(default_factory=dict)  # stage -> query ids
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> query id -> error
    states: list[QueryState] = field(default_factory=list)
    costs: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # query -> stage -> amounts
    model_loads: dict[str, int] = field(default_factory=dict)
    model_load_seconds: dict[str, float] = field(default_factory=dict)
    current_by: dict[str, str] = field(default_factory=dict)  # query id -> stage that made its final order
    dropped: dict[str, str] = field(default_factory=dict)  # optional stages the budget dropped -> why

    @property
    def traces(self) -> list[dict]:
        """The agentic loop's round records of every query, in query order."""
        return [r for q in self.states for r in q.trace]

    def cost_totals(self) -> dict[str, dict[str, float]]:
        """Per stage, every amount summed over queries (LLM calls, tokens, seconds...)."""
        out: dict[str, dict[str, float]] = {}
        for per_stage in self.costs.values():
            for stage, amounts in per_stage.items():
                acc = out.setdefault(stage, {})
                for k, v in amounts.items():
                    acc[k] = acc.get(k, 0.0) + v
        return out


class SignalCache:
    """Signals computed once and reused by later runs in the same process (ablation rows, tuning
    grid points, cross-validation folds).

    A content or graph stage's output for one query is stored under a key made of the stage, the
    config sections it reads (its ``reads`` attribute, else every section of its phase), the loaded artifacts it can see (an ablation that removes one gets
    another key), the query's texts (question, variants, LLM citations) and, for the graph phase,
    its seed candidates and the prior; a later run whose key matches takes the stored rankings
    instead of running the stage.  ``computed`` counts (stage, query) computations, ``reused``
    the reuses."""

    SECTIONS = {Phase.CONTENT: ("lexical", "semantic", "seeds", "query", "llm"),
                Phase.GRAPH: ("lexical", "graph", "prior", "seeds")}

    def __init__(self) -> None:
        self.store: dict[tuple, list[tuple[str, str, list]]] = {}
        self.computed: dict[tuple[str, str], int] = {}
        self.reused = 0
        self.texts: dict[tuple, Any] = {}  # per-text results of a retriever (one query variant's BM25 or dense hits)
        self._alive: dict[int, Any] = {}
        self.text_computed: dict[tuple[str, str], int] = {}

    def text_key(self, kind: str, section: Any, index: Any, text: str) -> tuple:
        """Key of one retriever call: ``kind`` (bm25, dense), its config section, the index object, the text."""
        import json

        self._alive[id(index)] = index
        return kind, json.dumps(section.__dict__, sort_keys=True, default=str), id(index), text

    def get_text(self, key: tuple):
        hit = self.texts.get(key)
        if hit is not None:
            self.reused += 1
        return hit

    def put_text(self, key: tuple, value: Any) -> None:
        self.texts[key] = value
        self.text_computed[(key[0], key[3])] = self.text_computed.get((key[0], key[3]), 0) + 1

    @classmethod
    def applies(cls, stage: Stage) -> bool:
        return stage.phase in cls.SECTIONS

    def key(self, stage: Stage, q: QueryState, batch: BatchState, ctx: Context) -> tuple:
        import hashlib
        import json

        cfg, art = ctx.cfg, ctx.art
        for obj in (art.bm25, art.dense, art.graph, art.prior, art.corpus):
            self._alive[id(obj)] = obj  # keyed by id(): keep the object, so no later object can take its id
        sections = getattr(stage, "reads", None) or self.SECTIONS[stage.phase]
        conf = json.dumps({sec: getattr(cfg, sec).__dict__ for sec in sections}, sort_keys=True, default=str)
        parts = [stage.name, hashlib.sha256(conf.encode()).hexdigest(),
                 tuple(id(x) for x in (art.bm25, art.dense, art.graph, art.prior, art.corpus)),
                 q.query_id, q.text, tuple(sorted((v.name, v.text) for v in q.variants.values())), tuple(q.llm_citations)]
        if stage.phase == Phase.GRAPH:
            parts.append(tuple(batch.seeds.get(q.query_id, ())[: cfg.graph.seed_k]))
        return tuple(parts)

    def get(self, key: tuple):
        hit = self.store.get(key)
        if hit is not None:
            self.reused += 1
        return hit

    def put(self, key: tuple, stage: str, query_id: str, rankings: list[tuple[str, str, list]]) -> None:
        self.store[key] = rankings
        self.computed[(stage, query_id)] = self.computed.get((stage, query_id), 0) + 1


def make_context(cfg: Config, art: Artifacts, paths=None, models: ModelPool | None = None) -> Context:
    """The context of a run: config, artifacts, a model pool and (when the LLM is on) its client
    over the cache."""
    models = models or ModelPool(cfg.runtime.resident_models)
    ctx = Context(cfg=cfg, art=art, models=models)
    if cfg.llm.enabled and art.llm_ready:
        try:
            ctx.llm = _llm_client(cfg, art, paths, ctx)
        except LexragError as e:
            if cfg.runtime.on_stage_error != "skip":
                raise
            art.missing["llm"] = f"{type(e).__name__}: {e}".splitlines()[0]
            art.loaders.pop("llm", None)
            art.llm_replay = False
            log.warning("the LLM cache cannot be used (%s); the LLM stages are switched off", art.missing["llm"])
    return ctx


def _llm_client(cfg: Config, art: Artifacts, paths, ctx: Context):
    """The LLM client over the run's cache (writable in live mode) and the read-only caches."""
    from lexrag.llm.cache import LLMCache
    from lexrag.llm.client import LLMClient

    readonly = [Path(p) for p in cfg.llm.replay_dirs] or list(art.cache_dirs)
    own = llm_cache_dir(cfg, paths)
    if cfg.llm.mode == "replay" or art.llm_replay:
        if (own / "params.json").is_file() and own not in readonly:
            readonly.append(own)
        if not readonly:
            raise ArtifactError(f"llm.mode=replay needs an LLM cache: none at {own}, none in llm.replay_dirs "
                                f"and none among the inputs; run once with llm.mode=live")
        cache = LLMCache(None, readonly=readonly)
    else:
        cache = LLMCache(own, readonly=readonly)
    get_model = (lambda: ctx.model("llm")) if art.has_model("llm") else None
    return LLMClient(cfg.llm, cache, get_model, cfg.llm.model_name or cache_name(cfg.llm.model),
                     replay=cfg.llm.mode == "replay" or art.llm_replay)


def _merge(batch: BatchState, stage: Stage, out: Any, n_docs: int) -> None:
    phase = stage.phase
    if phase == Phase.REWRITE:
        if not isinstance(out, dict):
            raise StageError(f"stage {stage.name!r} (rewrite) must return {{query_id: [Variant, ...]}}, got {type(out).__name__}")
        by_id = {q.query_id: q for q in batch.queries}
        for qid, variants in out.items():
            for v in variants:
                if not isinstance(v, Variant):
                    raise StageError(f"stage {stage.name!r}: query {qid!r}: {v!r} is not a Variant")
                by_id[qid].add_variant(v.name, v.text, v.origin)
        return
    if phase in (Phase.CONTENT, Phase.GRAPH):
        if not isinstance(out, list) or not all(isinstance(r, Ranking) for r in out):
            raise StageError(f"stage {stage.name!r} must return a list of Rankings")
        for r in out:
            r.validate(n_docs=n_docs, query_ids=batch.query_ids)
            batch.signals.setdefault(r.signal, Ranking(r.signal, r.family)).hits.update(r.hits)
        return
    if not isinstance(out, Ranking):
        raise StageError(f"stage {stage.name!r} ({phase.name.lower()}) must return one Ranking")
    out.validate(n_docs=n_docs, query_ids=batch.query_ids)
    target = {Phase.SEED_FUSION: batch.seeds, Phase.FUSION: batch.fused, Phase.RERANK: batch.current,
              Phase.COUNT: batch.final}[phase]
    target.update(out.hits)
    if phase == Phase.FUSION:
        batch.current.update(out.hits)
    if phase in (Phase.FUSION, Phase.RERANK):
        batch.current_by.update({qid: "fused" if phase == Phase.FUSION else stage.name for qid in out.hits})


def walk(batch: BatchState, ctx: Context, budget: Budget, phases: Iterable[Phase] | None = None,
         project: bool = True) -> BatchState:
    """Run the enabled stages of ``phases`` (all by default) over ``batch`` in phase order, in
    chunks of ``runtime.batch_size`` queries, with the time budget applied before each call.

    Before each call the time the rest of the run needs is projected (per stage: its measured
    seconds per query once it has run, else ``runtime.stage_estimates_s``, times the queries it
    has left); while that exceeds the budget left, the next group of ``runtime.degrade_order``
    is dropped for the rest of the run (agentic loop, verification, reranking, dense, graph and
    prior, rewrite, the extra BM25 passes).  Past the budget every optional stage is skipped; the essential ones (citation
    seeds, BM25, fusion, count) always run, so every query gets the best answer left.  The
    queries a stage skipped are recorded in ``batch.skipped``.  ``project=False`` (the agent's
    retrieval calls) only honours what the run has dropped."""
    cfg = ctx.cfg
    n_docs = len(ctx.art.corpus)
    size = cfg.runtime.batch_size
    live = [q for q in batch.queries if q.text]
    stages = stages_for(cfg, ctx.art, tuple(phases) if phases is not None else None)
    done: dict[str, int] = {}
    for i, stage in enumerate(stages):
        for start in range(0, len(live), size):
            chunk = batch.chunk(live[start : start + size])
            if not stage.essential:
                if project:
                    _degrade(stages[i:], len(live) - start, len(live), done, batch.timings, budget, cfg)
                if stage.name in budget.dropped or budget.exhausted():
                    batch.skipped.setdefault(stage.name, []).extend(chunk.query_ids)
                    continue
            memo = ctx.signal_cache if ctx.signal_cache is not None and SignalCache.applies(stage) else None
            keys: dict[str, tuple] = {}
            if memo is not None:
                keys = {q.query_id: memo.key(stage, q, chunk, ctx) for q in chunk.queries}
                todo = []
                for q in chunk.queries:
                    hit = memo.get(keys[q.query_id])
                    if hit is None:
                        todo.append(q)
                        continue
                    for signal, family, hits in hit:
                        batch.signals.setdefault(signal, Ranking(signal, family)).hits[q.query_id] = list(hits)
                if not todo:
                    continue
                chunk = batch.chunk(todo)
            t0 = time.perf_counter()
            _run_chunk(stage, chunk, ctx, n_docs, budget,
                       (lambda out, c=chunk, k=keys, m=memo, st=stage: _remember(m, st, c, k, out)) if memo is not None else None)
            dt = time.perf_counter() - t0
            batch.timings[stage.name] = batch.timings.get(stage.name, 0.0) + dt
            done[stage.name] = done.get(stage.name, 0) + len(chunk.queries)
            for q in chunk.queries:
                q.add_cost(stage.name, seconds=dt / len(chunk.queries))
    return batch


def projected_seconds(stages: list[Stage], current: str, first_left: int, n: int, done: dict[str, int],
                      timings: dict[str, float], estimates: dict[str, float], dropped) -> float:
    """Seconds the optional ``stages`` still need: stage ``current`` has ``first_left`` queries to
    go, the later ones ``n``; a stage's rate is its measured seconds per query once it has run,
    else its estimate."""
    total = 0.0
    for s in stages:
        if s.essential or s.name in dropped:
            continue
        rate = timings.get(s.name, 0.0) / done[s.name] if done.get(s.name) else float(estimates.get(s.name, 0.0))
        total += rate * (first_left if s.name == current else n)
    return total


def _degrade(stages: list[Stage], first_left: int, n: int, done: dict[str, int], timings: dict[str, float],
             budget: Budget, cfg: Config) -> None:
    """While the projected time of the droppable stages still to run exceeds what is left after
    the other stages' projection, drop the next group of ``runtime.degrade_order`` that has a
    stage still to run (``stages[0]`` is the stage about to run, with ``first_left`` queries)."""
    left = budget.left()
    if left == float("inf") or not stages:
        return
    rc, est = cfg.runtime, cfg.runtime.stage_estimates_s
    droppable = {name for group in rc.degrade_order for name in group}
    current = stages[0].name
    fixed = projected_seconds([s for s in stages if s.name not in droppable], current, first_left, n, done, timings, est, {})
    mine = [s for s in stages if s.name in droppable]
    ahead = {s.name for s in mine}
    for group in rc.degrade_order:
        need = projected_seconds(mine, current, first_left, n, done, timings, est, budget.dropped)
        if need <= left - fixed:
            return
        fresh = [name for name in group if name in ahead and name not in budget.dropped]
        if not fresh:
            continue
        why = f"projected {need + fixed:.0f}s for the rest of the run, {max(left, 0):.0f}s left"
        for name in fresh:
            budget.dropped[name] = why
        log.warning("time budget: %s; dropping %s for the remaining queries", why, ", ".join(fresh))


def _remember(memo: "SignalCache", stage: Stage, chunk: BatchState, keys: dict[str, tuple], out) -> None:
    """Store what a content or graph stage returned, per query of the call."""
    for qid in {qid for r in out for qid in r.hits}:
        if qid in keys:
            memo.put(keys[qid], stage.name, qid, [(r.signal, r.family, list(r.hits[qid])) for r in out if qid in r.hits])


def _run_chunk(stage: Stage, chunk: BatchState, ctx: Context, n_docs: int, budget: "Budget", on_output=None) -> None:
    """Run one stage call.  With ``runtime.on_stage_error: skip`` a failing call is undone (the
    query states it touched are restored), retried one query at a time, and the queries that
    still fail lose that stage only (logged, recorded in ``failed``); with ``raise`` (the
    default) the error propagates."""
    snap = _snapshot(chunk.queries)
    try:
        out = stage.run(chunk, ctx)
        _merge(chunk, stage, out, n_docs)
        if on_output is not None:
            on_output(out)
        return
    except Exception as e:  # noqa: BLE001 - the whole point is to contain any stage failure
        if ctx.cfg.runtime.on_stage_error != "skip" or isinstance(e, StageError):
            raise
        _restore(snap)
        _after_failure(e)
        if len(chunk.queries) == 1:
            _record_failure(stage, chunk, chunk.queries[0].query_id, e)
            return
    for q in chunk.queries:
        if not stage.essential and budget.exhausted():
            chunk.skipped.setdefault(stage.name, []).append(q.query_id)
            continue
        one = chunk.chunk([q])
        snap = _snapshot([q])
        try:
            out = stage.run(one, ctx)
            _merge(one, stage, out, n_docs)
            if on_output is not None:
                on_output(out)
        except Exception as e:  # noqa: BLE001
            if isinstance(e, StageError):
                raise
            _restore(snap)
            _after_failure(e)
            _record_failure(stage, chunk, q.query_id, e)


def _snapshot(queries: list[QueryState]) -> list[tuple]:
    """What a stage may change in a query state (variants, concepts, LLM citations, cost, trace)."""
    return [(q, dict(q.variants), dict(q.concepts), list(q.llm_citations), {k: dict(v) for k, v in q.cost.items()},
             list(q.trace)) for q in queries]


def _restore(snap: list[tuple]) -> None:
    for q, variants, concepts, cits, cost, trace in snap:
        q.variants, q.concepts, q.llm_citations, q.cost, q.trace = variants, concepts, cits, cost, trace


def _after_failure(e: Exception) -> None:
    if "out of memory" in str(e).lower():
        from lexrag.models import release_memory

        release_memory()


def _record_failure(stage: Stage, batch: BatchState, query_id: str, e: Exception) -> None:
    msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    log.warning("stage %s failed for query %r (%s); the query goes on without it", stage.name, query_id, msg)
    batch.failed.setdefault(stage.name, {})[query_id] = msg


def retrieve(states: list[QueryState], ctx: Context, budget: Budget | None = None) -> dict[str, list[tuple[int, float]]]:
    """The fused ranking for any query texts (content, seed fusion, graph and prior, fusion);
    the agentic loop calls this once per reformulation."""
    batch = walk(BatchState(list(states)), ctx, budget or ctx.budget or Budget(), RETRIEVAL_PHASES, project=False)
    return {q.query_id: batch.fused.get(q.query_id, []) for q in states}


def run_pipeline(queries: list[Query] | list[QueryState], art: Artifacts, cfg: Config, paths=None,
                 ctx: Context | None = None, budget: Budget | None = None, cache: SignalCache | None = None) -> RunResult:
    """Answer ``queries``: every phase over all queries, then the count cut.  Queries with an
    empty text get an empty prediction.  ``budget`` defaults to ``runtime.time_budget_s`` from
    now; past it the non-essential stages are skipped for the remaining chunks and the queries
    are listed in ``degraded`` (with a warning), so a submission is always complete."""
    t_start = time.perf_counter()
    own = ctx is None
    ctx = ctx or make_context(cfg, art, paths)
    budget = budget or Budget(cfg.runtime.time_budget_s, t_start, cfg.runtime.reserve_s)
    check_degrade_order(cfg.runtime.degrade_order, cfg.runtime.stage_estimates_s)
    ctx.budget = budget
    ctx.retrieve = lambda sub: retrieve(sub, ctx, budget)
    if cache is not None:
        ctx.signal_cache = cache
    states = [QueryState.of(q) for q in queries]
    try:
        batch = walk(BatchState(states), ctx, budget)
    finally:
        if own:  # a context made here is closed here: models freed, cache written out
            # cleanup only: every answer is in the cache (committed as it came) and in the batch,
            # so a failing close (a read-only or full disk) is a warning and never costs the run
            # its finished answers
            try:
                ctx.models.release()
            except Exception as e:  # noqa: BLE001
                log.warning("releasing the run's models failed (%s: %s); the answers are kept", type(e).__name__, e)
            if ctx.llm is not None:
                try:
                    ctx.llm.cache.close()
                except Exception as e:  # noqa: BLE001
                    log.warning("closing the LLM cache failed (%s: %s); the answers are kept", type(e).__name__, e)
    degraded = sorted({q for qs in batch.skipped.values() for q in qs}, key=[s.query_id for s in states].index)
    if degraded:
        warnings.warn(f"time budget of {budget.seconds}s ran out: {len(degraded)} queries skipped stages "
                      f"{', '.join(sorted(batch.skipped))}")
    predictions: dict[str, list[str]] = {}
    ranked: dict[str, list[str]] = {}
    corpus = art.corpus
    whole, start = cfg.count.whole_articles, cfg.count.whole_articles_from
    for q in states:
        _, cits, scores = unique_citations(batch.current.get(q.query_id, []), corpus)
        ranked[q.query_id] = with_whole_articles(cits, scores, whole, start)[0]
        final = batch.final.get(q.query_id, [])
        emitted = [corpus.citations[d] for d, _ in final]
        predictions[q.query_id] = with_whole_articles(emitted, [s for _, s in final], whole, start)[0][: len(emitted)]
    timings = dict(batch.timings)
    timings["total"] = time.perf_counter() - t_start
    fused = Ranking("fused", "fused", dict(batch.fused))
    reordered = any(by != "fused" for by in batch.current_by.values())
    current = Ranking("rerank" if reordered else "fused", "rerank" if reordered else "fused", dict(batch.current))
    return RunResult([q.query_id for q in states], predictions, ranked, list(batch.signals.values()), fused, current, timings,
                     degraded, dict(batch.skipped), dict(batch.failed), states, {q.query_id: q.cost for q in states},
                     dict(ctx.models.loads), dict(ctx.models.load_seconds), dict(batch.current_by), dict(budget.dropped))
