"""Prompt templates: versioned text files in ``lexrag/llm/prompts/``.

A template file has a header of ``key: value`` lines (``version``, ``output`` = text | json | yesno,
``max_new_tokens``; ``#`` lines are comments), then the messages, each introduced by a line
``--- system``, ``--- user`` or ``--- assistant``.  Variables are written ``{{name}}``; rendering
without one of them is a :class:`PromptError` naming the template and the variable, so a prompt
never reaches the model half-filled.  The template's identity for the LLM cache is its name plus
a hash of the file (a changed prompt is a new cache key).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from lexrag.errors import PromptError

__all__ = ["Template", "load_template", "template_names", "PROMPTS_DIR"]

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_ROLE = re.compile(r"^--- (system|user|assistant)\s*$")


@dataclass(frozen=True)
class Template:
    name: str
    version: int
    output: str  # "text" | "json" | "yesno" (scored by the next-token probability of Yes)
    max_new_tokens: int
    messages: tuple[tuple[str, str], ...]  # (role, text with {{variables}})
    sha256: str

    @property
    def id(self) -> str:
        return f"{self.name}@v{self.version}:{self.sha256[:12]}"

    def variables(self) -> set[str]:
        return {m for _, text in self.messages for m in _VAR.findall(text)}

    def render(self, values: Mapping[str, object]) -> list[dict]:
        """Chat messages with every ``{{variable}}`` filled in."""

        def fill(m: re.Match) -> str:
            key = m.group(1)
            if key not in values:
                raise PromptError(f"prompt template {self.name!r} needs variable {key!r}; given: {sorted(values)}")
            return str(values[key])

        return [{"role": role, "content": _VAR.sub(fill, text)} for role, text in self.messages]


def _parse(name: str, raw: str) -> Template:
    header: dict[str, str] = {}
    messages: list[list[str]] = []
    for line in raw.splitlines():
        m = _ROLE.match(line)
        if m:
            messages.append([m.group(1), ""])
        elif messages:
            messages[-1][1] += line + "\n"
        elif line.strip() and not line.lstrip().startswith("#"):
            if ":" not in line:
                raise PromptError(f"prompt template {name!r}: header line {line!r} is not 'key: value'")
            k, v = line.split(":", 1)
            header[k.strip()] = v.strip()
    if not messages or messages[-1][0] != "user":
        raise PromptError(f"prompt template {name!r}: needs messages (--- system / --- user), the last from the user")
    try:
        version = int(header.get("version", ""))
        max_new = int(header.get("max_new_tokens", "256"))
    except ValueError:
        raise PromptError(f"prompt template {name!r}: version and max_new_tokens must be integers") from None
    output = header.get("output", "text")
    if output not in ("text", "json", "yesno"):
        raise PromptError(f"prompt template {name!r}: output must be text, json or yesno, got {output!r}")
    msgs = tuple((role, text.strip("\n")) for role, text in messages)
    return Template(name, version, output, max_new, msgs, hashlib.sha256(raw.encode("utf-8")).hexdigest())


@lru_cache(maxsize=None)
def load_template(name: str, folder: str | None = None) -> Template:
    """The template ``name`` (file ``<name>.txt``) from the package's prompts folder or ``folder``."""
    path = Path(folder or PROMPTS_DIR) / f"{name}.txt"
    if not path.is_file():
        raise PromptError(f"prompt template {name!r} not found: {path} (known: {', '.join(template_names(folder))})")
    return _parse(name, path.read_text(encoding="utf-8"))


def template_names(folder: str | None = None) -> list[str]:
    return sorted(p.stem for p in Path(folder or PROMPTS_DIR).glob("*.txt"))
