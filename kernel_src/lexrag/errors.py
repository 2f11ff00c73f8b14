"""One base error class for the package.

Every error a user can cause (a bad file, config, artifact, model folder or LLM cache) derives
from :class:`LexragError`; the CLI catches it and prints one line.  Each class also derives from
the builtin it used to be, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

__all__ = [
    "short",
    "LexragError",
    "ConfigError",
    "ArtifactError",
    "CsvInputError",
    "ModelLoadError",
    "PromptError",
    "LLMOutputError",
    "ReplayMissError",
    "StageError",
]


class LexragError(Exception):
    """Base class: a problem the user can fix; the message says what and where."""


class ConfigError(LexragError, ValueError):
    """Bad configuration: unknown key, wrong type or invalid value."""


class ArtifactError(LexragError, RuntimeError):
    """A missing, incomplete or mismatched artifact."""


class CsvInputError(LexragError, RuntimeError):
    """An input CSV that cannot be read as required; the message names file and lines."""


class ModelLoadError(LexragError, RuntimeError):
    """A model folder that is missing or cannot be loaded."""


class PromptError(LexragError, KeyError):
    """A prompt template that is missing, malformed or rendered without a variable."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class LLMOutputError(LexragError, ValueError):
    """LLM output that is not the JSON a template asked for."""


class ReplayMissError(LexragError, LookupError):
    """Replay mode met an LLM call that the cache does not hold."""


class StageError(LexragError, RuntimeError):
    """A stage that breaks the protocol (unknown phase, duplicate name, bad output)."""


def short(value: "object", width: int = 80) -> str:
    """``repr(value)`` cut to about ``width`` characters without building the whole repr (a value
    of shared references, such as a YAML alias bomb, would expand to gigabytes)."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 3, 6, 6, 6, 6
    r.maxstring = r.maxother = r.maxlong = width
    text = r.repr(value)
    return text if len(text) <= width + 8 else text[:width] + "..."
