"""The LLM client: templates in, generations out, through the cache.

``generate(template, values)`` renders each prompt, answers from the cache what it holds and
generates the rest in batches (longest prompt first, so a batch pads little), storing every
result.  In replay mode (``llm.mode: replay``) nothing is ever loaded: a call the cache lacks is
a :class:`ReplayMissError` naming the template, the query and the cache.  The model is taken
from the model pool only when there is something to generate, so it takes turns with the encoder
and the reranker.

With a time budget (``time_left``, the seconds the run has left), no generation batch starts once
the budget is spent, and each gets the seconds left as its time limit (the model's ``max_time``).
Either way the client raises :class:`BudgetSpent` naming the batch's queries: the answers of the
batches before it are complete and cached, the refused or cut batch's are neither cached nor used.
A Yes/No batch is one forward pass: the check before it is its limit.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from lexrag.errors import BudgetSpent, ReplayMissError
from lexrag.llm.cache import LLMCache, cache_key, clean_text
from lexrag.llm.prompts import Template

__all__ = ["LLMClient", "Generation", "book"]

log = logging.getLogger(__name__)

def bounded(text: str, max_chars: int, what: str) -> str:
    """``text`` cut to ``max_chars`` characters (``llm.max_answer_chars``, with a warning naming
    ``what``: no answer, from a model that never stops or a cache built elsewhere, may stall what
    reads it) and with any lone surrogate replaced, so that it can be stored and read."""
    if len(text) > max_chars:
        log.warning("%s: the LLM answer has %d characters; cut to llm.max_answer_chars=%d", what, len(text), max_chars)
        text = text[:max_chars]
    return clean_text(text)


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    gen_tokens: int
    seconds: float  # generation seconds (recorded when it came from the cache)
    cached: bool


def book(q, stage: str, g: Generation) -> None:
    """Book one answer on query state ``q`` under ``stage``: a generated answer as an LLM call with
    its tokens and seconds, an answer from the cache as a cache hit with its (recorded) tokens kept
    apart, so that costs count only the work this run did."""
    if g.cached:
        q.add_cost(stage, cache_hits=1, cached_prompt_tokens=g.prompt_tokens, cached_gen_tokens=g.gen_tokens)
    else:
        q.add_cost(stage, llm_calls=1, prompt_tokens=g.prompt_tokens, gen_tokens=g.gen_tokens, llm_seconds=g.seconds)


class LLMClient:
    """Generation through the cache.  ``get_model`` returns a :class:`lexrag.models.CausalLM`
    (from the model pool); ``model_name`` keys the cache (the model folder's name); ``model_id``,
    the attached model's fingerprint, keeps answers another model wrote from being used (None in
    a replay without a model: the named model's answers are used).  ``time_left`` returns the
    seconds the run's time budget has left (infinite or None: no limit), read before each
    generation batch."""

    def __init__(self, cfg, cache: LLMCache, get_model: Callable[[], Any] | None, model_name: str,
                 replay: bool | None = None, model_id: str | None = None,
                 time_left: Callable[[], float] | None = None):
        self.cfg = cfg
        self._replay = cfg.mode == "replay" if replay is None else replay
        self.cache = cache
        self.get_model = get_model
        self.model_name = model_name
        self.model_id = model_id
        self.time_left = time_left
        self.calls = 0
        self.generated = 0

    @property
    def max_answer_chars(self) -> int:
        return int(getattr(self.cfg, "max_answer_chars", 20_000))

    @property
    def replay(self) -> bool:
        return self._replay

    def settings(self, template: Template) -> dict:
        return {"max_new_tokens": min(template.max_new_tokens, self.cfg.max_new_tokens), "do_sample": False,
                "quantization": self.cfg.quantization}

    def generate(self, template: Template, values: Sequence[Mapping[str, object]],
                 labels: Sequence[str] | None = None) -> list[Generation]:
        """One generation per ``values`` entry, in order.  ``labels`` (query ids) name the
        calls in error messages."""
        labels = list(labels) if labels is not None else [str(i) for i in range(len(values))]
        settings = self.settings(template)
        msgs = [template.render(v) for v in values]
        keys = [cache_key(self.model_name, template.id, m, settings) for m in msgs]
        out: list[Generation | None] = [None] * len(msgs)
        todo: list[int] = []
        for i, (key, _) in enumerate(keys):
            hit = self.cache.get(key, self.model_id)
            if hit is not None:
                text = bounded(str(hit["output"]), self.max_answer_chars, f"{template.id} for query {labels[i]!r} (cached)")
                out[i] = Generation(text, hit["prompt_tokens"], hit["gen_tokens"], hit["seconds"], True)
            elif self.replay:
                raise ReplayMissError(
                    f"replay: the LLM cache ({self.cache.describe()}) has no answer of model {self.model_name!r} "
                    f"to template {template.id} for query {labels[i]!r} (key {key[:16]}); run once with "
                    f"llm.mode=live to fill the cache, or attach the cache that was built with this config"
                )
            else:
                todo.append(i)
        self.calls += len(msgs)
        if todo:
            self._generate(template, msgs, keys, labels, todo, settings, out)
        return out  # type: ignore[return-value]

    def yes_probabilities(self, template: Template, values: Sequence[Mapping[str, object]],
                          labels: Sequence[str] | None = None) -> list[Generation]:
        """P(Yes) of a ``yesno`` template per ``values`` entry, through the cache like
        :meth:`generate` (the probability is stored as text, so replay gives the same float);
        ``Generation.text`` holds it, ``float(g.text)`` reads it."""
        return self.generate(template, values, labels)

    def store(self, template: Template, values: Mapping[str, object], output: str, prompt_tokens: int = 0,
              gen_tokens: int = 0, seconds: float = 0.0) -> str:
        """Record an answer produced elsewhere (another inference engine, a corrected output)
        under the key this client would look up; returns the key."""
        settings = self.settings(template)
        key, input_hash = cache_key(self.model_name, template.id, template.render(values), settings)
        self.cache.put(key, self.model_name, template.id, input_hash, settings, output, prompt_tokens, gen_tokens, seconds,
                       self.model_id or "")
        return key

    def _left(self, template, labels, ids: list[int]) -> float:
        """The seconds the budget has left (infinite without one); :class:`BudgetSpent` naming
        the queries of ``ids`` when none are."""
        left = float(self.time_left()) if self.time_left is not None else math.inf
        if left <= 0:
            names = list(dict.fromkeys(labels[i] for i in ids))
            raise BudgetSpent(f"{template.id} for {_queries(names)} not started: the time budget is spent", names)
        return left

    def _generate(self, template, msgs, keys, labels, todo, settings, out) -> None:
        if self.get_model is None:
            raise ReplayMissError(f"no LLM model to generate {template.id} for query {labels[todo[0]]!r}")
        self._left(template, labels, todo)  # a spent budget loads no model
        lm = self.get_model()
        prompts = {i: lm.render_chat(msgs[i]) for i in todo}
        order = sorted(todo, key=lambda i: -len(prompts[i]))
        bs = self.cfg.batch_size
        timed = _takes_max_time(lm.generate)
        if not timed and self._left(template, labels, todo) != math.inf and type(lm) not in _UNTIMED_SAID:
            _UNTIMED_SAID.add(type(lm))  # said once a backend: a batch of it may run past the budget
            log.warning("LLM backend %s: its generate takes no max_time, so the time budget is checked before each "
                        "batch but cannot cut one", type(lm).__name__)
        for start in range(0, len(order), bs):
            chunk = order[start : start + bs]
            left = self._left(template, labels, chunk)
            t0 = time.perf_counter()
            if template.output == "yesno":
                res = [(repr(p), n, 0) for p, n in lm.yes_probability([prompts[i] for i in chunk])]
            else:
                limit = {"max_time": left} if timed and left != math.inf else {}
                try:
                    res = lm.generate([prompts[i] for i in chunk], settings["max_new_tokens"], **limit)
                except BudgetSpent as e:  # cut mid-answer: nothing of this batch is stored or returned
                    names = list(dict.fromkeys(labels[i] for i in chunk))
                    raise BudgetSpent(f"{template.id} for {_queries(names)} cut: {e}", names) from None
            dt = (time.perf_counter() - t0) / len(chunk)
            for i, (text, n_in, n_out) in zip(chunk, res):
                text = bounded(str(text), self.max_answer_chars, f"{template.id} for query {labels[i]!r}")
                key, input_hash = keys[i]
                self.cache.put(key, self.model_name, template.id, input_hash, settings, text, n_in, n_out, dt, self.model_id or "")
                out[i] = Generation(text, n_in, n_out, dt, False)
            self.generated += len(chunk)
        log.info("LLM %s: generated %d of %d (%s)", template.name, len(todo), len(msgs), self.model_name)


def _queries(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"query {shown}" if len(names) == 1 else f"queries {shown}"


_UNTIMED_SAID: set = set()  # the backends whose batches the budget cannot cut, said once a process


def _takes_max_time(fn: Callable) -> bool:
    """Whether a model's ``generate`` takes ``max_time`` (backends written before it did not)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "max_time" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
