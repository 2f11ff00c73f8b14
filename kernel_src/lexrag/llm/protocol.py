"""What the LLM stages need of a model, and the backends that provide it.

Every LLM call goes through :class:`lexrag.llm.client.LLMClient`, which needs of the model only
:class:`LLM`: render a chat, count tokens, generate greedily, and P(Yes) of a Yes/No question.
``llm.backend`` names the implementation: ``transformers`` (a causal LM folder through
:func:`lexrag.models.load_causal_lm`, 4-bit NF4 on a GPU) or ``scripted`` (fixed answers from a
``lexrag_scripted.json``, for the demo and the tests of the logic around the model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from lexrag.llm.scripted import load_scripted
from lexrag.models import load_causal_lm

__all__ = ["LLM", "BACKENDS"]


@runtime_checkable
class LLM(Protocol):
    name: str
    device: str
    quantization: str

    def render_chat(self, messages: list[dict]) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def generate(self, prompts: list[str], max_new_tokens: int,
                 max_time: float | None = None) -> list[tuple[str, int, int]]:
        """``(text, prompt_tokens, generated_tokens)`` per prompt, in order.  ``max_time`` (the
        seconds the run's time budget has left; None: no limit) bounds the batch: a backend that
        stops by it raises :class:`lexrag.errors.BudgetSpent` rather than return a cut answer.
        A backend whose ``generate`` takes no ``max_time`` is still accepted: the client then
        only refuses a batch once the budget is spent."""
        ...

    def yes_probability(self, prompts: list[str]) -> list[tuple[float, int]]:
        """``(P(Yes), prompt_tokens)`` per Yes/No prompt, in order."""
        ...


def _transformers(folder: Path, lc: Any) -> LLM:
    return load_causal_lm(folder, lc.quantization, lc.device, lc.compute_dtype)


def _scripted(folder: Path, lc: Any) -> LLM:
    return load_scripted(folder)


# llm.backend -> its loader, one shape for every backend: (model folder, the llm config section) -> LLM;
# a new backend is a loader here and its name in the section's choices
BACKENDS: dict[str, Callable[[Path, Any], LLM]] = {
    "transformers": _transformers,
    "scripted": _scripted,
}
