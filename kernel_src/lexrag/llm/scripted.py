"""A scripted stand-in for the causal LM: fixed answers from a JSON file, no weights.

It exists so that the LLM stages (rewrite, verification, the agentic loop, the adaptive count)
can be exercised end to end where no GPU and no instruction model are at hand: the demo's
validation notebook, its ablation rows and tests whose subject is the logic around the model.  It
is the ``scripted`` backend (``llm.backend: scripted``, :mod:`lexrag.llm.protocol`) with ``llm.model``
a folder holding ``lexrag_scripted.json``; the ``transformers`` backend refuses such a folder.  Its numbers
measure the pipeline's plumbing under the script, never a model's quality.

The script::

    {"format": "lexrag-scripted-llm/1",
     "default_output": "",            # generation with no matching rule
     "default_yes": 0.1,              # P(Yes) with no matching rule
     "seconds_per_call": 0,           # simulated cost of each answer (optional)
     "rules": [
        {"when": ["Translate", "Who is liable"], "output": "Wer haftet ..."},
        {"when": ["Would a decision", "Source: Art. 97 Abs. 1 OR"], "yes": 0.95},
        {"when": ["plan searches"], "output": "{...}", "repeat": 50, "seconds": 100},
        {"when": ["Translate into German"], "echo": "Translate into German:"}]}

A rule applies when every ``when`` string occurs in the rendered prompt (case-sensitive), first
rule first; ``yes`` rules answer Yes/No questions, ``output`` rules generations (``repeat``
repeats the output, which then stops at the token cap like a model that does not stop; ``echo``
answers with the prompt text after the given marker, e.g. a German question "translated" as
itself).  Tokens
are counted as whitespace-separated words.

``seconds_per_call`` makes the stand-in slow: each answer (a generation or a P(Yes)) sleeps that
long, or a rule's own ``seconds`` for the answers it gives, so the time budget can be tried on it
(with a fake clock in the tests).  A generation batch given a ``max_time`` shorter than its cost
sleeps ``max_time`` and is cut, as a model's generation is (:class:`lexrag.errors.BudgetSpent`);
a P(Yes) is one forward pass and is never cut.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lexrag.errors import BudgetSpent, ModelLoadError

__all__ = ["ScriptedLM", "SCRIPT_FILE", "is_scripted", "load_scripted", "write_script"]

SCRIPT_FILE = "lexrag_scripted.json"
FORMAT = "lexrag-scripted-llm/1"


def is_scripted(folder: str | Path) -> bool:
    return (Path(folder) / SCRIPT_FILE).is_file()


def write_script(folder: str | Path, rules: list[dict] = (), **top) -> Path:
    """A scripted stand-in's folder, as :func:`load_scripted` reads it: ``rules`` and the top-level
    settings (``default_output``, ``default_yes``, ``seconds_per_call``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCRIPT_FILE).write_text(json.dumps({"format": FORMAT, "rules": list(rules), **top}), encoding="utf-8")
    return folder


class ScriptedLM:
    """The interface of :class:`lexrag.models.CausalLM` (render_chat, generate, yes_probability)."""

    quantization = "scripted"
    device = "cpu"

    def __init__(self, script: dict, name: str):
        self.name = name
        self.rules = script.get("rules", [])
        self.default_output = str(script.get("default_output", ""))
        self.default_yes = float(script.get("default_yes", 0.1))
        self.seconds_per_call = float(script.get("seconds_per_call", 0.0))

    def render_chat(self, messages: list[dict]) -> str:
        return "\n".join(f"<{m['role']}>\n{m['content']}" for m in messages) + "\n<assistant>\n"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _rule(self, prompt: str, key: str) -> dict | None:
        for r in self.rules:
            if key in r and all(w in prompt for w in r.get("when", [])):
                return r
        return None

    def _seconds(self, rules: list[dict | None]) -> float:
        """The simulated cost of answering with ``rules`` (None: no rule matched)."""
        return sum(float(r.get("seconds", self.seconds_per_call)) if r is not None else self.seconds_per_call
                   for r in rules)

    def generate(self, prompts: list[str], max_new_tokens: int,
                 max_time: float | None = None) -> list[tuple[str, int, int]]:
        rules = [self._rule(p, "output") or self._rule(p, "echo") for p in prompts]
        cost = self._seconds(rules)
        if max_time is not None and cost > max_time:  # stopped by the time limit mid-answer
            time.sleep(max(max_time, 0.0))
            raise BudgetSpent(f"{self.name}: generation cut by its time limit of {max_time:.1f}s "
                              f"({cost:.1f}s of simulated work)")
        if cost:
            time.sleep(cost)
        out = []
        for p, r in zip(prompts, rules):
            if r is None:
                text = self.default_output
            elif "echo" in r:
                text = p.split(r["echo"], 1)[-1].split("\n<assistant>", 1)[0].strip()
            else:
                text = " ".join([str(r["output"])] * int(r.get("repeat", 1)))
            words = text.split(" ")
            if len(words) > max_new_tokens:
                text = " ".join(words[:max_new_tokens])
            out.append((text, self.count_tokens(p), min(len(words), max_new_tokens)))
        return out

    def yes_probability(self, prompts: list[str]) -> list[tuple[float, int]]:
        rules = [self._rule(p, "yes") for p in prompts]
        cost = self._seconds(rules)
        if cost:
            time.sleep(cost)
        out = []
        for p, r in zip(prompts, rules):
            out.append((float(r["yes"]) if r is not None else self.default_yes, self.count_tokens(p)))
        return out


def load_scripted(folder: str | Path) -> ScriptedLM:
    """Read ``folder/lexrag_scripted.json``; a file that is not such a script is a
    :class:`ModelLoadError` naming the file and what is wrong."""
    path = Path(folder) / SCRIPT_FILE
    try:
        script = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ModelLoadError(f"{path}: not a readable JSON script ({str(e)[:200] or type(e).__name__})") from None
    if not isinstance(script, dict) or script.get("format") != FORMAT:
        raise ModelLoadError(f"{path}: not a lexrag scripted-LLM file (needs \"format\": \"{FORMAT}\")")
    if not isinstance(script.get("rules", []), list):
        raise ModelLoadError(f"{path}: 'rules' must be a list of rules")
    for i, r in enumerate(script.get("rules", [])):
        if not isinstance(r, dict) or not isinstance(r.get("when", []), list) or sum(k in r for k in ("output", "yes", "echo")) != 1:
            raise ModelLoadError(f"{path}: rule {i}: needs a list 'when' and exactly one of 'output', 'yes' or 'echo'")
        if "yes" in r and not (isinstance(r["yes"], (int, float)) and 0.0 <= r["yes"] <= 1.0):
            raise ModelLoadError(f"{path}: rule {i}: 'yes' must be a probability in [0, 1], got {r['yes']!r}")
        if "seconds" in r and not _seconds_ok(r["seconds"]):
            raise ModelLoadError(f"{path}: rule {i}: 'seconds' must be a number of seconds >= 0, got {str(r['seconds'])[:40]!r}")
    d = script.get("default_yes", 0.1)
    if isinstance(d, bool) or not (isinstance(d, (int, float)) and 0.0 <= d <= 1.0):
        raise ModelLoadError(f"{path}: 'default_yes' must be a probability in [0, 1], got {str(d)[:40]!r}")
    c = script.get("seconds_per_call", 0.0)
    if not _seconds_ok(c):
        raise ModelLoadError(f"{path}: 'seconds_per_call' must be a number of seconds >= 0, got {str(c)[:40]!r}")
    return ScriptedLM(script, Path(folder).name)


def _seconds_ok(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 0.0 <= v < float("inf")
