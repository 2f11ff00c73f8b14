"""The lexrag-wheels dataset: the lexrag wheel (built reproducibly), the offline installer, and
for every Python version Kaggle may run the pinned wheels its image lacks, checked by their tags,
with every dependency they require either carried too or on Kaggle's image (``pip --no-index``
finds nothing else there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from lexrag.errors import ManifestError, short
from lexrag.registry import ArtifactSpec, declare

__all__ = ["build_lexrag_wheel", "build_wheels_step", "missing_wheels", "wheel_licences", "write_licences",
           "LICENCES_FILE", "ON_KAGGLE_IMAGE", "wheel_requirements", "unmet_dependencies"]

LICENCES_FILE = "LICENSES.md"  # the wheels dataset's list of what it carries under which licence


# What Kaggle's image carries of the packages the carried wheels require (../shared/DESIGN.md, "Runtime contract on
# Kaggle": its Python stack, CUDA torch with the nvidia-* libraries its pip wheels name, transformers with
# huggingface_hub and safetensors).  A required dependency of a carried wheel that is neither carried nor named here
# stops the build: the offline install would fail on Kaggle (lightgbm 4.7 needs narwhals, which the image lacks).
ON_KAGGLE_IMAGE = ("numpy", "scipy", "pandas", "pyarrow", "pyyaml", "tqdm", "packaging", "psutil", "torch",
                   "transformers", "huggingface-hub", "safetensors", "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12")

SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest zip timestamp: the lexrag wheel builds byte-identical


def build_lexrag_wheel(dest: Path) -> Path:
    """The lexrag wheel, reproducibly: built from a clean copy of ``kernel_src`` (no stale
    ``build/``) with fixed timestamps, so two builds have the same sha256."""
    import os
    import tempfile

    pkg = Path(__file__).resolve().parents[2]  # kernel_src
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
    shutil.copyfile(Path(__file__).resolve().parents[1] / "kaggle" / "install.py", folder / "lexrag_install.py")
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
    from packaging.utils import canonicalize_name

    reqs = [wheel_requirements(w) for w in sorted(folder.glob("*.whl"))]
    have: dict[str, str | None] = {canonicalize_name(n): None for n in ON_KAGGLE_IMAGE}
    have.update({canonicalize_name(n): v for n, v, _ in reqs})
    unmet = unmet_dependencies(reqs, have, params.get("python_versions", ["3.11"]))
    if unmet:  # pinned in extra_wheels (and requirements.txt), they are carried like the rest
        raise ManifestError("wheels: a carried wheel requires what neither the dataset nor Kaggle's image has; pin it "
                            "in the wheels entry's extra_wheels: " + "; ".join(unmet))
    write_licences(folder)
    from lexrag.artifacts import write_params

    write_params(folder, "wheels", "lexrag.io.wheels.build_wheels_step", params, files=False)  # the manifest hashes them


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


def wheel_requirements(wheel: Path) -> tuple[str, str, list[str]]:
    """(name, version, its Requires-Dist lines) of one wheel, read from its ``.dist-info/METADATA``."""
    import zipfile
    from email.parser import HeaderParser

    with zipfile.ZipFile(wheel) as z:
        meta_name = next((n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            raise ManifestError(f"wheels: {wheel.name} has no .dist-info/METADATA, so its dependencies cannot be read")
        meta = HeaderParser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
    requires = list(meta.get_all("Requires-Dist") or [])
    return meta.get("Name", wheel.name.split("-")[0]), meta.get("Version", "?"), requires


def unmet_dependencies(requires: Iterable[tuple[str, str, Sequence[str]]], have: Mapping[str, str | None],
                       python_versions: Sequence[str]) -> list[str]:
    """A line for each required dependency (not an extra's; its marker evaluated for CPython on
    x86_64 Linux, per Python version) of each ``(name, version, Requires-Dist lines)`` that ``have``
    (canonical name to version; None: some version, not known here) lacks or holds at a version
    outside the requirement's range."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: list[str] = []
    for pyver in python_versions:
        env = {"python_version": str(pyver), "python_full_version": f"{pyver}.0", "sys_platform": "linux",
               "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
               "platform_python_implementation": "CPython", "implementation_name": "cpython", "extra": ""}
        for name, version, lines in requires:
            for line in lines:
                try:
                    req = Requirement(line)
                except InvalidRequirement as e:
                    raise ManifestError(f"{name} {version}: its METADATA has a Requires-Dist line that is no "
                                        f"requirement ({short(line)}: {e}); use another build of that wheel") from None
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
                key = canonicalize_name(req.name)
                if key not in have:
                    why = "neither carried nor on Kaggle's image"
                elif have[key] is not None and not req.specifier.contains(have[key], prereleases=True):
                    why = f"the dataset or the image has {have[key]}"
                else:
                    continue
                line_out = f"{name} {version} requires {req.name}{req.specifier} (Python {pyver}): {why}"
                if line_out not in out:
                    out.append(line_out)
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


_LICENCE_NAMES = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS", "COPYRIGHT")


def _licence_of(meta) -> str:
    """A wheel's licence as its METADATA states it: License-Expression (PEP 639), else a short
    License field, else the License classifiers; "not stated" when none is there."""
    expr = (meta.get("License-Expression") or "").strip()
    if expr:
        return expr
    lic = (meta.get("License") or "").strip()
    if lic and "\n" not in lic and len(lic) <= 80:
        return lic
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(classifiers) or (lic.splitlines()[0][:80] if lic else "not stated")


def wheel_licences(wheel: Path) -> tuple[str, str, str, dict[str, bytes]]:
    """(name, version, licence, licence files by their name) of one wheel, read from its
    ``.dist-info``: METADATA and the files PEP 639 puts under ``licenses/`` or that are named like
    a licence (LICENSE, COPYING, NOTICE, ...)."""
    import zipfile
    from email.parser import HeaderParser

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            raise ManifestError(f"wheels: {wheel.name} has no .dist-info/METADATA, so its licence cannot be read")
        meta = HeaderParser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
        dist_info = meta_name.rsplit("/", 1)[0] + "/"
        files = {}
        for n in names:
            if not n.startswith(dist_info) or n.endswith("/"):
                continue
            rel = n[len(dist_info):]
            if rel.startswith("licenses/") or rel.split("/")[-1].upper().startswith(_LICENCE_NAMES):
                files[rel.removeprefix("licenses/")] = z.read(n)
    return meta.get("Name", wheel.name.split("-")[0]), meta.get("Version", "?"), _licence_of(meta), files


def write_licences(folder: Path) -> list[tuple[str, str, str]]:
    """Under ``folder/licenses/NAME-VERSION/`` every licence file of every wheel there (the
    project's own LICENSE for the lexrag wheel), and ``LICENSES.md``: a row per package with its
    licence, the GPL ones named first.  Returns (name, version, licence) per package."""
    rows: dict[tuple[str, str], str] = {}
    n_files: dict[tuple[str, str], int] = {}
    out = folder / "licenses"
    if out.is_dir():
        shutil.rmtree(out)
    for whl in sorted(folder.glob("*.whl")):
        name, version, lic, files = wheel_licences(whl)
        if name.lower() == "lexrag":
            own = Path(__file__).resolve().parents[3] / "LICENSE"
            if own.is_file() and not files:
                files = {"LICENSE": own.read_bytes()}
        rows[(name, version)] = lic
        n_files[(name, version)] = max(n_files.get((name, version), 0), len(files))
        for rel, data in files.items():
            target = out / f"{name}-{version}" / rel
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                continue  # a name that would leave the folder is not copied
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    table = sorted(((n, v, lic) for (n, v), lic in rows.items()), key=lambda r: ("GPL" not in r[2].upper(), r[0].lower()))
    gpl = [f"{n} ({lic})" for n, _, lic in table if "GPL" in lic.upper()]
    lines = ["# What this dataset carries, under which licence", "",
             "Each wheel keeps its own licence; the licence files are under `licenses/NAME-VERSION/`. "
             + (f"Under the GPL: {', '.join(gpl)}." if gpl else "None is under the GPL."), "",
             "| package | version | licence | licence files |", "| --- | --- | --- | --- |"]
    lines += [f"| {n} | {v} | {lic} | {n_files[(n, v)] or 'none in the wheel'} |" for n, v, lic in table]
    (folder / LICENCES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return table


SPEC = declare(ArtifactSpec(
    "wheels", in_build=False, licence="wheels", dataset="lexrag-wheels", title="lexrag wheels for offline install",
    description="the lexrag wheel, lexrag_install.py, and for Python 3.11, 3.12 and 3.13 the pinned wheels a Kaggle image "
                "lacks (never torch, transformers or CUDA libraries)",
    builder="python build_datasets.py --only wheels --out OUT", build=build_wheels_step,
    rebuild="python build_datasets.py --only wheels --out DATASETS"))
