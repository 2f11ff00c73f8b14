"""lexrag: cross-lingual Swiss legal citation retrieval (``lexrag.Searcher`` for search from Python).

The version below is the only place the package version is written; pyproject.toml reads it.
"""

__version__ = "0.1.0"

import sys as _sys

# modules the re-layout moved, old name -> new name under lexrag: importing an old name is one line saying where
# it went (no alias: each thing has one import path)
_MOVED_MODULES = {
    "cliargs": "io.cliargs", "gpu_check": "cli.gpu_check", "config_sections": "config.sections",
    "yamlio": "config.yamlio", "notebook_params": "config.notebook", "modelpaths": "models.paths",
    "procmem": "io.procmem", "csvio": "io.csvio",
    "inputfiles": "io.inputfiles", "outputs": "io.outputs", "publish": "io.publish", "wheels": "io.wheels",
    "citation_index": "citations.index", "synthetic": "testing.synthetic",
}


class _MovedModuleFinder:
    """The last finder on ``sys.meta_path``: asked only for a name no other finder found, it refuses
    ``lexrag.<old>`` of ``_MOVED_MODULES`` with the module's new name (``python -m`` says it too)."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        old = name[len("lexrag."):] if name.startswith("lexrag.") else None
        if old in _MOVED_MODULES:
            new = f"lexrag.{_MOVED_MODULES[old]}"
            # no name= on the error: `from lexrag import csvio` would turn it back into "cannot import name"
            raise ModuleNotFoundError(f"No module named {name!r}: it moved to {new}; use {new}")
        return None


if not any(type(f).__name__ == "_MovedModuleFinder" for f in _sys.meta_path):  # once, even if lexrag is reloaded
    _sys.meta_path.append(_MovedModuleFinder())


def __getattr__(name: str):
    """``lexrag.Searcher`` (and its ``Hit``) on first use, so ``import lexrag`` stays light."""
    if name in ("Searcher", "Hit"):
        from lexrag.pipeline import searcher

        return getattr(searcher, name)
    raise AttributeError(f"module 'lexrag' has no attribute {name!r}")
