"""Which of several attached copies of the artifacts a run loads, chosen as one set.

On Kaggle an artifact may be attached more than once (an older corpus in another dataset, the same
dataset twice, a copy edited after its build).  The set is built over one corpus: the corpus that
the most of the other artifacts were built over wins, then the fuller corpus (more documents), then
the newest lexrag version; each other artifact is the newest copy built over that corpus.  Whole
copies that tie on all of that are told apart by content (:func:`_settle`).  The resolver
(:meth:`lexrag.paths.Paths.artifact_set`) finds the copies and reads their ``params.json``; this
module only chooses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from lexrag.artifacts import DIGEST, corpus_id, digest_stale, read_params
from lexrag.errors import ArtifactError
from lexrag.io.publish import PARAMS_ONLY
from lexrag.models.paths import sampled_digest

__all__ = ["choose_set"]


def choose_set(names: list[str], found: dict[str, list[Path]], meta: dict[Path, dict], notes: list[str],
               warn: Callable[..., None]) -> dict[str, Path]:
    """The folder of each artifact of ``names`` (``corpus`` among them) that ``found`` holds copies
    of (in path order, the ``<artifacts_dir>/<name>`` copy first), ``meta`` being each copy's
    params.json.  Whole copies that tie on every ranking criterion are told apart by content: the
    same build, the first whose files match its params.json; different builds, an
    :class:`ArtifactError` naming both.  Every copy left out is said through ``warn`` (a log line
    with its reason) and each choice among copies is added to ``notes`` (for the run status)."""
    cids: dict[Path, str] = {}
    for d in found.get("corpus", []):
        try:
            cids[d] = corpus_id(d)
        except Exception as e:  # noqa: BLE001 - a damaged copy is one that loses, with its reason
            warn("corpus copy %s is unreadable (%s); left out", d, e)
    dependents = [n for n in names if n != "corpus"]

    def agree(c: Path) -> int:
        return sum(any(meta[d].get("corpus_id") == cids[c] for d in found[n]) for n in dependents)

    def size(c: Path) -> int:
        n = meta[c].get("n_docs")
        return n if isinstance(n, int) else 0

    def rank(c: Path) -> tuple:
        return not _complete(c, meta[c]), -agree(c), -size(c), _newest(meta[c])

    corpora = sorted(cids, key=lambda c: (rank(c), found["corpus"].index(c)))
    chosen: dict[str, Path] = {}
    if corpora:
        # copies that tie on everything above are told apart by their content, never by path order
        top, tied = _settle("corpus", [c for c in corpora if rank(c) == rank(corpora[0])], meta)
        chosen["corpus"] = top
        for c in corpora:
            if c in tied:
                warn("artifact corpus: %s not used: %s", c, tied[c][1])
            elif c != top and _partial(c, top, meta):  # ranked last for that, whatever its count and size
                warn("artifact corpus: %s not used: %s", c, _PARTIAL[1])
            elif c != top:
                warn("artifact corpus: %s not used: %d of the other artifacts were built over %s, %d over it; "
                     "%d documents there, %d here", c, agree(top), top, agree(c), size(top), size(c))
        if len(corpora) > 1:
            notes.append(f"{len(corpora)} corpus copies attached; using {top} ({size(top)} documents, lexrag "
                         f"{meta[top].get('version')}, {agree(top)} of the other artifacts built over it); left out: "
                         + ", ".join(f"{c} ({tied[c][0]})" if c in tied else f"{c} ({_PARTIAL[0]})"
                                     if _partial(c, top, meta) else
                                     f"{c} ({size(c)} documents, {agree(c)} of the other artifacts built over it)"
                                     for c in corpora if c != top))
    want = cids.get(chosen.get("corpus"))

    def rank_copy(d: Path) -> tuple:  # a copy whose params.json fails its digest was edited: never before a sound one
        return not _complete(d, meta[d]), digest_stale(meta[d]), _newest(meta[d])

    for n in dependents:
        copies = found[n]
        if not copies:
            continue
        fits = [d for d in copies if "corpus_id" not in meta[d] or meta[d].get("corpus_id") == want]
        ordered = sorted(fits or copies, key=lambda d: (rank_copy(d), copies.index(d)))
        pick, tied = _settle(n, [d for d in ordered if rank_copy(d) == rank_copy(ordered[0])], meta)
        chosen[n] = pick
        for d in copies:
            if d == pick:
                continue
            why = (tied[d][1] if d in tied else
                   _PARTIAL[1] if _partial(d, pick, meta) else
                   _EDITED[1] if digest_stale(meta[d]) and not digest_stale(meta[pick]) else
                   f"built over corpus {meta[d].get('corpus_id')}, not the chosen {want}"
                   if "corpus_id" in meta[d] and meta[d].get("corpus_id") != want else
                   f"lexrag {meta[d].get('version')} is not newer than {meta[pick].get('version')} at {pick}")
            warn("artifact %s: %s not used: %s", n, d, why)
        if len(copies) > 1:
            left = ", ".join(f"{d} ({tied[d][0]})" if d in tied else f"{d} ({_PARTIAL[0]})" if _partial(d, pick, meta)
                             else f"{d} ({_EDITED[0]})" if digest_stale(meta[d]) and not digest_stale(meta[pick])
                             else str(d) for d in copies if d != pick)
            notes.append(f"{len(copies)} copies of {n} attached; using {pick} (lexrag {meta[pick].get('version')}); "
                         f"left out: {left}")
    return chosen


# (label for the run status, reason for the log) of a copy left out for what its own files or params.json say
_PARTIAL = ("files not all there", "its files are not all there (some missing, or of other sizes than its params.json "
                                   "records): a partial or damaged copy")
_EDITED = ("edited: its params.json fails its digest", f"its params.json was edited after the build (its {DIGEST} is "
                                                       "not the digest of its content)")


def _partial(d: Path, pick: Path, meta: dict[Path, dict]) -> bool:
    """``d`` was left out for ``pick`` because its files are not all there and ``pick``'s are."""
    return not _complete(d, meta[d]) and _complete(pick, meta[pick])


def _complete(folder: Path, meta: dict) -> bool:
    """Every file the copy's params.json lists is there with its size (cheap: no hashing): a stray
    params.json without its files never wins over a whole copy.  An artifact that is its params.json
    alone (a calibration, its file list empty) is whole."""
    files = meta.get("files")
    if isinstance(files, dict) and not files and meta.get("artifact") in PARAMS_ONLY:
        return True
    if not isinstance(files, dict) or not files:
        return False
    for rel, info in files.items():
        try:
            if not isinstance(rel, str) or os.path.getsize(folder / rel) != (info or {}).get("size"):
                return False
        except (OSError, TypeError, AttributeError):
            return False
    return True


def _settle(name: str, tied: list[Path], meta: dict[Path, dict]) -> tuple[Path, dict[Path, tuple[str, str]]]:
    """The copy of artifact ``name`` to load among ``tied`` (whole copies, in path order, equal on
    every other ranking criterion), and for each other one left out a short label (for the run
    status) and the reason (for the log).

    Copies whose params.json differ are different builds (another corpus of as many documents, a
    BM25 with other settings): which one the run means cannot be told from the inputs, so they are
    refused, both named.  Copies with the same params.json record the same size and sha256 for
    every file: the first whose files match that record is loaded (:func:`read_params`, the check
    the load makes anyway and caches per file version, so it hashes nothing twice), and a copy
    before it that fails the check is left out as edited.  Each copy after it is compared with it
    by sizes and sampled chunks (:func:`lexrag.models.paths.sampled_digest`): the same, an identical
    copy; other chunks, an edited one (the record is the same and the loaded copy matches it).
    Where every copy fails the check the first is returned, and the load refuses it, naming the
    file.  ``tied`` of one copy, or of copies that are not whole, is returned as it is."""
    first = tied[0]
    if len(tied) < 2 or not _complete(first, meta[first]):
        return first, {}
    for d in tied[1:]:
        # the digest left out: a copy without one (an older upload) is the same build; one whose digest is stale
        # was ranked apart (an edited copy), and the rest of each document is what its digest covers
        a, b = ({k: v for k, v in m.items() if k != DIGEST} for m in (meta[first], meta[d]))
        if a != b:
            fields = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            files = sorted(f for f in set(a.get("files") or {}) | set(b.get("files") or {})
                           if (a.get("files") or {}).get(f) != (b.get("files") or {}).get(f))
            what = ", ".join(f"files ({', '.join(files[:3])}{' ...' if len(files) > 3 else ''})" if k == "files" else k
                             for k in fields[:4])
            docs = f"{a['n_docs']} documents, " if isinstance(a.get("n_docs"), int) else ""
            over = (", as many of the other artifacts built over each" if name == "corpus" else
                    ", both built over the chosen corpus" if "corpus_id" in a else "")
            raise ArtifactError(f"artifact {name!r}: {first} and {d} are both whole copies ({docs}lexrag "
                                f"{a.get('version')}{over}) but different builds (their params.json "
                                f"differ in {what}), so which one this run means cannot be told: detach the one not "
                                f"meant for it, or set paths.artifacts_dir to the folder that holds the set to use")
    out: dict[Path, tuple[str, str]] = {}
    pick = None
    for d in tied:
        try:
            read_params(d, name)
        except (ArtifactError, OSError) as e:
            out[d] = ("edited: it fails its params.json's check",
                      f"it is not what its params.json records ({str(e).splitlines()[0][:300]})")
            continue
        pick = d
        break
    if pick is None:  # no clean copy: the first is loaded, and refused with the file named
        out.pop(first)
        return first, out
    want = _sampled(pick, meta[pick])
    for d in tied[tied.index(pick) + 1:]:
        if not meta[pick].get("files") and _sampled(d, meta[d]) == want:  # its params.json is the whole artifact
            out[d] = ("identical: the same params.json", f"the same build as {pick} (the same params.json, the whole "
                                                          "artifact), which comes first in path order")
        elif _sampled(d, meta[d]) == want:  # what was compared, no more: only the loaded copy is hashed whole
            out[d] = ("same build: params.json, sizes and sampled chunks agree; not loaded, not fully hashed",
                      f"the same build as {pick} by its params.json, file sizes and sampled chunks (not fully hashed: "
                      "only the loaded copy is), which comes first in path order")
        else:
            out[d] = ("edited: its files differ from its params.json",
                      f"its sampled contents differ from {pick}'s, whose files match the same params.json: edited "
                      "after the build")
    return pick, out


def _sampled(folder: Path, meta: dict) -> str | None:
    """The sizes and sampled chunks of the files ``meta`` lists (None: one could not be read)."""
    try:
        return sampled_digest(folder, [folder / rel for rel in sorted(meta["files"])]).hexdigest()
    except OSError:
        return None


def _newest(meta: dict) -> tuple:
    """A sort key that puts the newest lexrag version first."""
    try:
        return tuple(-int(x) for x in str(meta.get("version", "0")).split(".")[:3])
    except ValueError:
        return (0,)
