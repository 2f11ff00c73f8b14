"""The configurations the experiment harness measures: a :class:`Variant` is a preset plus
dotted-key overrides, ranking :data:`RANK_DEPTH` deep so the harness chooses the count; the preset
variants (``--ablation presets``), the learned ranker's steps (``--ablation ranker``) and the
``--variants`` syntax (:func:`parse_variant`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from lexrag.config import Config, load_config
from lexrag.errors import ConfigError
from lexrag.config.yamlio import UniqueKeyLoader

__all__ = ["Variant", "PRESET_VARIANTS", "RANKER_VARIANTS", "GPU_STAGES_OFF", "RANK_DEPTH", "RANK", "parse_variant"]

RANK_DEPTH = 300  # every variant ranks this deep (Recall@100, whole articles); the count cuts it
RANK = {"runtime.progress": False, "count.method": "fixed", "count.k": RANK_DEPTH}
# counts a variant keeps as its preset (or overrides) set them, scored as emitted: the learned count,
# whose ranker the harness refits per fold (the adaptive count reads an LLM and a calibration it cannot)
OWN_COUNTS = ("expected_f1",)
# the kaggle preset without the stages that need a GPU or an LLM: what this harness can run on a CPU
GPU_STAGES_OFF = {"semantic.enabled": False, "rerank.enabled": False, "llm.enabled": False, "verify.enabled": False,
                  "agent.enabled": False}


@dataclass(frozen=True)
class Variant:
    """A configuration to measure: a preset (None: the defaults) plus dotted-key overrides."""

    name: str
    preset: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def config(self, base: str | Path | None = None) -> Config:
        """The variant's config ranking :data:`RANK_DEPTH` deep (the count is chosen by the harness),
        or, where its preset counts with a rule the harness fits per fold (:data:`OWN_COUNTS`), that
        rule, scored as emitted; ``base`` replaces the defaults under a variant without a preset."""
        own = load_config(self.preset or base, {"runtime.progress": False, **self.overrides})
        if own.count.method in OWN_COUNTS:
            return own
        return load_config(self.preset or base, {**RANK, **self.overrides})


PRESET_VARIANTS = (
    Variant("lexical", "lexical"),
    Variant("default"),
    Variant("exam", "exam"),
    Variant("kaggle (CPU stages)", "kaggle", GPU_STAGES_OFF),
)


# The learned ranker's steps (``--ablation ranker``): on candidates that fit nothing on gold
# (statutes by the codes a question names and by the BM25 vote, articles, feedback), so the
# ranker and its count are the only things fitted, per fold; then on the exam
# preset's.  Variants with their own count are scored as they emit (no k chosen for them).
_CANDIDATES = {"statutes.enabled": True, "articles.enabled": True, "feedback.enabled": True}
_LEARNED = {**_CANDIDATES, "ranker.enabled": True, "count.method": "expected_f1"}
RANKER_VARIANTS = (
    Variant("lexical", "lexical"),
    Variant("ranker candidates (fused)", "lexical", _CANDIDATES),
    Variant("fused order, learned count", "lexical", {**_LEARNED, "ranker.reorder": False}),
    Variant("learned order, learned count", "lexical", _LEARNED),
    Variant("exam, fixed count", "exam", {"ranker.enabled": False, "count.method": "fixed"}),
    Variant("exam", "exam"),  # its fused order cut by the learned count
)


def parse_variant(spec: str) -> Variant:
    """``PRESET``, ``PRESET;section.field=value;...`` or ``NAME=PRESET;...`` (``default``: no preset;
    values are YAML)."""
    name, _, rest = spec.partition("=") if "=" in spec.split(";", 1)[0] else ("", "", spec)
    head, *over = [p for p in rest.split(";")]
    preset = head.strip() or "default"
    overrides = {}
    for o in over:
        if not o.strip():
            continue
        if "=" not in o:
            raise ConfigError(f"variant {spec!r}: {o!r} is not section.field=value")
        k, v = o.split("=", 1)
        if k.strip() in overrides:  # the later would silently win
            raise ConfigError(f"variant {spec!r}: {k.strip()} is given twice; give it once")
        overrides[k.strip()] = yaml.load(v, Loader=UniqueKeyLoader)
    for pv in PRESET_VARIANTS:  # a preset variant's name stands for it (with its overrides)
        if preset == pv.name:
            return Variant(name.strip() or spec, pv.preset, {**pv.overrides, **overrides})
    return Variant(name.strip() or spec, None if preset == "default" else preset, overrides)
