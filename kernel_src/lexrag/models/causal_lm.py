"""The causal LM: loaded from a local folder in bitsandbytes 4-bit NF4 with double quantization and
fp16 compute (a T4 has no bf16), on one GPU or spread over all usable GPUs by ``device_map="auto"``
(Kaggle's 2xT4); its chat template probed once at load; batched greedy generation and Yes/No
scoring (:class:`CausalLM`)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from lexrag.errors import ModelLoadError, require
from lexrag.models.base import load_error, model_folder, resolve_device, usable_gpus

__all__ = ["CausalLM", "load_causal_lm", "TEMPLATE_PROBE_S"]

log = logging.getLogger(__name__)


class CausalLM:
    """A chat model and its tokenizer, ready for batched greedy generation."""

    def __init__(self, model: Any, tokenizer: Any, name: str, device: str, quantization: str):
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.device = device
        self.quantization = quantization

    def render_chat(self, messages: list[dict]) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelLoadError(f"{self.name}: the tokenizer has no chat template (use an instruction-tuned model "
                                 "folder)")
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as e:  # noqa: BLE001
            import jinja2

            if not isinstance(e, jinja2.TemplateError):
                raise
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise ModelLoadError(f"{self.name}: its chat template was refused ({type(e).__name__}: {first}); templates "
                                 "run in Jinja's sandbox: use the model's own chat template (tokenizer_config.json or "
                                 "chat_template.jinja)") from None

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def truncate(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return text if len(ids) <= max_tokens else self.tokenizer.decode(ids[:max_tokens])

    def generate(self, prompts: list[str], max_new_tokens: int,
                 max_time: float | None = None) -> list[tuple[str, int, int]]:
        """Greedy continuations of chat-rendered ``prompts`` in one left-padded batch:
        ``(text, prompt_tokens, generated_tokens)`` each, in input order.  ``max_time`` (seconds,
        the time budget left) is the batch's time limit (transformers' ``max_time``); a batch
        that limit stopped before every answer ended (no end token, fewer than
        ``max_new_tokens`` tokens) raises :class:`lexrag.errors.BudgetSpent`, so no cut answer
        is returned, cached or used."""
        import torch

        from lexrag.errors import BudgetSpent

        tok = self.tokenizer
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        first = next(self.model.parameters()).device
        enc = {k: v.to(first) for k, v in enc.items()}
        limit = {} if max_time is None else {"max_time": max(float(max_time), 0.0)}
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **limit)
        width = enc["input_ids"].shape[1]
        if limit and out.shape[1] - width < max_new_tokens:
            # the batch stopped short of the token cap: every answer must have ended on its end
            # token, else the time limit stopped it mid-answer
            ends = tok.eos_token_id if isinstance(tok.eos_token_id, (list, tuple)) else [tok.eos_token_id]
            ends = [e for e in ends if e is not None]
            new = out[:, width:]
            ended = torch.zeros(len(prompts), dtype=torch.bool, device=new.device)
            for e in ends:
                ended |= (new == e).any(dim=1)
            if not bool(ended.all()):
                raise BudgetSpent(f"{self.name}: generation cut by its time limit of {max_time:.1f}s after "
                                  f"{out.shape[1] - width} of {max_new_tokens} tokens")
        res = []
        for i in range(len(prompts)):
            new = out[i, width:]
            n_new = int((new != tok.pad_token_id).sum()) if tok.pad_token_id is not None else int(new.numel())
            res.append((tok.decode(new, skip_special_tokens=True), int(enc["attention_mask"][i].sum()), n_new))
        return res

    def yes_probability(self, prompts: list[str]) -> list[tuple[float, int]]:
        """P(Yes) for chat-rendered Yes/No ``prompts`` from the next-token logits, restricted to
        the first token of "Yes" and of "No": ``(p, prompt_tokens)`` each, in input order.  One
        left-padded forward pass; the attention mask keeps the padding out, so a prompt's
        probability does not depend on the batch it is in (up to float rounding)."""
        import torch

        tok = self.tokenizer
        yes, no = self._yes_no_ids()
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        first = next(self.model.parameters()).device
        enc = {k: v.to(first) for k, v in enc.items()}
        mask = enc["attention_mask"]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding must not shift the positions
        with torch.inference_mode():
            out = self.model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=positions)
            logits = out.logits[:, -1, :].float()
        pair = torch.stack([logits[:, yes], logits[:, no]], dim=1)
        p = torch.softmax(pair, dim=1)[:, 0].cpu().tolist()
        return [(float(x), int(enc["attention_mask"][i].sum())) for i, x in enumerate(p)]

    def _yes_no_ids(self) -> tuple[int, int]:
        ids = []
        for word in ("Yes", "No"):
            toks = self.tokenizer(word, add_special_tokens=False)["input_ids"]
            if not toks:
                raise ModelLoadError(f"{self.name}: the tokenizer has no token for {word!r}")
            ids.append(int(toks[0]))
        if ids[0] == ids[1]:
            raise ModelLoadError(f"{self.name}: 'Yes' and 'No' start with the same token; the verifier cannot tell "
                                 "them apart")
        return ids[0], ids[1]


def load_causal_lm(model_path: str | Path, quantization: str = "nf4", device: str = "auto",
                   compute_dtype: str = "float16") -> CausalLM:
    """A causal LM and tokenizer from a local folder: 4-bit NF4 (double quantization, ``compute_dtype``
    compute) when ``quantization="nf4"``.  ``device="cuda:N"`` puts the whole model on GPU N (a 4-bit
    7B model fits one T4, leaving the other GPU to the encoder, the reranker and the index);
    ``cuda`` or ``auto`` spread it over all usable GPUs."""
    path = model_folder(model_path, "LLM", "llm.model")
    require("LLM (llm.model)", "llm", "torch", "transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    dtype = getattr(torch, compute_dtype)
    kw: dict[str, Any] = {"local_files_only": True}
    if quantization == "nf4":
        try:
            import bitsandbytes  # noqa: F401
        except ImportError as e:
            raise ModelLoadError("llm.quantization nf4 needs bitsandbytes (in the lexrag wheels: pip install "
                                 "lexrag[llm])") from e
        from transformers import BitsAndBytesConfig

        kw["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                       bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        kw["dtype"] = dtype
    else:
        kw["dtype"] = torch.float16 if device.startswith("cuda") else torch.float32
    if device.startswith("cuda:"):
        kw["device_map"] = {"": int(device[5:])}
    elif device.startswith("cuda"):
        gpus = usable_gpus()
        kw["device_map"] = "auto" if len(gpus) > 1 else {"": gpus[0] if gpus else 0}
    else:
        kw["device_map"] = {"": "cpu"}
    t0 = time.perf_counter()
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, **kw)
    except Exception as e:  # noqa: BLE001  (whatever the libraries raise for a folder they cannot read)
        raise load_error(path, "LLM", e) from None
    model.eval()
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    log.info("loaded LLM %s (%s, %s) in %.1fs", path.name, quantization, device, time.perf_counter() - t0)
    lm = CausalLM(model, tok, path.name, device, quantization)
    if getattr(tok, "chat_template", None):
        _probe_template(lm)
    return lm


TEMPLATE_PROBE_S = 10.0  # a chat template must render a one-line message within this (Jinja's sandbox bounds no loop)


def _probe_template(lm: "CausalLM") -> None:
    """Render a one-line message once at load, bounded by :data:`TEMPLATE_PROBE_S` (an alarm in the
    main thread; elsewhere unbounded), so a template that loops without end (nested ``range``
    loops) is refused in one line instead of stopping every LLM stage for ever."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        lm.render_chat([{"role": "user", "content": "probe"}])
        return

    class _Slow(Exception):
        pass

    def alarm(signum, frame):
        raise _Slow()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, TEMPLATE_PROBE_S)
    try:
        lm.render_chat([{"role": "user", "content": "probe"}])
    except _Slow:
        raise ModelLoadError(f"{lm.name}: its chat template did not render a one-line message within "
                             f"{TEMPLATE_PROBE_S:.0f} s (a loop without end?); use the model's own chat "
                             "template") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
