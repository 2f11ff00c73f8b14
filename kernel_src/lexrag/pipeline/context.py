"""The context every stage sees: config, artifacts, the model pool and the LLM client over the
run's cache."""

from __future__ import annotations

import logging
from pathlib import Path

from lexrag.config import Config
from lexrag.errors import ArtifactError, LexragError
from lexrag.models.paths import cache_name, model_fingerprint
from lexrag.models import ModelPool
from lexrag.pipeline.artifacts import Artifacts, llm_cache_dir
from lexrag.stages.base import (
    Context,
)

log = logging.getLogger(__name__)


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

    for d in cfg.llm.replay_dirs:  # named by the user: say which setting, not how to build an artifact
        if not Path(d).expanduser().is_dir() or not (Path(d).expanduser() / "params.json").is_file():
            raise ArtifactError(f"llm.replay_dirs: {d} is not an LLM cache folder (a folder with params.json and "
                                "cache.sqlite, as a live run's llm.cache_dir or the lexrag-llm-cache dataset holds)")
    readonly = [Path(p).expanduser() for p in cfg.llm.replay_dirs] or list(art.cache_dirs)
    own = llm_cache_dir(cfg, paths if paths is not None else art.paths)
    replay = cfg.llm.mode == "replay" or art.llm_replay
    if replay:
        if (own / "params.json").is_file() and own not in readonly:
            readonly.append(own)
        if not readonly:
            raise ArtifactError(f"llm.mode=replay needs an LLM cache: none at {own}, none in llm.replay_dirs "
                                f"and none among the inputs; run once with llm.mode=live")
    # a cache only saves time: where a run degrades rather than stops (Kaggle), one that cannot be
    # opened is set aside, with a status note, and the live model answers; elsewhere it is an error
    cache = LLMCache(None if replay else own, readonly=readonly, set_aside=not replay and cfg.runtime.on_stage_error == "skip")
    for note in cache.set_aside:
        log.warning("%s", note)
        art.notes.append(note)
    get_model = (lambda: ctx.model("llm")) if art.has_model("llm") else None
    model_id = model_fingerprint(art.model_paths["llm"]) if not replay and "llm" in art.model_paths else None
    # the budget is set on the context when the run starts (run_pipeline), so it is read at each call
    return LLMClient(cfg.llm, cache, get_model, cfg.llm.model_name or cache_name(cfg.llm.model), replay=replay,
                     model_id=model_id, time_left=lambda: ctx.budget.left() if ctx.budget is not None else float("inf"))
