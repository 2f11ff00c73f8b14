"""What the LLM stages need of a model, and the backends that provide it.

Every LLM call goes through :class:`lexrag.llm.client.LLMClient`, which needs of the model only
:class:`LLM`: render a chat, count tokens, generate greedily, and P(Yes) of a Yes/No question.
``llm.backend`` names the implementation: ``transformers`` (a causal LM folder through
:func:`lexrag.models.load_causal_lm`, 4-bit NF4 on a GPU) or ``scripted`` (fixed answers from a
``lexrag_scripted.json``, for the demo and the tests of the logic around the model).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["LLM", "BACKENDS", "backend_loader"]


@runtime_checkable
class LLM(Protocol):
    name: str
    device: str
    quantization: str

    def render_chat(self, messages: list[dict]) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def generate(self, prompts: list[str], max_new_tokens: int) -> list[tuple[str, int, int]]:
        """``(text, prompt_tokens, generated_tokens)`` per prompt, in order."""
        ...

    def yes_probability(self, prompts: list[str]) -> list[tuple[float, int]]:
        """``(P(Yes), prompt_tokens)`` per Yes/No prompt, in order."""
        ...


# backend name -> "module:function" of its loader: (folder, llm config) -> LLM
BACKENDS = {
    "transformers": "lexrag.models:load_causal_lm",
    "scripted": "lexrag.llm.scripted:load_scripted",
}


def backend_loader(backend: str) -> Callable[..., Any]:
    module, _, name = BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(module), name)
