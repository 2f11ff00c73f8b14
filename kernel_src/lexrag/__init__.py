"""lexrag: cross-lingual Swiss legal citation retrieval.

The version below is the only place the package version is written; pyproject.toml reads it.
"""

__version__ = "0.1.0"
