"""Notebook parameters as papermill passes them: ``-p x false`` arrives as the string "false",
``-p overrides '{...}'`` as a string, ``-y`` as any YAML type.  Each reader takes what a user
means and names the parameter in one line otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from lexrag.errors import ConfigError, short
from lexrag.config.yamlio import UniqueKeyLoader, yaml_problem

__all__ = ["notebook_mapping", "notebook_path", "notebook_flag"]


def notebook_mapping(name: str, value: Any) -> dict:
    """A notebook parameter meant as a mapping (``overrides``, ``stages``).  papermill's ``-p``
    passes ``'{"count.k": 3}'`` as a string: it is read as YAML; anything else that is not a
    mapping is a :class:`ConfigError` naming the parameter."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            parsed = yaml.load(value, Loader=UniqueKeyLoader)
        except yaml.YAMLError as e:
            raise ConfigError(f"parameter {name}: {short(value)} is not valid YAML ({yaml_problem(e)})") from None
        value = {} if parsed is None else parsed
    if not isinstance(value, Mapping):
        key, val, yml = _EXAMPLES.get(name, _EXAMPLES["overrides"])
        raise ConfigError(f"parameter {name}: expected a mapping such as {{\"{key}\": {val}}}, got {type(value).__name__} "
                          f"{short(value)} (papermill: -y '{name}: {{{key}: {yml}}}' or -p {name} '{{\"{key}\": {val}}}')")
    return dict(value)


# an example of each mapping parameter for its error message: (key, JSON value, YAML value)
_EXAMPLES = {"overrides": ("count.k", "3", "3"), "stages": ("graph", "false", "false")}


def notebook_path(name: str, value: Any) -> str | None:
    """A notebook parameter meant as a file or folder name (``queries``, ``out_dir``,
    ``artifacts_dir``, ``llm_cache``, ``config_path``): a string (or path) as given, ``None`` for
    None; an empty string (an unset shell variable, never the default), a number, list or mapping
    (``-y 'queries: 3'``) is a :class:`ConfigError` naming the parameter."""
    import os

    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigError(f"parameter {name}: expected a path (a string), got {type(value).__name__} {short(value, 60)} "
                          f"(papermill: -p {name} PATH)")
    if "\x00" in value:
        raise ConfigError(f"parameter {name}: {short(value, 60)} holds a NUL character; give a path")
    if not value.strip():  # an empty shell variable: never taken to mean the default folder
        raise ConfigError(f"parameter {name} is empty; leave it out (None) for the default, or give a path")
    return value


_FLAGS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def notebook_flag(name: str, value: Any) -> bool:
    """A notebook parameter meant as True/False.  papermill's ``-p x false`` passes the string
    ``"false"``, which Python would count as true: the usual spellings are read, anything else is
    a :class:`ConfigError` naming the parameter."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _FLAGS:
        return _FLAGS[value.strip().lower()]
    raise ConfigError(f"parameter {name}: expected True or False, got {short(value)}")
