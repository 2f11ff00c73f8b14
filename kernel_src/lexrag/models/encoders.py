"""The sentence encoder and the cross-encoder, from local folders (``local_files_only``: the hub is
never asked), half precision on GPU; a folder whose config.json names another kind of model is
refused before it loads as one with a random head."""

from __future__ import annotations

import warnings
from pathlib import Path

from lexrag.errors import ModelLoadError, require
from lexrag.models.base import load_error, model_folder, resolve_device

__all__ = ["load_encoder", "load_cross_encoder"]


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


# architectures that write text or score pairs: their hidden states are no embeddings
NOT_ENCODERS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForSequenceClassification")


def _config_json(path: Path) -> dict:
    from lexrag.io.inputfiles import read_json_file

    # bounded: its size and depth, a FIFO refused
    doc = read_json_file(path / "config.json", ModelLoadError, what="model config")
    return doc if isinstance(doc, dict) else {}


def _architectures(path: Path) -> list[str]:
    """The architectures a model folder's config.json names (none: no config.json, or none listed)."""
    arch = _config_json(path).get("architectures") if (path / "config.json").is_file() else None
    return [str(a) for a in arch] if isinstance(arch, list) else []


def load_encoder(model_path: str | Path, device: str = "auto", fp16: bool = True, max_seq: int = 256):
    """A SentenceTransformer from a local folder, fp16 on GPU; ``max_seq`` clipped to the model's
    positions (with a warning)."""
    path = model_folder(model_path, "encoder", "semantic.model")
    arch = _architectures(path)
    if arch and all(a.endswith(NOT_ENCODERS) for a in arch):  # mean-pooled, its hidden states would pass for embeddings
        raise ModelLoadError(f"semantic.model {path}: its config.json says {', '.join(arch)}, a model that writes text "
                             "or scores pairs, not an encoder; set semantic.model to an embedding model such as BGE-M3")
    require("encoder (semantic.model)", "semantic", "torch", "sentence_transformers")
    from sentence_transformers import SentenceTransformer

    device = resolve_device(device)
    try:
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except Exception as e:  # noqa: BLE001  (whatever the libraries raise for a folder they cannot read)
        raise load_error(path, "encoder", e) from None
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    model_config = config.to_dict() if config is not None else {}
    model.max_seq_length = _clip_to_positions(path.name, "max_seq", max_seq, model_config)
    if fp16 and device.startswith("cuda"):
        model.half()
    return model


def load_cross_encoder(model_path: str | Path, device: str = "auto", max_length: int = 512, fp16: bool = True):
    """A sentence-transformers CrossEncoder from a local folder, fp16 on GPU; ``max_length`` clipped
    to the model's positions (with a warning), read from the folder's config.json."""
    path = model_folder(model_path, "reranker", "rerank.model")
    require("reranker (rerank.model)", "semantic", "torch", "sentence_transformers")
    from sentence_transformers import CrossEncoder

    device = resolve_device(device)
    arch = _architectures(path)
    if arch and not any(a.endswith("ForSequenceClassification") for a in arch):
        # a causal LM or a bare encoder would load with a random score head, and score noise
        raise ModelLoadError(f"rerank.model {path}: its config.json says {', '.join(arch)}, not a cross-encoder "
                             "(...ForSequenceClassification); set rerank.model to a reranker such as "
                             "bge-reranker-v2-m3")
    if (path / "config.json").is_file():
        max_length = _clip_to_positions(path.name, "rerank.max_length", max_length, _config_json(path))
    try:
        model = CrossEncoder(str(path), device=device, max_length=max_length, local_files_only=True)
    except Exception as e:  # noqa: BLE001  (whatever the libraries raise for a folder they cannot read)
        raise load_error(path, "reranker", e) from None
    if fp16 and device.startswith("cuda"):
        model.model.half()
    return model
