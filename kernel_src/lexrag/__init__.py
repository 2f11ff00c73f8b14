"""lexrag: cross-lingual Swiss legal citation retrieval (``lexrag.Searcher`` for search from Python).

The version below is the only place the package version is written; pyproject.toml reads it.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``lexrag.Searcher`` (and its ``Hit``) on first use, so ``import lexrag`` stays light."""
    if name in ("Searcher", "Hit"):
        from lexrag.pipeline import searcher

        return getattr(searcher, name)
    raise AttributeError(f"module 'lexrag' has no attribute {name!r}")
