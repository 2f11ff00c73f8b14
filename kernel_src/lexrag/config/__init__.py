"""Typed configuration: dataclasses with the paper's defaults and a help string per field.

A config is built from the defaults, then a YAML file, then overrides (``section.field=value``
from the CLI, or a dict from a papermill parameters cell).  An unknown section or field is an
error naming it; a value of the wrong type is an error naming the field and the expected type.
"""

from __future__ import annotations

import dataclasses
import os
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from lexrag.config.sections import (  # noqa: F401  (the sections are part of this module's interface)
    COMMUNITY_RESOLUTION, MOVED, REMOVED, AgentConfig, ArticlesConfig, CorpusConfig, CountConfig, DictionaryConfig,
    EnglishConfig, FeedbackConfig, FusionConfig, GraphConfig, LexicalConfig, LLMConfig, PathsConfig, PriorConfig, QueryConfig, RankerConfig,
    RerankConfig, RuntimeConfig, SeedConfig, SemanticConfig, StatutesConfig, VerifyConfig, check_ranges,
)
from lexrag.errors import ConfigError, short
from lexrag.config.notebook import notebook_flag, notebook_mapping, notebook_path
from lexrag.signals import (
    GRAPH_SIGNALS,
    VARIANTS,
    check_signal_names,
    check_task_names,
    check_variant_names,
)
from lexrag.config.yamlio import UniqueKeyLoader, bounded_size, read_yaml_file, yaml12_number, yaml_problem

__all__ = ["Config", "ConfigError", "load_config", "parse_overrides", "config_help", "presets", "with_overrides",
           "notebook_stages", "section_names", "register_section", "unregister_section"]


# sections added beside the built-in ones (a stage registered with an artifact of its own), by name
EXTRA_SECTIONS: dict[str, type] = {}


def register_section(name: str, section: type) -> type:
    """Add config section ``name``, a dataclass whose fields are made with ``field_spec``
    (:mod:`lexrag.config.sections`): config files, ``--set name.field=...``, ``lexrag config`` and
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
        rc.stage_estimates_s = _numbers(rc.stage_estimates_s)
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
            setattr(self.fusion, field_name, _numbers(getattr(self.fusion, field_name)))
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


# The element type of each list field; every list not named here holds strings (names, folders).
LIST_ELEMENTS: dict[str, tuple[type, ...]] = {"graph.resolutions": (int, float), "runtime.degrade_order": (list,)}
MAX_VALUE_NODES = 10_000  # a config value (every list, mapping and scalar in it, shared ones counted each time) at most


def expanded_size(value: Any, limit: int = MAX_VALUE_NODES) -> int:
    """How many lists, mappings and scalars ``value`` holds when every shared reference is counted
    each time it occurs (what printing or copying it would expand); stops counting past ``limit``
    (returns ``limit + 1``), and a value that contains itself counts as past the limit."""
    return bounded_size(value, lambda v: ((x for kv in v.items() for x in kv) if isinstance(v, dict) else v)
                        if isinstance(v, (list, tuple, dict)) else None, limit)


def _check_elements(path: str, value: list) -> list:
    want = LIST_ELEMENTS.get(path, (str,))
    for i, x in enumerate(value):
        if isinstance(x, bool) and bool not in want or not isinstance(x, want):
            names = " or ".join("number" if t in (int, float) else ("list" if t is list else t.__name__) for t in dict.fromkeys(
                float if t is int else t for t in want))
            raise ConfigError(f"{path}[{i}]: expected a {names}, got {type(x).__name__} {short(x, 60)}")
    return list(value)


def _numbers(mapping: dict) -> dict:
    """A mapping of numbers (fusion weights, stage estimates) with ``1e-3`` read as the float it is,
    as the float fields read it."""
    return {k: yaml12_number(v) for k, v in mapping.items()}


def _check_type(path: str, value: Any, tp: Any) -> Any:
    if isinstance(value, (list, tuple, dict)) and expanded_size(value) > MAX_VALUE_NODES:
        raise ConfigError(f"{path}: the value expands to more than {MAX_VALUE_NODES:,} items (a very long "
                          "list or mapping, or YAML aliases repeating one another); write it out plainly or shorten it")
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        value = yaml12_number(value)  # YAML 1.2 reads 1e-9 as a float; PyYAML (YAML 1.1) leaves it a string
    if tp is list:
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {short(value)}")
        return _check_elements(path, value)
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {short(value)}")
        bad = next((k for k in value if not isinstance(k, str)), None)
        if bad is not None:
            raise ConfigError(f"{path}: key {short(bad, 60)} is not a name (a {type(bad).__name__})")
        return dict(value)
    if tp in (int, float, str, bool):
        if type(value) is not tp:
            raise ConfigError(f"{path}: expected {tp.__name__}, got {type(value).__name__} {short(value)}")
    return value


def section_names(cfg: Config) -> list[str]:
    """The sections of ``cfg``: the built-in ones, then those registered (``register_section``)."""
    return [f.name for f in dataclasses.fields(cfg)] + [n for n in EXTRA_SECTIONS if n in vars(cfg)]


def _merge(obj: Any, data: Mapping[str, Any], prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    names = set(section_names(obj)) if isinstance(obj, Config) else {f.name for f in dataclasses.fields(obj)}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in names:
            moved = MOVED.get(path)
            if moved:
                raise ConfigError(f"config key {path} is now {moved}: rename it in the config (or --set {moved}=...)")
            if path in REMOVED:
                raise ConfigError(f"config key {path} was removed ({REMOVED[path]}): delete it from the config")
            raise ConfigError(f"unknown config key {short(path)}; known: {', '.join(sorted(names))}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{path}: expected a section (mapping), got {short(value)}")
            _merge(current, value, f"{path}.")
        elif hints[key] is dict and isinstance(current, dict) and isinstance(value, Mapping):
            # a mapping field is updated key by key (fusion.weights, graph.signals, runtime.stage_estimates_s):
            # setting one weight keeps the others
            setattr(obj, key, {**current, **_check_type(path, value, dict)})
        else:
            setattr(obj, key, _check_type(path, value, hints[key]))


def parse_overrides(items: list[str] | None) -> dict:
    """``["fusion.rrf_k=30", "count.method=elbow"]`` -> nested dict; values are parsed as YAML.  A
    key given twice (``count.k=3`` and ``count.k=7``, or ``count.k`` and then all of ``count``) is
    refused, naming it and both values: which one was meant cannot be known."""
    out: dict = {}
    given: dict[tuple[str, ...], str] = {}  # the path of each override -> its value as written
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"override {short(item)} is not of the form section.field=value")
        path, raw = item.split("=", 1)
        node = out
        parts = path.strip().split(".")
        if not all(parts):
            raise ConfigError(f"override {short(item)}: {short(path)} is not a section.field path")
        for i, p in enumerate(parts[:-1]):
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {short(item)}: an earlier override set {'.'.join(parts[:i + 1])} to {short(node)}, "
                                  "so it has no fields to set")
        if parts[-1] in node:  # the same key again, or a section (mapping) of which a field was set before
            key = tuple(parts)
            earlier = next(((k, v) for k, v in given.items() if k[:len(key)] == key or key[:len(k)] == k), None)
            first = f"{'.'.join(earlier[0])}={_as_written(earlier[1])}" if earlier else short(node[parts[-1]], 40)
            raise ConfigError(f"--set {'.'.join(parts)} is given twice ({first} and {'.'.join(parts)}={_as_written(raw)}); "
                              "give it once")
        given[tuple(parts)] = raw
        try:
            node[parts[-1]] = yaml.load(raw, Loader=UniqueKeyLoader)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {short(item)}: the value {short(raw)} is not valid YAML ({yaml_problem(e)}); "
                              f"quote strings, write lists as [a, b]") from None
        except RecursionError:
            raise ConfigError(f"override {short(item)}: the value is nested too deeply to read; no field takes more "
                              "than a list of lists") from None
        except ValueError as e:  # a number of more than 4,300 digits: Python refuses to read it
            if "digits" not in str(e):
                raise
            raise ConfigError(f"override {short(path.strip(), 60)}: the value is a number of {len(raw.strip()):,} "
                              "characters, past any field's range; give a number in the field's range "
                              "(lexrag config lists the fields)") from None
    return out


def _as_written(raw: str, width: int = 40) -> str:
    """An override's value as the command line gave it, when it is short and printable; else its repr, cut."""
    text = raw.strip()
    return text if len(text) <= width and text.isprintable() else short(text, width)


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
            _merge(cfg, data, "")
            check_ranges([(n, getattr(cfg, n)) for n in section_names(cfg)])  # a value out of range is the file's
        except ConfigError as e:
            raise ConfigError(f"{p}: {e}") from None
    if overrides:
        nested: dict = {}
        for k, v in overrides.items():
            if "." in k:
                nested = _deep_update(nested, parse_overrides([f"{k}={yaml.safe_dump(v)}"]))
            else:
                nested = _deep_update(nested, {k: v})
        _merge(cfg, nested, "")
    return cfg.validate()


def with_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """A copy of ``cfg`` with dotted ``overrides`` applied and validated (grid points, ablations)."""
    import copy

    out = copy.deepcopy(cfg)
    nested: dict = {}
    for k, v in overrides.items():
        nested = _deep_update(nested, parse_overrides([f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}"]))
    _merge(out, nested, "")
    return out.validate()


def _deep_update(a: dict, b: Mapping) -> dict:
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(a.get(k), dict):
            _deep_update(a[k], v)
        else:
            a[k] = v
    return a


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
