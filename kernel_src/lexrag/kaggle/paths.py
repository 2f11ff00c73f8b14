"""The one place that knows where inputs, artifacts and outputs live, locally and on Kaggle.

On Kaggle (``KAGGLE_KERNEL_RUN_TYPE`` is set) attached datasets and competition files are
under the input root and outputs go to the working folder.  Locally the folders come from the
config (``paths.*``), else ``./data``, ``./artifacts`` and the current folder.  No other module
names a Kaggle path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lexrag.config import PathsConfig

KAGGLE_INPUT = Path("/kaggle/input")
KAGGLE_WORKING = Path("/kaggle/working")

__all__ = ["on_kaggle", "Paths", "resolve_paths"]


def on_kaggle() -> bool:
    return bool(os.environ.get("KAGGLE_KERNEL_RUN_TYPE"))


@dataclass(frozen=True)
class Paths:
    input_dir: Path
    artifacts_dir: Path
    working_dir: Path
    kaggle: bool

    def input_file(self, name: str) -> Path:
        """A competition file (``test.csv``): the input folder, else any attached folder holding it."""
        direct = self.input_dir / name
        if direct.is_file() or not self.kaggle:
            return direct
        hits = sorted(self.input_dir.parent.glob(f"*/{name}")) + sorted(
            self.input_dir.parent.glob(f"*/*/{name}")
        )
        if not hits:
            raise FileNotFoundError(f"{name} not found under {self.input_dir.parent}")
        return hits[0]

    def artifact(self, name: str) -> Path:
        """Folder of artifact ``name``: ``<artifacts_dir>/<name>``; on Kaggle also any attached
        dataset folder whose ``params.json`` says it is that artifact."""
        direct = self.artifacts_dir / name
        if (direct / "params.json").is_file() or not self.kaggle:
            return direct
        import json

        for params in sorted(self.artifacts_dir.glob("*/params.json")) + sorted(
            self.artifacts_dir.glob("*/*/params.json")
        ):
            try:
                if json.loads(params.read_text(encoding="utf-8")).get("artifact") == name:
                    return params.parent
            except (OSError, ValueError):
                continue
        return direct


    def find_artifacts(self, name: str) -> list[Path]:
        """Every folder under the artifacts folder (two levels down) whose ``params.json`` says
        it is artifact ``name`` (for artifacts that may come in several parts, e.g. LLM caches)."""
        import json

        out = []
        root = self.artifacts_dir
        for params in [root / name / "params.json", *sorted(root.glob("*/params.json")), *sorted(root.glob("*/*/params.json"))]:
            try:
                if json.loads(params.read_text(encoding="utf-8")).get("artifact") == name and params.parent not in out:
                    out.append(params.parent)
            except (OSError, ValueError, AttributeError):
                continue
        return out

    def model(self, name: str) -> Path:
        """A model folder: ``name`` as a path if it exists; else, on Kaggle, a folder of that name
        inside an attached dataset (``<input root>/*/name`` or ``<input root>/name``)."""
        direct = Path(name)
        if direct.is_dir() or not self.kaggle:
            return direct
        root = self.artifacts_dir
        for cand in [root / name, *sorted(root.glob(f"*/{name}")), *sorted(root.glob(f"*/*/{name}"))]:
            if cand.is_dir():
                return cand
        return direct


def resolve_paths(cfg: PathsConfig | None = None) -> Paths:
    cfg = cfg or PathsConfig()
    kaggle = on_kaggle()
    if kaggle:
        root = KAGGLE_INPUT
        input_dir = Path(cfg.input_dir) if cfg.input_dir else root / (cfg.competition or "")
        artifacts = Path(cfg.artifacts_dir) if cfg.artifacts_dir else root
        working = Path(cfg.working_dir) if cfg.working_dir else KAGGLE_WORKING
    else:
        input_dir = Path(cfg.input_dir or "data")
        artifacts = Path(cfg.artifacts_dir or "artifacts")
        working = Path(cfg.working_dir or ".")
    return Paths(input_dir=input_dir, artifacts_dir=artifacts, working_dir=working, kaggle=kaggle)
