"""Everything a run loads, loaded once: :class:`Artifacts` (the corpus, the indexes, the prior, the
model folders and their loaders) and where the run's LLM cache lives."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lexrag import stages as _stages  # noqa: F401  (registers the built-in stages)
from lexrag.config import Config
from lexrag.errors import ArtifactError, ArtifactMissing, LexragError
from lexrag.artifacts import corpus_id
from lexrag.paths import Paths
from lexrag.index.corpus import Corpus
from lexrag.index.graph import CitationGraph
from lexrag.index.lexical import BM25Index
from lexrag.index.prior import TrainingPrior
from lexrag.models import load_encoder, usable_gpus
from lexrag.models.paths import candidates
from lexrag.io.procmem import process_memory
from lexrag.registry import ARTIFACTS, ArtifactSpec, build_order, declare, spec
from lexrag.stages.base import (
    asked_for,
    check_degrade_order,
    needs_of,
)

log = logging.getLogger(__name__)

@dataclass
class Artifacts:
    """Everything a run loads, loaded once; models are only located here (their folders checked)
    and loaded on first use through the model pool."""

    corpus: Corpus
    bm25: "BM25Index | None"
    graph: CitationGraph | None = None
    prior: TrainingPrior | None = None
    dense: object | None = None  # lexrag.index.dense.DenseIndex
    ranker: object | None = None  # lexrag.stages.ranker.LearnedRanker
    dictionary: object | None = None  # lexrag.index.dictionary.Dictionary
    bm25_en: object | None = None  # lexrag.index.english.EnglishIndex
    model_paths: dict[str, Path] = field(default_factory=dict)  # encoder, reranker, llm
    loaders: dict[str, Callable[[], Any]] = field(default_factory=dict)
    cache_dirs: list[Path] = field(default_factory=list)  # read-only LLM caches found by the resolver
    llm_replay: bool = False  # LLM answers only from caches (llm.mode replay, or no model folder when degrading)
    missing: dict[str, str] = field(default_factory=dict)  # parts left out when degrading: name -> why
    fixes: dict[str, str] = field(default_factory=dict)  # how to get a missing part back, where it is not the usual
    calibration: object | None = None  # lexrag.stages.count.Calibration (count.method adaptive)
    corpus_dir: Path | None = None  # where the corpus was loaded from (the indexes check they were built over it)
    loads: dict[str, dict[str, float]] = field(default_factory=dict)  # part -> seconds, GB it added (anonymous, file pages)
    notes: list[str] = field(default_factory=list)  # what the run status should say besides its rows (a cache set aside)
    paths: Paths | None = None  # the resolver it was loaded through (where the run's own LLM cache goes)

    def has_model(self, name: str) -> bool:
        return name in self.loaders

    def loader(self, name: str) -> Callable[[], Any]:
        if name not in self.loaders:
            raise ArtifactError(f"no {name} model configured for this run")
        return self.loaders[name]

    @classmethod
    def from_folder(cls, folder: str | Path, cfg: Config, degrade: bool = False, skip_missing: bool = False,
                    strict: bool = False) -> "Artifacts":
        """:meth:`load` from one artifacts folder (holding ``corpus/``, ``bm25/``, ...:
        :meth:`Paths.local`), the models where ``cfg`` names them."""
        if not isinstance(folder, (str, Path)):
            hint = ("use Artifacts.load(paths, cfg) for a Paths" if isinstance(folder, Paths)
                    else "the arguments are (folder, cfg)" if isinstance(folder, Config) else "")
            raise TypeError(f"Artifacts.from_folder: folder must be the artifacts folder (a str or Path), not "
                            f"{type(folder).__name__}" + (f"; {hint}" if hint else ""))
        _check_config("from_folder", cfg)
        return cls.load(Paths.local(folder, cfg.paths), cfg, degrade=degrade, skip_missing=skip_missing, strict=strict)

    @classmethod
    def load(cls, paths: Paths, cfg: Config, degrade: bool = False, skip_missing: bool = False,
             strict: bool = False) -> "Artifacts":
        """Load through ``paths`` (a :class:`lexrag.paths.Paths`), from wherever it finds each
        artifact and model (:meth:`from_folder` for one folder).  Only what the config switches on is loaded; a missing artifact or
        model folder is an error now, before any query runs (in LLM replay mode the LLM folder
        is not needed).  With ``degrade=True`` (the Kaggle notebook) only the corpus is required:
        any other part that is missing or broken is logged, listed in ``missing``, and its stages
        stay off; a missing LLM folder falls back to replaying an attached cache.  With
        ``skip_missing=True`` (``lexrag run``) the same for an artifact that is not there at all
        (:class:`~lexrag.errors.ArtifactMissing`), while a damaged one is still an error.  With
        ``strict=True`` (``lexrag run --strict``) a part the config asks for that is otherwise left out
        with a warning (the calibration count.method=adaptive weighs) is an error too."""
        if not isinstance(paths, Paths):
            hint = ("the arguments are (paths, cfg)" if isinstance(paths, Config)
                    else "for one artifacts folder use Artifacts.from_folder(folder, cfg)")
            raise TypeError("Artifacts.load: paths must be a lexrag.paths.Paths (paths_for or resolve_paths make "
                            f"one), not {type(paths).__name__}; {hint}")
        _check_config("load", cfg)
        check_degrade_order(cfg.runtime.degrade_order, cfg.runtime.stage_estimates_s)  # before any slow load
        wanted = [a for a in ARTIFACTS if a.name == "corpus" or (a.in_build and a.wanted(cfg))]
        set_notes: list[str] = []  # several copies of an artifact among the inputs: the set built over one corpus
        chosen = paths.artifact_set([a.name for a in wanted], set_notes)

        def locate(name: str) -> Path:
            return chosen.get(name) or paths.artifact(name)

        corpus_dir = locate("corpus")
        with _measure(loads := {}, "corpus"):  # first: every other load step reads it
            corpus = spec("corpus").load(corpus_dir, cfg, None)
        cid = corpus_id(corpus_dir)
        art = cls(corpus=corpus, bm25=None, corpus_dir=Path(corpus_dir), loads=loads, paths=paths)
        art.notes.extend(set_notes)

        failures: list[tuple[str, Exception]] = []  # without degrade: every part that failed, said at once
        ld = _Loading(art, cfg, paths, locate, cid, degrade, strict and not degrade)
        for step in load_plan(cfg):
            try:
                with _measure(art.loads, step.part) as done:
                    done.append(step.load(ld) is not False)  # False: nothing there to load (kept out of art.loads)
            except Exception as e:  # noqa: BLE001 - degrading: any broken part is left out, logged
                off = [s.name for s in asked_for(cfg) if step.part in needs_of(s, cfg)]
                # skip_missing: an absent part whose stages can be left out (one no stage needs, such as a
                # calibration the count reads, would change the run without a stage to name: an error)
                if not degrade and not (skip_missing and isinstance(e, ArtifactMissing) and off):
                    if not isinstance(e, LexragError):
                        raise
                    failures.append((step.part, e))
                    continue
                art.missing[step.part] = f"{type(e).__name__}: {e}".splitlines()[0]
                if getattr(e, "fix", ""):  # a model not found: the folders seen and the setting that picks one
                    art.fixes[step.part] = e.fix
                log.warning("%s is not available (%s); stages switched off: %s", step.part, art.missing[step.part],
                            ", ".join(off) or "none the config asks for")
        if "llm" in art.missing and (art.cache_dirs or cfg.llm.replay_dirs):
            log.warning("no LLM folder: answering the LLM calls from the attached cache only (replay)")
            art.llm_replay = True
        if len(failures) == 1:
            raise failures[0][1]
        if failures:  # several missing parts (a preset's three models): all of them in one message
            raise ArtifactError(f"{len(failures)} parts the config asks for cannot be loaded: "
                                + "; ".join(f"[{n}] {str(e).splitlines()[0]}" for n, e in failures)
                                + " (attach them, or switch their stages off)") from failures[0][1]
        return art

    @property
    def llm_ready(self) -> bool:
        """An LLM can answer: a model folder to load, or a cache to replay."""
        return self.has_model("llm") or self.llm_replay

    def _model(self, name: str, path: Path, setting: str) -> Path:
        if not Path(path).is_dir():
            raise ArtifactError(f"{name} model folder not found: {path} (attach the model dataset or set {setting})")
        self.model_paths[name] = Path(path)
        return Path(path)


def _check_config(method: str, cfg: object) -> None:
    """A :class:`Config` as ``cfg``, else one TypeError line (a preset name or a YAML path is loaded first)."""
    if not isinstance(cfg, Config):
        raise TypeError(f"Artifacts.{method}: cfg must be a lexrag.config.Config, not {type(cfg).__name__}; "
                        "make one with lexrag.config.load_config(...)")


@contextlib.contextmanager
def _measure(into: dict, name: str):
    """Seconds and the resident memory (anonymous, file pages) that loading part ``name`` added;
    kept only when it loaded (the block appends False to the list it is given when there was
    nothing to load)."""
    before, t0, done = process_memory(), time.perf_counter(), []
    yield done
    if done and not all(done):
        return
    after = process_memory()
    row = {"s": round(time.perf_counter() - t0, 1)}
    if "anon" in after and "anon" in before:
        row.update(anon_gb=round(after["anon"] - before["anon"], 2), file_gb=round(after["file"] - before["file"], 2))
    into[name] = row


@dataclass
class _Loading:
    """What every load step reads: the artifacts being filled, the config, the resolver, where
    each artifact was found, the corpus id the indexes must match and whether to degrade."""

    art: Artifacts
    cfg: Config
    paths: Paths
    locate: Callable[[str], Path]
    cid: str
    degrade: bool
    strict: bool = False  # a part the config asks for is never left out with a warning (lexrag run --strict)


@dataclass(frozen=True)
class LoadStep:
    """One part a run loads: ``part`` is the name stages need and the run status shows; ``load``
    fills the :class:`Artifacts` (returns False when there was nothing to load)."""

    part: str
    load: Callable[[_Loading], Any]


def _artifact_step(a) -> LoadStep:
    """Catalogue entry ``a``, loaded by its load step into its attribute; its model folder
    (``a.model``), when it has one, located and checked first."""
    step = a.load

    def load(ld: _Loading) -> None:
        if a.model:  # the model folder its load step reads (art.model_paths[name])
            section, fld = a.model.split(".")
            ld.art._model(a.name, ld.paths.model(getattr(getattr(ld.cfg, section), fld), a.model), a.model)
        setattr(ld.art, a.attr, step(ld.locate(a.name), ld.cfg, ld.art))  # None: its step left it off, and said why

    return LoadStep(a.name, load)


def load_plan(cfg: Config) -> list[LoadStep]:
    """The parts a run of ``cfg`` loads after the corpus, in order: every artifact the config asks
    for that has a load step (in build order), then the parts no build makes that it asks for (the
    dense index with its encoder, the reranker, the calibration, the LLM: model folders located
    here, loaded on first use)."""
    plan = [_artifact_step(a) for a in build_order()
            if a.name != "corpus" and a.in_build and a.wanted(cfg) and a.load is not None]
    return plan + [LoadStep(a.name, a.load) for a in ARTIFACTS if not a.is_artifact and a.load is not None and a.wanted(cfg)]


def _load_dense(ld: _Loading) -> None:
    from lexrag.index.dense import DenseIndex, choose_index_kind
    from lexrag.index.embeddings import Embeddings

    art, sc = ld.art, ld.cfg.semantic
    enc = art._model("encoder", ld.paths.model(sc.model, "semantic.model"), "semantic.model")
    try:
        emb = Embeddings(ld.locate("embeddings"), len(art.corpus), ld.cid, enc,
                         expected={"fields": list(sc.fields), "max_seq": sc.max_seq})
    except LexragError as e:  # the encoder was found: the fix is the embeddings' alone, not the model it found
        e.fix = spec("embeddings").how_to_get()
        raise
    kind = choose_index_kind(emb, sc.index)
    art.dense = DenseIndex(emb, kind, sc.nlist, sc.pq_m, sc.nprobe, sc.rescore_k, use_gpu=sc.faiss_gpu)
    art.loaders["encoder"] = lambda: load_encoder(enc, sc.device, sc.fp16, sc.max_seq)


def _load_reranker(ld: _Loading) -> None:
    from lexrag.stages.rerank import Reranker

    rc = ld.cfg.rerank
    rr = ld.art._model("reranker", ld.paths.model(rc.model, "rerank.model"), "rerank.model")
    ld.art.loaders["reranker"] = lambda: Reranker(rr, rc.device, rc.max_length, rc.batch_size)


def _load_calibration(ld: _Loading) -> bool:
    """The calibration named by ``count.calibration`` (an error when absent), else the one this
    session wrote (`lexrag calibrate` without --artifacts) or an attached one when there is one
    (small: loaded whatever the count method, so a run or an ablation can switch to the adaptive
    count).  False when there is none and none is needed."""
    from lexrag.stages.count import Calibration

    cfg, art = ld.cfg, ld.art
    adaptive = cfg.count.method == "adaptive" and cfg.count.w_cal > 0  # w_cal 0: the term is off, nothing to read
    if cfg.count.calibration:  # named explicitly: it must be there
        art.calibration = Calibration.load(cfg.count.calibration, ld.cid)
        return True
    try:
        folder = ld.paths.built("calibration")
    except LexragError:
        folder = None
    if folder is None or not (Path(folder) / "params.json").is_file():
        if adaptive and ld.strict:  # --strict promises no run without a part the config asks for
            raise ArtifactMissing("count.method=adaptive weighs a calibration (count.w_cal > 0) and there is none: "
                                  f"{CALIBRATION.fix}")
        if adaptive:
            art.missing["calibration"] = f"no calibration artifact ({CALIBRATION.fix})"
            log.warning("count.method=adaptive without a calibration: n_cal is left out of the count (%s)",
                        CALIBRATION.fix)
        return False
    if adaptive:
        art.calibration = Calibration.load(folder, ld.cid)
        return True
    try:
        art.calibration = Calibration.load(folder, ld.cid)
    except LexragError as e:
        log.warning("calibration at %s not used: %s", folder, e)
        return False
    return True


def _load_llm(ld: _Loading) -> bool | None:
    """The LLM's caches (read-only ones the resolver finds, besides the run's own) and its model
    folder: located now, loaded on first use; in replay mode only the caches are needed."""
    from lexrag.llm.protocol import BACKENDS
    from lexrag.llm.scripted import SCRIPT_FILE, is_scripted

    art, lc = ld.art, ld.cfg.llm
    if not lc.replay_dirs:
        own = Path(llm_cache_dir(ld.cfg, ld.paths)).resolve()
        art.cache_dirs = [f for f in ld.paths.find_artifacts("llm_cache") if Path(f).resolve() != own]
    if lc.mode == "replay":
        art.llm_replay = True
        with contextlib.suppress(LexragError, OSError):
            art.model_paths["llm"] = ld.paths.model(lc.model, "llm.model")
        return False  # nothing loaded: the answers come from the caches
    lm = art._model("llm", ld.paths.model(lc.model, "llm.model"), "llm.model")
    if lc.backend == "scripted":  # fixed answers, no weights (the demo and tests)
        if not is_scripted(lm):
            raise ArtifactError(f"llm.backend=scripted needs a folder holding {SCRIPT_FILE}; {lm} has none")
        load = BACKENDS["scripted"]
        load(lm, lc)  # a broken script is an error now, before any query runs
        art.loaders["llm"] = lambda: load(lm, lc)
        return
    if is_scripted(lm):
        raise ArtifactError(f"{lm} holds a scripted stand-in ({SCRIPT_FILE}), not model weights: set "
                            "llm.backend=scripted to use it")
    if ld.degrade and lc.device != "cpu" and not usable_gpus():
        art.model_paths.pop("llm", None)
        raise ArtifactError("no usable GPU (compute capability >= 7.0): a 7B LLM on the CPU would not finish in the "
                            "budget (set llm.device=cpu to force it)")
    load = BACKENDS[lc.backend]
    art.loaders["llm"] = lambda: load(lm, lc)


def _load_llm_or_say_its_fix(ld: _Loading) -> bool | None:
    """:func:`_load_llm`; an error that carries no fix of its own gets one naming the model llm.model
    names (the spec's fix cannot read the config)."""
    try:
        return _load_llm(ld)
    except LexragError as e:
        if not getattr(e, "fix", ""):
            e.fix = _llm_fix(ld.cfg)
        raise


def _llm_fix(cfg: Config) -> str:
    """How to get the LLM a run of ``cfg`` misses: the model ``llm.model`` names, or the cache to replay."""
    names = candidates(cfg.llm.model)
    what = (f"attach {names[0]} (llm.model)" if len(names) == 1 else f"attach one of {' | '.join(names)} (llm.model)"
            if names else "set llm.model to the LLM's folder (Qwen2.5-7B-Instruct class)")
    return f"{what} on a GPU machine, or the lexrag-llm-cache dataset to replay"


def llm_cache_dir(cfg: Config, paths=None) -> Path:
    """The run's own LLM cache folder: ``llm.cache_dir`` (``~`` is the home folder, as in a
    shell), else ``llm_cache`` in the working folder."""
    if cfg.llm.cache_dir:
        return Path(cfg.llm.cache_dir).expanduser()
    return (paths.working_dir if paths is not None else Path(".")) / "llm_cache"


# the parts a run loads that no build makes: their load steps read the loading state (a model folder
# located now and loaded on first use through the model pool, or the calibration count.method reads)
SEMANTIC = declare(ArtifactSpec("semantic", ("corpus", "embeddings"), switch="semantic.enabled", load=_load_dense,
                                fix="attach the lexrag-embeddings dataset and the BGE-M3 model (semantic.model)"))
RERANKER = declare(ArtifactSpec("reranker", switch="rerank.enabled", load=_load_reranker,
                                fix="attach bge-reranker-v2-m3 (rerank.model)"))
CALIBRATION = declare(ArtifactSpec("calibration", ("corpus",), load=_load_calibration,
                                   rebuild="python -m lexrag calibrate --queries FILE --artifacts ARTIFACTS",
                                   fix="run `python -m lexrag calibrate --queries FILE --artifacts ARTIFACTS`, or set "
                                       "count.method=elbow or count.w_cal=0"))
LLM = declare(ArtifactSpec("llm", switch="llm.enabled", load=_load_llm_or_say_its_fix,
                           fix="attach the LLM llm.model names on a GPU machine, or the lexrag-llm-cache dataset to "
                               "replay"))
