"""Rewrite stage: the LLM's query variants (German translation, concepts, HyDE, sparse and
dense reformulations), each a variant of the query state with its origin."""

from __future__ import annotations

from lexrag.llm.rewrite import rewrite_queries
from lexrag.stages.base import Phase, register_stage

__all__ = ["LLMRewrite"]


class LLMRewrite:
    name = "rewrite"
    family = "rewrite"
    needs = ("llm",)
    phase = Phase.REWRITE
    essential = False
    signals = ()

    def enabled(self, cfg, art) -> bool:
        return cfg.llm.enabled and bool(cfg.llm.tasks) and art.llm_ready

    def run(self, batch, ctx):
        return rewrite_queries(batch.queries, ctx.llm, ctx.cfg.llm)


register_stage(LLMRewrite())
