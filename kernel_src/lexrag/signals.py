"""The one registry of signal names.

A signal is one ranking fed to fusion: ``citation_seeds``, ``bm25_de``, ``dense_hyde``, ``ppr``...
Its name picks its fusion weight, so a weight or switch that names no signal would silently do
nothing; config validation checks every name against this registry instead (and suggests the
closest known name).  Lexical and semantic stages emit one signal per query variant
(``bm25_<variant>``, ``dense_<variant>``).  A stage added later registers its signal names here
with :func:`register_signal`.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from lexrag.errors import ConfigError

__all__ = [
    "VARIANTS",
    "GRAPH_SIGNALS",
    "PRIOR_SIGNALS",
    "register_signal",
    "known_signals",
    "family_of",
    "check_signal_names",
    "check_variant_names",
    "check_task_names",
    "TASK_VARIANTS",
]

# Query variants: the question as written, then what the LLM rewrite makes of it.
VARIANTS = (
    "query",  # the question as written (English on Kaggle, German in the exam data)
    "de",  # German translation of the question
    "hyde",  # hypothetical German legal analysis, no citations (HyDE)
    "sparse",  # German keywords and statute headings
    "dense",  # one-paragraph statement of the legal issue
    "concepts",  # German search keywords from concept extraction
    "dict_de",  # German words for an English question's, from a bilingual dictionary (no LLM)
)

GRAPH_SIGNALS = ("ppr", "hits_authority", "hits_hub", "coupling", "cocitation", "community", "siblings")
PRIOR_SIGNALS = ("prior_cocited", "prior_frequent", "prior_similar")

_REGISTRY: dict[str, str] = {"citation_seeds": "seed", "llm_seeds": "seed"}
_REGISTRY.update({f"bm25_{v}": "lexical" for v in VARIANTS})
_REGISTRY.update({f"dense_{v}": "semantic" for v in VARIANTS})
_REGISTRY.update({s: "graph" for s in GRAPH_SIGNALS})
_REGISTRY.update({s: "prior" for s in PRIOR_SIGNALS})  # training gold, not the citation graph: its own family
# The statute stage's signals register when it is imported, like any later stage's; they are
# named here too because the default fusion weights name one (bm25_statute_agreed), and the config
# is validated before any stage is imported (config is below stages in the layers).
_REGISTRY.update({"bm25_statute": "lexical", "bm25_statute_agreed": "lexical"})


def register_signal(name: str, family: str) -> None:
    """Make ``name`` a known signal of ``family`` (idempotent; a clash of families is an error)."""
    have = _REGISTRY.get(name)
    if have is not None and have != family:
        raise ConfigError(f"signal {name!r} is already registered with family {have!r}, not {family!r}")
    _REGISTRY[name] = family


def known_signals() -> dict[str, str]:
    """Every signal name with its family."""
    return dict(_REGISTRY)


def family_of(name: str) -> str:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(_unknown(name, _REGISTRY, "signal")) from None


def _unknown(name: str, known: Iterable[str], what: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(sorted(known))}"
    return f"unknown {what} {name!r}{hint}"


def check_signal_names(names: Iterable[str], where: str) -> None:
    """Raise :class:`ConfigError` naming ``where`` for the first name that is not a signal."""
    for n in names:
        if n not in _REGISTRY:
            raise ConfigError(f"{where}: {_unknown(n, _REGISTRY, 'signal')}")


def check_variant_names(names: Iterable[str], where: str) -> None:
    for n in names:
        if n not in VARIANTS:
            raise ConfigError(f"{where}: {_unknown(n, VARIANTS, 'query variant')}")


# LLM rewrite tasks and the variant each one writes (``concepts`` also yields the provisions the
# LLM names, which become at most the ``llm_seeds`` signal, and an estimated citation count).
TASK_VARIANTS = {"translate": "de", "concepts": "concepts", "hyde": "hyde", "sparse": "sparse", "dense": "dense"}


def check_task_names(names: Iterable[str], where: str) -> None:
    for n in names:
        if n not in TASK_VARIANTS:
            raise ConfigError(f"{where}: {_unknown(n, TASK_VARIANTS, 'LLM task')}")
