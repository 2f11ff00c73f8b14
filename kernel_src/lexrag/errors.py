"""One base error class for the package.

Every error a user can cause (a bad file, config, artifact, model folder or LLM cache) derives
from :class:`LexragError`; the CLI catches it and prints one line.  Each class also derives from
the builtin it used to be, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = [
    "short",
    "disk_error",
    "one_line_errors",
    "LexragError",
    "ConfigError",
    "ArtifactError",
    "ArtifactMissing",
    "CsvInputError",
    "ModelLoadError",
    "PromptError",
    "LLMOutputError",
    "ReplayMissError",
    "StageError",
    "BudgetSpent",
    "ManifestError",
    "installed",
    "install_hint",
    "require",
]


class LexragError(Exception):
    """Base class: a problem the user can fix; the message says what and where."""


class ConfigError(LexragError, ValueError):
    """Bad configuration: unknown key, wrong type or invalid value."""


class ArtifactError(LexragError, RuntimeError):
    """A missing, incomplete or mismatched artifact."""


class ArtifactMissing(ArtifactError):
    """An artifact that is not there at all (never built or not attached), as against one that is
    there but damaged: a run may go on without its stages (``lexrag run`` without ``--strict``)."""


class CsvInputError(LexragError, RuntimeError):
    """An input CSV that cannot be read as required; the message names file and lines."""


class ModelLoadError(LexragError, RuntimeError):
    """A model folder that is missing or cannot be loaded."""


class PromptError(LexragError, KeyError):
    """A prompt template that is missing, malformed or rendered without a variable."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class LLMOutputError(LexragError, ValueError):
    """LLM output that is not the JSON a template asked for."""


class ReplayMissError(LexragError, LookupError):
    """Replay mode met an LLM call that the cache does not hold."""


class OutputError(LexragError, OSError):
    """An output path that cannot be written as a file (a link, a device, a FIFO)."""


class ManifestError(LexragError, RuntimeError):
    """The artifacts manifest or a dataset folder it describes (``build_datasets.py``)."""


class StageError(LexragError, RuntimeError):
    """A stage that breaks the protocol (unknown phase, duplicate name, bad output)."""


class BudgetSpent(Exception):
    """The time budget ran out inside an optional stage's call: an LLM generation refused before
    it began, or cut by its time limit (the cut answer is neither cached nor used).  Not a user
    error, so not a :class:`LexragError`: the walk catches it, undoes the stage's work on the
    queries of that call and drops the stage for the rest of the run.  ``query_ids`` names the
    queries whose answers were being generated."""

    def __init__(self, message: str, query_ids: "list[str] | tuple[str, ...]" = ()):
        super().__init__(message)
        self.query_ids = list(query_ids)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (looked up, not imported: torch-sized libraries stay unloaded)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        return False


def install_hint(extra: str) -> str:
    """How to install the pip extra ``extra``: the one wording of it, which :func:`require` ends its
    error with.  True of every extra: requirements.txt pins each extra's libraries, and what an
    extra adds to Kaggle's image (igraph and leidenalg, the pinned LightGBM, FAISS, bitsandbytes,
    accelerate) is a wheel in the lexrag-wheels dataset, which its install cell installs."""
    return (f"pip install 'lexrag[{extra}]' (or pip install -r requirements.txt, which pins it; on Kaggle: attach the "
            "lexrag-wheels dataset, whose install cell adds it)")


def require(what: str, extra: str, *modules: str, error: type[LexragError] = ModelLoadError) -> None:
    """Raise ``error`` naming the pip extra to install when a library ``what`` needs is missing:
    the one way the package says that an extra is missing (the ranker's LightGBM included).  The
    error's ``fix`` is the install hint, as a model not found carries the fix a run's status gives."""
    missing = [m for m in modules if not installed(m)]
    if missing:
        e = error(f"the {what} needs {', '.join(missing)}, which is not installed: {install_hint(extra)}")
        e.fix = install_hint(extra)  # the run status's fix: install it (attaching the part's dataset would not help)
        raise e


def short(value: "object", width: int = 80) -> str:
    """``repr(value)`` cut to about ``width`` characters without building the whole repr (a value
    of shared references, such as a YAML alias bomb, would expand to gigabytes)."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxdict, r.maxtuple, r.maxset = 3, 6, 6, 6, 6
    r.maxstring = r.maxother = r.maxlong = width
    text = r.repr(value)
    return text if len(text) <= width + 8 else text[:width] + "..."


def disk_error(e: OSError, where: str = "an output file") -> "str | None":
    """One line for a disk that refuses a write (full, over quota, read-only, not permitted), naming
    the file (or ``where`` when the system did not name it); None for other errors.  Writers write
    beside their output and rename at the end, so the files already there are kept."""
    import errno

    if e.errno == errno.ENAMETOOLONG:  # a path is no disk error, but it is the same kind of user fault
        name = str(e.filename or where)
        name = name if len(name) <= 160 else f"{name[:100]}...{name[-50:]} ({len(name)} characters)"
        return f"{name}: a name in this path is longer than the file system allows (255 bytes a name); use a shorter path"
    causes = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
              errno.EFBIG: "the file would pass the file-size limit (ulimit -f)",
              errno.EROFS: "the disk is read-only", errno.EACCES: "permission denied", errno.EPERM: "not permitted"}
    cause = causes.get(e.errno) or ("the disk is full" if "No space left on device" in str(e) else None)
    if cause is None:
        return None
    fix = ("give this user access to it (read, and write where it is an output) or use another path"
           if e.errno in (errno.EACCES, errno.EPERM) else "raise the limit (ulimit -f unlimited) or write elsewhere"
           if e.errno == errno.EFBIG else "free space or write elsewhere")
    return (f"{e.filename or where}: {cause} ({e.strerror or str(e).splitlines()[0][:200]}); {fix} (the files that were "
            "there are kept)")


@contextlib.contextmanager
def one_line_errors(where: str = "an output file") -> "Iterator[None]":
    """A notebook cell's guard: a user error (:class:`LexragError`) or a disk that refuses a write
    (``where`` names the output when the system names no file) ends the run with one ``error:``
    line and no traceback; any other exception passes unchanged.  Inside it lexrag's warnings
    (a question cut to ``query.max_chars``, a skipped header row) go through logging as one line
    each, as the CLI gives them, not as Python's ``UserWarning`` with a source line."""
    import logging
    import warnings

    shown = warnings.showwarning

    def to_log(message, category, filename, lineno, file=None, line=None):
        if category is UserWarning:  # ours name the file or row already
            logging.getLogger("lexrag").warning("%s", message)
        else:  # a library's (Deprecation, Runtime ...) keeps Python's form
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = to_log
        try:
            yield
        except LexragError as e:
            raise SystemExit(f"error: {e}") from None
        except OSError as e:
            line = disk_error(e, where)
            if line is None:
                raise
            raise SystemExit(f"error: {line}") from None
