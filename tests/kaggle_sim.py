"""An emulated Kaggle runtime for the tests: a virtual environment of another Python (3.12, as
on Kaggle since December 2025) holding Kaggle's versions of the packages lexrag relies on, built
offline from a wheel cache that ``prepare`` fills beforehand (``make kaggle-sim``, run by ``make
test``; it is the only step that needs the package index).  ``prepare`` also records, for every
Python version the lexrag-wheels dataset serves, what each wheel it carries requires (pip's
report of their METADATA, no wheel downloaded), so that a test can check it offline.

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
# What the lexrag-wheels dataset adds for the lexical and graph path and the ranker (LightGBM and the narwhals it
# requires; the image's list above mirrors Kaggle's, so narwhals is the dataset's to carry, not the image's).
EXTRA = ["bm25s==0.3.16", "PyStemmer==3.1.0", "igraph==1.0.0", "leidenalg==0.12.0", "texttable==1.7.2",
         "lightgbm==4.7.0", "narwhals==2.29.0"]
# What Kaggle's image carries that the emulation leaves out (its CUDA torch, too large to install here, with the
# nvidia-* libraries its wheels name, and transformers with huggingface_hub and safetensors): the carried FAISS,
# bitsandbytes and accelerate wheels require them, and only the GPU checks load them.
NOT_EMULATED = ["torch", "transformers", "huggingface-hub", "safetensors", "nvidia-cuda-runtime-cu12",
                "nvidia-cublas-cu12"]
ROOT = Path(__file__).resolve().parents[1]
CARRIED = "carried.json"  # in the cache: per Python version, (name, version, Requires-Dist) of each carried wheel

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


def _wheels_params() -> dict:
    """The params of artifacts_manifest.yaml's wheels entry: the pins the dataset carries, its Pythons and tags."""
    import yaml

    doc = yaml.safe_load((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    return next(a for a in doc["artifacts"] if a["name"] == "wheels")["params"]


def _stamp(python: str) -> str:
    return hashlib.sha256(json.dumps([python, IMAGE, EXTRA, _wheels_params()]).encode()).hexdigest()[:16]


def record_carried(out: Path) -> None:
    """``out/carried.json``: for each Python version of the wheels entry, the name, version and
    Requires-Dist of each pinned wheel pip would download for it (``pip install --dry-run
    --report``, the wheels' METADATA without the wheels)."""
    import tempfile

    params = _wheels_params()
    doc = {"extra_wheels": params["extra_wheels"], "python_versions": {}}
    plats = [a for p in params["platforms"] for a in ("--platform", p)]
    with tempfile.TemporaryDirectory() as tmp:
        for pyver in params["python_versions"]:
            report = Path(tmp) / f"report-{pyver}.json"
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                            "--no-deps", "--only-binary", ":all:", "--implementation", "cp", *plats,
                            "--python-version", str(pyver), "--target", str(Path(tmp) / "unused"),
                            "--report", str(report), *params["extra_wheels"]],
                           check=True)
            items = json.loads(report.read_text(encoding="utf-8"))["install"]
            doc["python_versions"][str(pyver)] = [[i["metadata"]["name"], i["metadata"]["version"],
                                                   i["metadata"].get("requires_dist") or []] for i in items]
    (out / CARRIED).write_text(json.dumps(doc, indent=1), encoding="utf-8")


def carried_requirements(out: Path) -> dict | None:
    """What :func:`record_carried` wrote (None before ``prepare`` has run)."""
    path = out / CARRIED
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def image_packages(out: Path, python_version: str) -> dict[str, str]:
    """The emulated image as installed: canonical name to version of the packages of ``IMAGE`` and
    of what they require (markers read for ``python_version``), resolved over the cached wheels."""
    import zipfile
    from email.parser import HeaderParser

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename

    wheels = {canonicalize_name(parse_wheel_filename(w.name)[0]): w for w in (out / "wheels").glob("*.whl")}
    env = {"python_version": python_version, "python_full_version": f"{python_version}.0", "extra": ""}
    found: dict[str, str] = {}
    todo = [Requirement(r) for r in IMAGE]
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        if key in found or (req.marker is not None and not req.marker.evaluate(env)):
            continue
        whl = wheels[key]  # the cache holds every wheel the image's install needs: pip downloaded them together
        with zipfile.ZipFile(whl) as z:
            meta_name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            meta = HeaderParser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
        found[key] = meta["Version"]
        todo += [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    return found


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
    record_carried(out)
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
