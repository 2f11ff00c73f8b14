"""An emulated Kaggle runtime for the tests: a virtual environment of another Python (3.12, as
on Kaggle since December 2025) holding Kaggle's versions of the packages lexrag relies on, built
offline from a wheel cache that ``prepare`` fills beforehand (``make kaggle-sim``, run by ``make
test``; it is the only step that needs the package index).

    python tests/kaggle_sim.py prepare --python python3.12 --out .cache/kaggle-sim
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

# Kaggle's image (see ../shared/DESIGN.md, "Runtime contract on Kaggle") and a Jupyter kernel.
IMAGE = ["numpy==2.0.2", "pandas==2.2.2", "pyarrow==18.1.0", "scipy==1.15.3", "PyYAML==6.0.2", "tqdm", "packaging", "ipykernel"]
# What the lexrag-wheels dataset adds for the lexical and graph path.
EXTRA = ["bm25s==0.3.16", "PyStemmer==3.1.0", "igraph==1.0.0", "leidenalg==0.12.0", "texttable==1.7.2", "lightgbm==4.7.0"]

# Blocks every Python-level connection that is not to this machine (pip included); the kernel's
# own channels are ZeroMQ sockets on the loopback and are left alone.
NETBLOCK = '''
import socket

_connect = socket.socket.connect


def _guard(self, address, *a, **k):
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
        raise OSError(f"network access is disabled in the emulated Kaggle run (tried {address!r})")
    return _connect(self, address, *a, **k)


socket.socket.connect = _guard
'''


def _stamp(python: str) -> str:
    return hashlib.sha256(json.dumps([python, IMAGE, EXTRA]).encode()).hexdigest()[:16]


def prepare(python: str, out: Path) -> int:
    exe = shutil.which(python) or python
    probe = [exe, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"]
    r = subprocess.run(probe, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"kaggle-sim: {python} does not run ({r.stderr.strip()[:200]}); emulating with {sys.executable}")
        exe = sys.executable
        r = subprocess.run([exe, *probe[1:]], capture_output=True, text=True, check=True)
    version = r.stdout.strip()
    stamp = out / "stamp.json"
    want = {"python": exe, "version": version, "key": _stamp(exe)}
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        print(f"kaggle-sim: cache for Python {version} is ready at {out}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([exe, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d", str(out / "wheels"), *IMAGE, *EXTRA],
                   check=True)
    stamp.write_text(json.dumps(want))
    print(f"kaggle-sim: cached the wheels for Python {version} in {out}")
    return 0


def cache_info(out: Path) -> dict | None:
    stamp = out / "stamp.json"
    return json.loads(stamp.read_text()) if stamp.is_file() else None


def make_env(info: dict, cache: Path, dest: Path) -> Path:
    """A venv of the cached Python with Kaggle's packages, installed offline; returns its python."""
    subprocess.run([info["python"], "-m", "venv", str(dest)], check=True)
    py = dest / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(cache / "wheels"), *IMAGE],
                   check=True)
    return py


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["prepare"])
    ap.add_argument("--python", default="python3.12")
    ap.add_argument("--out", default=".cache/kaggle-sim")
    args = ap.parse_args(argv)
    return prepare(args.python, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
