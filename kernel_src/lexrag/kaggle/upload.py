"""Uploading the dataset folders with the kaggle CLI: a new version when the dataset exists, else
created (private); only folders that match the manifest are sent, and every CLI call is bounded
in the output it keeps (and the status call in time)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from lexrag import __version__
from lexrag.errors import ManifestError
from lexrag.kaggle.datasets import write_dataset_metadata
from lexrag.kaggle.manifest import check, load_manifest, selected

__all__ = ["upload", "STATUS_TIMEOUT_S"]

log = logging.getLogger(__name__)


def _kaggle(cmd: list[str], timeout: float | None) -> tuple[int, str]:
    """Run the kaggle CLI; its exit code and the last 4 KB of what it said (stdout and stderr, read in
    any encoding): a CLI that floods its output holds no more memory than that.  ``timeout``
    (seconds, None for none) raises :class:`subprocess.TimeoutExpired` with the CLI killed."""
    import select
    import time

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail, end = b"", None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wait = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([p.stdout], [], [], wait)[0]:
                raise subprocess.TimeoutExpired(cmd, timeout or 0)
            data = os.read(p.stdout.fileno(), 65536)
            if not data:
                break
            tail = (tail + data)[-4096:]
        rc = p.wait(None if end is None else max(0.0, end - time.monotonic()))
        return rc, tail.decode("utf-8", "replace").strip()
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


STATUS_TIMEOUT_S = 120  # `kaggle datasets status` answers in seconds; an upload itself may take an hour


def upload(manifest_path: str | Path, out_dir: str | Path, only: Sequence[str] | None = None, message: str = "",
           owner: str | None = None) -> None:
    """Push each artifact folder with the kaggle CLI: a new version if the dataset exists, else
    create it; ``owner`` (a Kaggle user or organisation) replaces the owner the folders were built for."""
    if shutil.which("kaggle") is None:
        raise ManifestError("the kaggle CLI is not on PATH: pip install kaggle and put your API token in place "
                            "(see the kaggle CLI docs)")
    problems = check(manifest_path, out_dir, only)
    if problems:
        raise ManifestError("refusing to upload artifacts that do not match the manifest:\n  " + "\n  ".join(problems))
    doc = load_manifest(manifest_path)
    names = selected(doc, only, manifest_path)
    for entry in doc["artifacts"]:
        if entry["name"] not in names:
            continue
        folder = Path(out_dir) / entry["name"]
        if owner:
            write_dataset_metadata(folder, entry, owner)
        meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
        log.info("asking Kaggle whether %s exists (kaggle datasets status, at most %d s)", meta["id"], STATUS_TIMEOUT_S)
        try:  # a stalled network must not hold the upload for ever
            status_rc, said = _kaggle(["kaggle", "datasets", "status", meta["id"]], STATUS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ManifestError(f"kaggle datasets status {meta['id']} gave no answer in {STATUS_TIMEOUT_S} s (no "
                                "network?); nothing was uploaded for it") from None
        if status_rc != 0 and not any(w in said.lower() for w in ("404", "not found", "does not exist")):
            # not an answer about the dataset (no network, a bad token): creating it anew would be wrong
            last = said.splitlines()[-1] if said else "no output"
            raise ManifestError(f"kaggle datasets status {meta['id']} failed: {last}; nothing was uploaded for it")
        msg = message or f"lexrag {__version__}"
        cmd = (["kaggle", "datasets", "version", "-p", str(folder), "-m", msg, "--dir-mode", "zip"] if status_rc == 0
               else ["kaggle", "datasets", "create", "-p", str(folder), "--dir-mode", "zip"])
        log.info("%s (uploading %.1f MB; the kaggle CLI says nothing until it is done)", " ".join(cmd),
                 sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6)
        rc, tail = _kaggle(cmd, None)
        said = ([x for x in tail.splitlines() if re.search(r"\berror\b", x, re.IGNORECASE)] or tail.splitlines()
                or ["no output"])
        if rc != 0 or re.search(r"\berror\b", tail, re.IGNORECASE):  # the CLI exits 0 on some refusals of the API
            raise ManifestError(f"{' '.join(cmd[:3])} for {entry['name']} failed (exit {rc}): {said[-1]}")
        log.info("%s: kaggle said: %s", entry["name"], said[-1])
