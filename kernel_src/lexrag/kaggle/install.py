"""Offline install of lexrag on Kaggle, standard library only.

It runs before lexrag is importable, so it is shipped twice: in the package and, as
``lexrag_install.py``, at the top of the lexrag-wheels dataset, where a notebook's first cells find
it with one bounded glob.  Steps, each from the wheels folder with ``pip --no-index``:

1. ``lexrag`` itself with its core dependencies (BM25) and its ``graph`` extra: required;
2. FAISS: ``faiss-gpu-cu12`` when a GPU of compute capability >= 7.0 is present (Kaggle's cu128
   torch has no kernels for a P100's sm_60), else ``faiss-cpu``; a failed GPU build falls back
   to the CPU one;
3. the LLM's ``bitsandbytes`` and ``accelerate``.

A failed optional step is printed and the others go on: the notebook then runs without that
stage.  Exit status 0 when lexrag itself installed, 1 otherwise.

    python lexrag_install.py --input INPUT_ROOT [--wheels DIR] [--no-faiss] [--no-llm]

The notebook passes Kaggle's input root; the package's path resolver is the one place that
names Kaggle folders, and this script runs before the package can be imported.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["main", "find_wheels", "usable_gpu"]


def find_wheels(root: str | Path) -> Path | None:
    """The folder holding a lexrag wheel under ``root`` (up to 6 folders down), shallowest first: a
    bounded depth, not ``**``, since links among the inputs (``a -> ..``) would send a recursive
    search round for ever."""
    base = glob.escape(str(root))
    hits = sorted((p for d in range(7) for p in glob.glob(os.path.join(base, *["*"] * d, "lexrag-*.whl"))),
                  key=lambda p: (p.count(os.sep), p))
    return Path(hits[0]).parent if hits else None


def usable_gpu() -> bool:
    """A GPU of compute capability >= 7.0, asked of nvidia-smi (torch may not be importable yet)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        return any(float(x) >= 7.0 for x in out)
    except (OSError, ValueError, subprocess.SubprocessError):
        return False


def _pip(wheels: Path, *reqs: str) -> tuple[bool, str]:
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels), "-q", *reqs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()[-1500:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", help="the wheels folder; default: search --input")
    ap.add_argument("--input", default=os.environ.get("LEXRAG_KAGGLE_INPUT"),
                    help="the folder holding the attached inputs (the notebook passes it)")
    ap.add_argument("--no-faiss", action="store_true")
    ap.add_argument("--no-llm", action="store_true")
    args = ap.parse_args(argv)
    if not args.wheels and not args.input:
        ap.error("give --input (the inputs root) or --wheels")
    wheels = Path(args.wheels) if args.wheels else find_wheels(args.input)
    if wheels is None:
        print(f"lexrag-install: no lexrag wheel under {args.input}: attach the lexrag-wheels dataset")
        return 1
    ok, msg = _pip(wheels, "lexrag[graph]")  # the graph build's igraph and leidenalg are in the wheels dataset
    print(f"lexrag-install: lexrag from {wheels}: {'ok' if ok else 'FAILED'}")
    if not ok:
        print(msg)
        return 1
    ok, msg = _pip(wheels, "lexrag[ranker]")  # LightGBM: Kaggle's image has one, the wheels dataset the pinned one
    print(f"lexrag-install: the ranker's LightGBM: {'ok' if ok else 'failed (the ranker stage stays off; the run says so)'}")
    if not ok:
        print(msg)
    if not args.no_faiss:
        tried = ["faiss-gpu-cu12", "faiss-cpu"] if usable_gpu() else ["faiss-cpu"]
        for pkg in tried:
            ok, msg = _pip(wheels, pkg)
            print(f"lexrag-install: {pkg}: {'ok' if ok else 'failed'}")
            if ok:
                break
            print(msg)
    if not args.no_llm:
        ok, msg = _pip(wheels, "bitsandbytes", "accelerate")
        print(f"lexrag-install: bitsandbytes, accelerate: {'ok' if ok else 'failed (the LLM stages stay off)'}")
        if not ok:
            print(msg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
