"""The lexrag-wheels dataset: the lexrag wheel (built reproducibly), the offline installer, and
for every Python version Kaggle may run the pinned wheels its image lacks, checked by their tags."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from lexrag.errors import ManifestError

__all__ = ["build_lexrag_wheel", "build_wheels_step", "missing_wheels"]


SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest zip timestamp: the lexrag wheel builds byte-identical


def build_lexrag_wheel(dest: Path) -> Path:
    """The lexrag wheel, reproducibly: built from a clean copy of ``kernel_src`` (no stale
    ``build/``) with fixed timestamps, so two builds have the same sha256."""
    import os
    import tempfile

    pkg = Path(__file__).resolve().parents[1]  # kernel_src
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel_src"
        shutil.copytree(pkg, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.pyc"))
        env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        try:
            subprocess.check_call([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), str(src)], env=env)
        except subprocess.CalledProcessError as e:  # pip said why above (its build backend not reachable, ...)
            raise ManifestError(f"wheels: the lexrag wheel did not build (pip wheel exit {e.returncode}; its ERROR line "
                                "above says why)") from None
    return next(dest.glob("lexrag-*.whl"))


def build_wheels_step(folder: Path, entry: dict) -> None:
    """The lexrag wheel, the installer script, and for every Python version Kaggle may run the
    pinned wheels its image lacks (one ``pip download`` per version, over several manylinux
    tags: a single tag picks stale releases)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("*.whl"), folder / "lexrag_install.py"]:  # a staging folder: empty unless run by hand
        old.unlink(missing_ok=True)
    build_lexrag_wheel(folder)
    shutil.copyfile(Path(__file__).with_name("kaggle") / "install.py", folder / "lexrag_install.py")
    params = entry.get("params", {})
    extra = params.get("extra_wheels", [])
    plats = params.get("platforms", ["manylinux2014_x86_64"])
    for pyver in params.get("python_versions", ["3.11"]):
        if extra:
            try:
                subprocess.check_call(
                    [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "--implementation",
                     "cp", *[a for p in plats for a in ("--platform", p)], "--python-version", str(pyver), "-d", str(folder),
                     *extra])
            except subprocess.CalledProcessError as e:  # pip said why above (a pin the index lacks, no network)
                raise ManifestError(f"wheels: pip download for Python {pyver} failed (exit {e.returncode}; its ERROR line "
                                    f"above says why) for the pins {', '.join(extra)}: check each pin is released for "
                                    "these tags and the package index can be reached") from None
    missing = missing_wheels(params, [p.name for p in folder.glob("*.whl")])
    if missing:
        raise ManifestError("wheels missing after the download: " + "; ".join(missing))
    from lexrag.artifacts import write_params

    write_params(folder, "wheels", "lexrag.wheels.build_wheels_step", params, files=False)  # the manifest hashes them


def missing_wheels(params: dict, files: Sequence[str]) -> list[str]:
    """For every pinned requirement and every listed Python version, a wheel that pip would
    install there (by its tags), else a line naming what is missing."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    wheels = []
    for f in files:
        try:
            name, version, _, tags = parse_wheel_filename(f)
        except ValueError:
            continue
        wheels.append((canonicalize_name(name), str(version), tags))
    plats = set(params.get("platforms", ["manylinux2014_x86_64"])) | {"any"}
    out = []
    for pyver in params.get("python_versions", ["3.11"]):
        nodot = str(pyver).replace(".", "")
        for req in params.get("extra_wheels", []):
            name, _, version = req.partition("==")
            ok = False
            for wname, wver, tags in wheels:
                if wname != canonicalize_name(name) or (version and wver != version):
                    continue
                ok = any(_fits(t, nodot, plats) for t in tags)
                if ok:
                    break
            if not ok:
                out.append(f"{req} for Python {pyver}")
    return out


def _fits(tag, nodot: str, plats: set[str]) -> bool:
    """Would CPython ``nodot`` (e.g. ``312``) on one of ``plats`` install a wheel with ``tag``?"""
    if not any(tag.platform == p or _manylinux_ok(tag.platform, p) for p in plats):
        return False
    interp, abi = tag.interpreter, tag.abi
    if interp.startswith("py3") or interp == "py2.py3":
        return abi == "none"
    if not interp.startswith("cp"):
        return False
    v = int(interp[2:])
    if abi == "abi3":
        return v <= int(nodot)
    return v == int(nodot)


def _manylinux_ok(have: str, allowed: str) -> bool:
    """A ``manylinux_2_X`` / ``manylinux2014`` wheel runs where an allowed tag of glibc >= its own is listed."""
    import re

    def glibc(tag: str):
        if tag.startswith("manylinux2014"):
            return (2, 17), tag.split("_", 1)[1]
        m = re.match(r"manylinux_(\d+)_(\d+)_(.+)", tag)
        return ((int(m.group(1)), int(m.group(2))), m.group(3)) if m else (None, None)

    (hv, harch), (av, aarch) = glibc(have), glibc(allowed)
    return hv is not None and av is not None and harch == aarch and hv <= av
