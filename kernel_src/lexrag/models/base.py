"""What every model loader shares: the device a model runs on (``auto``: the first CUDA GPU of
compute capability 7.0 or newer, since Kaggle's cu128 torch has no kernels for a P100's sm_60; the
CPU otherwise), giving memory back, the check that a folder is a model folder, the one-line error
for weights the libraries refuse, and a model's identity by its weights."""

from __future__ import annotations

import gc
import hashlib
import logging
from pathlib import Path

from lexrag.errors import ModelLoadError

__all__ = ["MIN_CUDA_CAPABILITY", "usable_gpus", "resolve_device", "release_memory", "model_folder", "load_error",
           "model_id", "same_model"]

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


def release_memory() -> None:
    """Collect garbage and return cached CUDA memory to the driver."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def model_folder(path: str | Path, what: str, setting: str) -> Path:
    """``path`` as a model folder (one holding ``config.json`` or ``modules.json``), or a
    :class:`ModelLoadError` naming ``setting``, the config field that gives it."""
    p = Path(path)
    if not p.is_dir():
        raise ModelLoadError(f"{what} model folder not found: {p} (attach the model dataset or set {setting})")
    if not (p / "config.json").is_file() and not (p / "modules.json").is_file():
        raise ModelLoadError(f"{p} is not a model folder (no config.json or modules.json); set {setting} to the folder "
                             "that holds them")
    return p


def load_error(path: Path, what: str, e: BaseException) -> ModelLoadError:
    """One line for a model folder the libraries refuse to load: pickled weights that torch's safe
    loader (``weights_only``) rejects are named as such, anything else with its first line."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    if "weights_only" in str(e) or "Weights only load failed" in str(e) or type(e).__name__ == "UnpicklingError":
        return ModelLoadError(f"{path}: the {what} weights are a pickle that torch's safe loader refuses "
                              "(weights_only; pickles can run code): use the model's safetensors files "
                              "(model.safetensors)")
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
