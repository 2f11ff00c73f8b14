"""Typed configuration: dataclasses with the paper's defaults and a help string per field.

A config is built from the defaults, then a YAML file, then overrides (``section.field=value``
from the CLI, or a dict from a papermill parameters cell).  An unknown section or field is an
error naming it; a value of the wrong type is an error naming the field and the expected type.

This module holds :class:`Config` with its cross-field checks and :func:`load_config`; the sections
are in :mod:`lexrag.config.sections`, what a field is (its spec, the range check, the moved and
removed keys) in :mod:`lexrag.config.fields`, and reading values in (``--set``, type checks,
merging) in :mod:`lexrag.config.values`.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from lexrag.config.fields import REMOVED, check_ranges
from lexrag.config.notebook import notebook_flag, notebook_mapping, notebook_path
from lexrag.config.sections import (  # noqa: F401  (the sections are part of this module's interface)
    COMMUNITY_RESOLUTION, AgentConfig, ArticlesConfig, CorpusConfig, CountConfig, DictionaryConfig,
    EnglishConfig, FeedbackConfig, FusionConfig, GraphConfig, LexicalConfig, LLMConfig, PathsConfig, PriorConfig, QueryConfig, RankerConfig,
    RerankConfig, RuntimeConfig, SeedConfig, SemanticConfig, StatutesConfig, VerifyConfig,
)
from lexrag.config.values import as_numbers, deep_update, merge, parse_overrides
from lexrag.config.yamlio import read_yaml_file
from lexrag.errors import ConfigError, short
from lexrag.signals import (
    GRAPH_SIGNALS,
    VARIANTS,
    check_signal_names,
    check_task_names,
    check_variant_names,
)

__all__ = ["Config", "ConfigError", "load_config", "parse_overrides", "config_help", "presets", "with_overrides",
           "notebook_stages", "section_names", "register_section", "unregister_section"]


# sections added beside the built-in ones (a stage registered with an artifact of its own), by name
EXTRA_SECTIONS: dict[str, type] = {}


def register_section(name: str, section: type) -> type:
    """Add config section ``name``, a dataclass whose fields are made with ``field_spec``
    (:mod:`lexrag.config.fields`): config files, ``--set name.field=...``, ``lexrag config`` and
    the range checks then know it.  Configs made before it was registered do not hold it."""
    if not dataclasses.is_dataclass(section) or not isinstance(section, type):
        raise TypeError(f"config section {name!r} must be a dataclass type, got {section!r}")
    if not name.isidentifier() or name in Config.__dataclass_fields__ or name in EXTRA_SECTIONS:
        raise ValueError(f"config section {name!r} is taken or not a name")
    section()  # every field has a default: a section that cannot be made without values would break every config
    EXTRA_SECTIONS[name] = section
    return section


def unregister_section(name: str) -> None:
    EXTRA_SECTIONS.pop(name, None)


LEXICAL_FIELDS = ("citation", "title", "text", "heading", "path")  # heading, path: a corpus built with --headings


@dataclass
class Config:
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    semantic: SemanticConfig = field(default_factory=SemanticConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    seeds: SeedConfig = field(default_factory=SeedConfig)
    dictionary: DictionaryConfig = field(default_factory=DictionaryConfig)
    english: EnglishConfig = field(default_factory=EnglishConfig)
    statutes: StatutesConfig = field(default_factory=StatutesConfig)
    articles: ArticlesConfig = field(default_factory=ArticlesConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    ranker: RankerConfig = field(default_factory=RankerConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    prior: PriorConfig = field(default_factory=PriorConfig)
    count: CountConfig = field(default_factory=CountConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)

    def __post_init__(self) -> None:
        for name, section in EXTRA_SECTIONS.items():  # the registered sections, as attributes like the rest
            setattr(self, name, section())

    def uses_prior(self) -> bool:
        """The prior artifact is read: by the prior signals, or by the learned statute model (the
        training questions it holds)."""
        return self.prior.enabled or (self.statutes.enabled and self.statutes.learned)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), **{n: dataclasses.asdict(getattr(self, n)) for n in section_names(self)
                                                if n in EXTRA_SECTIONS}}

    def _check_runtime_stages(self) -> None:
        # stage names are checked against the registered stages when a run starts
        # (lexrag.stages.base.check_degrade_order): stages registered later may be named
        rc = self.runtime
        seen: set = set()
        for i, group in enumerate(rc.degrade_order):
            if not isinstance(group, list) or not group:
                raise ConfigError(f"runtime.degrade_order[{i}] must be a non-empty list of stage names, got {short(group)}")
            for name in group:
                if not isinstance(name, str):
                    raise ConfigError(f"runtime.degrade_order[{i}]: {short(name)} is not a stage name")
                if name in seen:
                    raise ConfigError(f"runtime.degrade_order: stage {short(name)} appears twice")
                seen.add(name)
        rc.stage_estimates_s = as_numbers(rc.stage_estimates_s)
        for name, v in rc.stage_estimates_s.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
                raise ConfigError(f"runtime.stage_estimates_s.{name} must be a number >= 0, got {short(v)}")

    def validate(self) -> "Config":
        check_ranges([(n, getattr(self, n)) for n in section_names(self)])
        if self.count.method == "expected_f1" and not self.ranker.enabled:
            raise ConfigError("count.method=expected_f1 reads the learned ranker's probabilities: set ranker.enabled=true "
                              "(and build the ranker artifact with --train)")
        if self.dictionary.enabled and not self.lexical.enabled and not (self.semantic.enabled
                                                                          and "dict_de" in self.semantic.variants):
            # the dict_de variant is read by BM25 (and the re-searches of statutes, articles, feedback and the graph,
            # all off with it) and by the dense stage where semantic.variants names it: else the translation is lost
            raise ConfigError("dictionary.enabled with lexical.enabled=false: nothing searches the dictionary's dict_de "
                              "translation (only BM25 reads it, or semantic with dict_de in semantic.variants); set "
                              "lexical.enabled=true, or dictionary.enabled=false")
        if self.dictionary.enabled and not self.lexical.enabled and (reads := self.dictionary.reads_index()):
            raise ConfigError(f"{reads[0]}, which lexical.enabled=false leaves unloaded: set "
                              f"lexical.enabled=true, or {reads[1]}")
        if self.count.method == "adaptive" and self.count.w_llm + self.count.w_elbow + self.count.w_cal <= 0:
            raise ConfigError("count.method=adaptive needs a positive count.w_llm, count.w_elbow or count.w_cal")
        if self.count.min_k > self.count.max_k:
            raise ConfigError("count.min_k must be <= count.max_k")
        rt = self.runtime
        if rt.time_budget_s > 0 and rt.reserve_s >= rt.time_budget_s:
            # the reserve is kept back from the budget: one as large leaves no time, so every optional stage
            # would be dropped at once
            raise ConfigError(f"runtime.reserve_s={rt.reserve_s:g} must be less than runtime.time_budget_s="
                              f"{rt.time_budget_s:g} (it is kept back from the budget for writing the submission): "
                              "lower the reserve or raise the budget")
        bad = [f for f in self.lexical.fields if f not in LEXICAL_FIELDS]
        if bad or not self.lexical.fields:
            raise ConfigError(f"lexical.fields must name corpus columns of {', '.join(LEXICAL_FIELDS)} (one named n times "
                              f"weighs n times); got {self.lexical.fields}")
        for name, value in (("llm.cache_dir", self.llm.cache_dir), *(("llm.replay_dirs", d) for d in self.llm.replay_dirs)):
            try:  # "~user/..." of a user this machine does not have
                Path(str(value or "")).expanduser()
            except RuntimeError:
                raise ConfigError(f"{name} {short(value)}: there is no such user's home folder to expand {str(value).split('/')[0]!r} "
                                  "to; give the full path") from None
        if self.lexical.stemmer:
            import Stemmer  # PyStemmer, the lexical stage's stemmer

            if self.lexical.stemmer not in Stemmer.algorithms():
                raise ConfigError(f"lexical.stemmer {short(self.lexical.stemmer)} is not a Snowball stemmer; one of "
                                  f"{', '.join(sorted(Stemmer.algorithms()))}, or an empty string for none")
        if self.semantic.enabled and not self.semantic.model:
            raise ConfigError("semantic.enabled needs semantic.model (the encoder folder)")
        if self.rerank.enabled and not self.rerank.model:
            raise ConfigError("rerank.enabled needs rerank.model (the cross-encoder folder)")
        if COMMUNITY_RESOLUTION not in self.graph.resolutions:
            raise ConfigError(f"graph.resolutions {self.graph.resolutions} lacks {COMMUNITY_RESOLUTION}, the resolution whose "
                              "communities the community signal uses: add it")
        unknown = set(self.graph.signals) - set(GRAPH_SIGNALS)
        if unknown:
            gone = sorted(u for u in unknown if f"graph.signals.{u}" in REMOVED)
            if gone:
                why = REMOVED[f"graph.signals.{gone[0]}"]
                raise ConfigError(f"graph.signals.{gone[0]} was removed ({why}): delete it from the config")
            check_signal_names(sorted(unknown), "graph.signals")
            raise ConfigError(f"graph.signals: {sorted(unknown)} are not graph signals ({', '.join(GRAPH_SIGNALS)})")
        for name, on in self.graph.signals.items():  # "no" or "maybe" would read as switched on
            if not isinstance(on, bool):
                raise ConfigError(f"graph.signals.{name} must be true or false, got {str(on)[:40]!r}")
        import math

        for field_name in ("weights",):
            check_signal_names(getattr(self.fusion, field_name), f"fusion.{field_name}")
            setattr(self.fusion, field_name, as_numbers(getattr(self.fusion, field_name)))
            for name, w in getattr(self.fusion, field_name).items():
                if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                    raise ConfigError(f"fusion.{field_name}.{name} must be a finite number >= 0, got {short(w)}")
        check_signal_names(self.fusion.boost_exclude, "fusion.boost_exclude")
        for section in ("lexical", "semantic"):  # a stage switched on to search no variant would run and find nothing
            sc = getattr(self, section)
            if sc.enabled and not sc.variants:
                raise ConfigError(f"{section}.variants is empty, so {section} would search nothing: name the variants to "
                                  f"search ({', '.join(VARIANTS)}) or set {section}.enabled=false")
        check_variant_names(self.lexical.variants, "lexical.variants")
        check_variant_names(self.semantic.variants, "semantic.variants")
        check_variant_names(self.query.preference_variants, "query.preference_variants")
        check_task_names(self.llm.tasks, "llm.tasks")
        self._check_runtime_stages()
        if self.llm.enabled and not self.llm.model and not (self.llm.mode == "replay" and self.llm.model_name):
            raise ConfigError("llm.enabled needs llm.model (the causal LM folder), or in replay mode llm.model_name (the "
                              "name that keys the cache)")
        return self



def section_names(cfg: Config) -> list[str]:
    """The sections of ``cfg``: the built-in ones, then those registered (``register_section``)."""
    return [f.name for f in dataclasses.fields(cfg)] + [n for n in EXTRA_SECTIONS if n in vars(cfg)]




PRESETS = Path(__file__).resolve().parents[1] / "presets"


def presets() -> list[str]:
    """Names of the configs shipped with the package (``load_config("kaggle")``)."""
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then the YAML file at ``path`` (if any; a bare preset name such as ``"kaggle"``
    names a config shipped with the package), then ``overrides`` (nested or dotted keys; a
    notebook's ``overrides`` string from papermill is read as YAML)."""
    if overrides is not None and not isinstance(overrides, Mapping):
        overrides = notebook_mapping("overrides", overrides)
    cfg = Config()
    if isinstance(path, str) and not path.strip():  # an empty shell variable or parameter must not mean "the defaults"
        raise ConfigError("the config is empty (an empty --config or config_path): give a YAML file or a preset name "
                          f"({', '.join(presets())}), or leave it out (None) for the defaults")
    path = notebook_path("config_path", path)  # a number or list from a notebook parameter is named, not a TypeError
    if path:
        p = Path(path)
        if not p.is_file() and str(path) in presets():
            p = PRESETS / f"{path}.yaml"
        elif p.is_file() and str(path) in presets():  # a bare name: the file in the current folder wins, and says so
            warnings.warn(f"--config {path}: the file {p.resolve()} is read, not the preset {path!r}; rename the file")
        if p.is_dir():
            raise ConfigError(f"config {p} is a folder; give a YAML file (or a preset: {', '.join(presets())})")
        if os.path.exists(p) and not p.is_file():
            raise ConfigError(f"config {p} is not a regular file (a FIFO or device); give a YAML file "
                              f"(or a preset: {', '.join(presets())})")
        if not p.is_file():
            hint = (f"; the preset {p.stem!r} is named without a path: --config {p.stem}"
                    if p.stem in presets() and str(path) != p.stem else f" (presets: {', '.join(presets())})")
            raise ConfigError(f"config file not found: {path}{hint}")
        data = read_yaml_file(p)
        if data is None:  # well-formed YAML, so accepted; but a truncated copy must not pass in silence
            warnings.warn(f"config {p} holds no settings (empty or only comments): the package defaults are used")
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
        try:
            merge(cfg, data, names=section_names(cfg))
            check_ranges([(n, getattr(cfg, n)) for n in section_names(cfg)])  # a value out of range is the file's
        except ConfigError as e:
            raise ConfigError(f"{p}: {e}") from None
    if overrides:
        nested: dict = {}
        for k, v in overrides.items():
            if "." in k:
                nested = deep_update(nested, parse_overrides([f"{k}={yaml.safe_dump(v)}"]))
            else:
                nested = deep_update(nested, {k: v})
        merge(cfg, nested, names=section_names(cfg))
    return cfg.validate()


def with_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """A copy of ``cfg`` with dotted ``overrides`` applied and validated (grid points, ablations)."""
    import copy

    out = copy.deepcopy(cfg)
    nested: dict = {}
    for k, v in overrides.items():
        nested = deep_update(nested, parse_overrides([f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}"]))
    merge(out, nested, names=section_names(out))
    return out.validate()



def config_help() -> str:
    """Every field with its default and help text, for ``python -m lexrag config``."""
    lines, cfg = [], Config()
    for name in section_names(cfg):
        lines.append(f"{name}:")
        section = getattr(cfg, name)
        for f in dataclasses.fields(section):
            lines.append(f"  {f.name}: {getattr(section, f.name)!r}  # {f.metadata.get('help', '')}")
    return "\n".join(lines)


def notebook_stages(value: Any) -> dict:
    """The ``stages`` parameter (``{"graph": false}``) as config overrides (``graph.enabled``): each
    name must be a stage that can be switched, each value True or False; anything else is one
    :class:`ConfigError` naming the parameter and the stages there are."""
    cfg = Config()
    switchable = sorted(n for n in section_names(cfg) if hasattr(getattr(cfg, n), "enabled"))
    out = {}
    for stage, on in notebook_mapping("stages", value).items():
        if stage not in switchable:
            raise ConfigError(f"parameter stages: {short(stage)} is not a stage that can be switched on or off; "
                              f"stages: {', '.join(switchable)}")
        out[f"{stage}.enabled"] = notebook_flag(f"stages.{stage}", on)
    return out
