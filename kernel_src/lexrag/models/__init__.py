"""The one loader for every model: sentence encoder, cross-encoder, causal LM.

Models come from local folders only (``local_files_only``; the hub is never asked), located by
the caller through the path resolver.  ``device="auto"`` takes the first CUDA GPU of compute
capability 7.0 or newer (Kaggle's cu128 torch has no kernels for a P100's sm_60) and the CPU
otherwise; half precision on GPU.  The causal LM loads in bitsandbytes 4-bit NF4 with double
quantization and fp16 compute (a T4 has no bf16), spread over all usable GPUs by
``device_map="auto"`` (Kaggle's 2xT4).

:class:`ModelPool` holds at most ``resident`` models at once: asking for another releases the
least recently used one first (references dropped, garbage collected, CUDA cache emptied), so the
encoder, the reranker and a 7B LLM take turns on one 16 GB T4.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import time
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from lexrag.errors import ModelLoadError, require

__all__ = ["resolve_device", "usable_gpus", "model_id", "load_encoder", "load_cross_encoder", "load_causal_lm", "CausalLM",
           "ModelPool", "release_memory"]

log = logging.getLogger(__name__)

MIN_CUDA_CAPABILITY = (7, 0)


def usable_gpus() -> list[int]:
    """CUDA devices this torch can run on (compute capability >= 7.0)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [i for i in range(torch.cuda.device_count()) if torch.cuda.get_device_capability(i) >= MIN_CUDA_CAPABILITY]


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> the first usable GPU, else ``cpu``.  ``cuda:N`` naming a GPU this machine does
    not have (a preset written for two GPUs on a machine with one) -> the first usable GPU, or
    ``cpu`` when there is none, with a warning; anything else unchanged."""
    if device == "auto":
        gpus = usable_gpus()
        return f"cuda:{gpus[0]}" if gpus else "cpu"
    if device.startswith("cuda:") and device[5:].isdigit():
        gpus = usable_gpus()
        if int(device[5:]) not in gpus:
            fallback = f"cuda:{gpus[0]}" if gpus else "cpu"
            log.warning("device %s is not a usable GPU here (usable: %s); using %s", device, gpus or "none", fallback)
            return fallback
    return device


def _folder(path: str | Path, what: str, setting: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise ModelLoadError(f"{what} model folder not found: {p} (attach the model dataset or set {setting})")
    if not (p / "config.json").is_file() and not (p / "modules.json").is_file():
        raise ModelLoadError(f"{p} is not a model folder (no config.json or modules.json); set {setting} to the folder that holds them")
    return p


def _load_error(path: Path, what: str, e: BaseException) -> ModelLoadError:
    """One line for a model folder the libraries refuse to load: pickled weights that torch's safe
    loader (``weights_only``) rejects are named as such, anything else with its first line."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    if "weights_only" in str(e) or "Weights only load failed" in str(e) or type(e).__name__ == "UnpicklingError":
        return ModelLoadError(f"{path}: the {what} weights are a pickle that torch's safe loader refuses (weights_only; "
                              "pickles can run code): use the model's safetensors files (model.safetensors)")
    return ModelLoadError(f"{path}: cannot load the {what} ({type(e).__name__}: {first})")


def model_id(model_path: str | Path) -> str:
    """Folder name plus a hash of its JSON config files and of its weights as
    :func:`lexrag.models.paths.weights_digest` knows them (their headers and sampled chunks, not
    every byte): other weights behind the same JSON files are another model."""
    from lexrag.models.paths import weights_digest

    path = Path(model_path)
    h = hashlib.sha256()
    for name in sorted(p.name for p in path.glob("*.json")):
        h.update(name.encode())
        h.update((path / name).read_bytes())
    return f"{path.name}-{weights_digest(path, h).hexdigest()[:12]}"


def same_model(a: str, b: str) -> bool:
    """Two :func:`model_id` values name the same weights: their config hashes agree, whatever the
    folders are called (a Kaggle Model mounts its files in a version folder such as ``1/``)."""
    return a.rsplit("-", 1)[-1] == b.rsplit("-", 1)[-1]


def _clip_to_positions(name: str, setting: str, wanted: int, config: dict) -> int:
    """``wanted`` tokens, or fewer where the model (its config as a dict) has fewer positions,
    with a warning: a longer input would fail inside the model (BERT-like models have 512, tiny
    test models 128).  RoBERTa and XLM-R models keep two positions for their padding offset."""
    limit, kind = config.get("max_position_embeddings"), config.get("model_type")
    if not isinstance(limit, int) or limit <= 0:
        return wanted
    if kind in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2
    if wanted > limit:
        warnings.warn(f"{name}: {setting} {wanted} exceeds the model's {limit} positions; using {limit}")
        return limit
    return wanted


NOT_ENCODERS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForSequenceClassification")  # text or pair scores


def _config_json(path: Path) -> dict:
    from lexrag.io.inputfiles import read_json_file

    doc = read_json_file(path / "config.json", ModelLoadError, what="model config")  # bounded: size, depth, a FIFO refused
    return doc if isinstance(doc, dict) else {}


def _architectures(path: Path) -> list[str]:
    """The architectures a model folder's config.json names (none: no config.json, or none listed)."""
    arch = _config_json(path).get("architectures") if (path / "config.json").is_file() else None
    return [str(a) for a in arch] if isinstance(arch, list) else []


def load_encoder(model_path: str | Path, device: str = "auto", fp16: bool = True, max_seq: int = 256):
    """A SentenceTransformer from a local folder, fp16 on GPU; ``max_seq`` clipped to the model's
    positions (with a warning)."""
    path = _folder(model_path, "encoder", "semantic.model")
    arch = _architectures(path)
    if arch and all(a.endswith(NOT_ENCODERS) for a in arch):  # its hidden states, mean-pooled, would pass for embeddings
        raise ModelLoadError(f"semantic.model {path}: its config.json says {', '.join(arch)}, a model that writes text or "
                             "scores pairs, not an encoder; set semantic.model to an embedding model such as BGE-M3")
    require("encoder (semantic.model)", "semantic", "torch", "sentence_transformers")
    from sentence_transformers import SentenceTransformer

    device = resolve_device(device)
    try:
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except Exception as e:  # noqa: BLE001  (whatever the libraries raise for a folder they cannot read)
        raise _load_error(path, "encoder", e) from None
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    model.max_seq_length = _clip_to_positions(path.name, "max_seq", max_seq, config.to_dict() if config is not None else {})
    if fp16 and device.startswith("cuda"):
        model.half()
    return model


def load_cross_encoder(model_path: str | Path, device: str = "auto", max_length: int = 512, fp16: bool = True):
    """A sentence-transformers CrossEncoder from a local folder, fp16 on GPU; ``max_length`` clipped
    to the model's positions (with a warning), read from the folder's config.json."""
    path = _folder(model_path, "reranker", "rerank.model")
    require("reranker (rerank.model)", "semantic", "torch", "sentence_transformers")
    from sentence_transformers import CrossEncoder

    device = resolve_device(device)
    arch = _architectures(path)
    if arch and not any(a.endswith("ForSequenceClassification") for a in arch):
        # a causal LM or a bare encoder would load with a random score head, and score noise
        raise ModelLoadError(f"rerank.model {path}: its config.json says {', '.join(arch)}, not a cross-encoder "
                             "(...ForSequenceClassification); set rerank.model to a reranker such as bge-reranker-v2-m3")
    if (path / "config.json").is_file():
        max_length = _clip_to_positions(path.name, "rerank.max_length", max_length, _config_json(path))
    try:
        model = CrossEncoder(str(path), device=device, max_length=max_length, local_files_only=True)
    except Exception as e:  # noqa: BLE001  (whatever the libraries raise for a folder they cannot read)
        raise _load_error(path, "reranker", e) from None
    if fp16 and device.startswith("cuda"):
        model.model.half()
    return model


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
            raise ModelLoadError(f"{self.name}: the tokenizer has no chat template (use an instruction-tuned model folder)")
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception as e:  # noqa: BLE001
            import jinja2

            if not isinstance(e, jinja2.TemplateError):
                raise
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise ModelLoadError(f"{self.name}: its chat template was refused ({type(e).__name__}: {first}); templates run "
                                 "in Jinja's sandbox: use the model's own chat template (tokenizer_config.json or "
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
            logits = self.model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=positions).logits[:, -1, :].float()
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
            raise ModelLoadError(f"{self.name}: 'Yes' and 'No' start with the same token; the verifier cannot tell them apart")
        return ids[0], ids[1]


def load_causal_lm(model_path: str | Path, quantization: str = "nf4", device: str = "auto",
                   compute_dtype: str = "float16") -> CausalLM:
    """A causal LM and tokenizer from a local folder: 4-bit NF4 (double quantization, ``compute_dtype``
    compute) when ``quantization="nf4"``.  ``device="cuda:N"`` puts the whole model on GPU N (a 4-bit
    7B model fits one T4, leaving the other GPU to the encoder, the reranker and the index);
    ``cuda`` or ``auto`` spread it over all usable GPUs."""
    path = _folder(model_path, "LLM", "llm.model")
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
            raise ModelLoadError("llm.quantization nf4 needs bitsandbytes (in the lexrag wheels: pip install lexrag[llm])") from e
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
        raise _load_error(path, "LLM", e) from None
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
        raise ModelLoadError(f"{lm.name}: its chat template did not render a one-line message within {TEMPLATE_PROBE_S:.0f} s "
                             "(a loop without end?); use the model's own chat template") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def release_memory() -> None:
    """Collect garbage and return cached CUDA memory to the driver."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


class ModelPool:
    """Loaded models by key, at most ``resident`` at once (least recently used released first).

    ``get(key, loader)`` returns the loaded model or loads it with ``loader()``; the pool holds
    the only long-lived reference, so a released model is freed.  ``loads`` counts loads per key
    (a model released and needed again loads again)."""

    def __init__(self, resident: int = 1):
        self.resident = max(1, resident)
        self._models: OrderedDict[str, Any] = OrderedDict()
        self.loads: dict[str, int] = {}
        self.load_seconds: dict[str, float] = {}
        self.failed: dict[str, Exception] = {}  # a model that failed to load is not tried again

    def get(self, key: str, loader: Callable[[], Any]) -> Any:
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key]
        if key in self.failed:
            raise self.failed[key]
        while len(self._models) >= self.resident:
            self.release(next(iter(self._models)))
        t0 = time.perf_counter()
        try:
            model = loader()
        except Exception as e:
            self.failed[key] = e
            release_memory()
            raise
        self.load_seconds[key] = self.load_seconds.get(key, 0.0) + time.perf_counter() - t0
        self.loads[key] = self.loads.get(key, 0) + 1
        self._models[key] = model
        return model

    def loaded(self) -> list[str]:
        return list(self._models)

    def release(self, key: str | None = None) -> None:
        """Release ``key`` (or every model) and free its memory."""
        keys = [key] if key is not None else list(self._models)
        for k in keys:
            if self._models.pop(k, None) is not None:
                log.info("released model %s", k)
        release_memory()
