"""Config values read in: ``--set`` items parsed, each value checked against its field's type
(a list's elements, a mapping's keys, a value's expanded size), and mappings merged into a config
field by field, a moved or removed key named as such."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Iterable, Mapping

import yaml

from lexrag.config.fields import MOVED, REMOVED
from lexrag.config.yamlio import UniqueKeyLoader, bounded_size, yaml12_number, yaml_problem
from lexrag.errors import ConfigError, short

__all__ = ["parse_overrides", "merge", "deep_update", "as_numbers", "expanded_size", "MAX_VALUE_NODES"]


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


def as_numbers(mapping: dict) -> dict:
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


def merge(obj: Any, data: Mapping[str, Any], prefix: str = "", names: Iterable[str] | None = None) -> None:
    """Set the fields of dataclass ``obj`` from ``data``, a section (mapping) merged into the
    section it names and a mapping field key by key, each value checked against its field's type.
    ``names`` are the keys ``obj`` takes: its fields unless given (a config passes its sections, the
    registered ones among them); a key it lacks is an error, told where a moved key went or why a
    removed one went."""
    hints = typing.get_type_hints(type(obj))
    names = set(names) if names is not None else {f.name for f in dataclasses.fields(obj)}
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
            merge(current, value, f"{path}.")
        elif hints[key] is dict and isinstance(current, dict) and isinstance(value, Mapping):
            # a mapping field is updated key by key (fusion.weights, graph.signals, runtime.stage_estimates_s):
            # setting one weight keeps the others
            setattr(obj, key, {**current, **_check_type(path, value, dict)})
        else:
            setattr(obj, key, _check_type(path, value, hints[key]))


def deep_update(a: dict, b: Mapping) -> dict:
    """``a`` with ``b`` merged in, nested mappings key by key (overrides gathered from several items)."""
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(a.get(k), dict):
            deep_update(a[k], v)
        else:
            a[k] = v
    return a


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
