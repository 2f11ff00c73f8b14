#!/usr/bin/env python
"""Benchmark (not a test): what knowing a model folder by its weights costs
(:func:`lexrag.models.paths.model_fingerprint` and :func:`lexrag.models.model_id`: each weight
file's safetensors header and three sampled chunks).

  python scripts/bench_fingerprint.py --work WORK [--sizes-gb 1 15] [--shard-gb 4] [--keep]

For each size it writes a folder of safetensors shards of random bytes (a 15 GB model as Kaggle
mounts Qwen2.5-7B: shards of about 4 GB), then times the fingerprint with the files in the page
cache and after asking the kernel to drop them (``posix_fadvise(DONTNEED)``: the first read of a
freshly attached dataset), against ``sha256`` over every byte of the folder, what hashing the
whole weights would cost.  Writes WORK/fingerprint.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path


def _write_model(folder: Path, size: int, shard: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "bench/model", "architectures": ["Qwen2ForCausalLM"]}))
    block = os.urandom(1 << 24)
    left, i = size, 0
    while left > 0:
        n = min(shard, left)
        header = json.dumps({f"t{i}": {"dtype": "BF16", "shape": [n // 2], "data_offsets": [0, n]}}).encode()
        with open(folder / f"model-{i:05d}.safetensors", "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            written = 0
            while written < n:
                chunk = block[: min(len(block), n - written)]
                f.write(chunk)
                written += len(chunk)
        left -= n
        i += 1


def _drop(folder: Path) -> None:
    """Write the files out, then ask the kernel to drop their pages (dirty pages are not dropped)."""
    os.sync()
    for p in folder.iterdir():
        with open(p, "rb") as f:
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _sha_all(folder: Path) -> None:
    for p in sorted(folder.iterdir()):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 24):
                h.update(chunk)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch folder for the model folders (needs the sizes' disk space)")
    ap.add_argument("--sizes-gb", type=float, nargs="+", default=[1, 15], help="model sizes in GB (default 1 15)")
    ap.add_argument("--shard-gb", type=float, default=4, help="largest shard in GB (default 4)")
    ap.add_argument("--keep", action="store_true", help="keep the model folders")
    args = ap.parse_args()
    from lexrag.models.paths import model_fingerprint

    work = Path(args.work)
    rows = []
    for gb in args.sizes_gb:
        folder = work / f"model_{gb:g}gb"
        if folder.exists():
            shutil.rmtree(folder)
        _write_model(folder, int(gb * 1e9), int(args.shard_gb * 1e9))
        _drop(folder)
        t0 = time.perf_counter()
        model_fingerprint(folder)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        model_fingerprint(folder)
        warm = time.perf_counter() - t0
        _drop(folder)
        t0 = time.perf_counter()
        _sha_all(folder)
        full = time.perf_counter() - t0
        rows.append({"size_gb": gb, "files": len(list(folder.glob("*.safetensors"))), "fingerprint_cold_s": round(cold, 4),
                     "fingerprint_warm_s": round(warm, 4), "sha256_every_byte_s": round(full, 1)})
        print(f"{gb:g} GB in {rows[-1]['files']} shards: fingerprint {cold * 1000:.1f} ms cold, {warm * 1000:.1f} ms warm; "
              f"sha256 of every byte {full:.1f} s")
        if not args.keep:
            shutil.rmtree(folder)
    (work / "fingerprint.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
