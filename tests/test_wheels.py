"""The wheels dataset: every compiled wheel for every Python version Kaggle may run, and a
lexrag wheel that builds byte-identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from lexrag.io.wheels import build_lexrag_wheel, missing_wheels

ROOT = Path(__file__).resolve().parents[1]


def _wheels_entry():
    doc = yaml.safe_load((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    return next(a for a in doc["artifacts"] if a["name"] == "wheels")


def test_the_manifest_lists_every_pinned_wheel_for_every_python_kaggle_may_run():
    entry = _wheels_entry()
    params = entry["params"]
    assert {"3.11", "3.12", "3.13"} <= set(params["python_versions"])
    names = [f["path"] for f in entry["files"]]
    assert missing_wheels(params, names) == []
    assert "lexrag_install.py" in names and any(n.startswith("lexrag-") and n.endswith(".whl") for n in names)
    for banned in ("torch", "transformers", "nvidia"):
        assert not any(n.lower().startswith(banned) for n in names), banned


def test_the_wheels_carry_each_extra_the_installer_installs_at_the_pin_requirements_txt_names():
    import re
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {canonicalize_name(Requirement(ln).name): ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}
    carried = {canonicalize_name(Requirement(r).name): r for r in _wheels_entry()["params"]["extra_wheels"]}
    for req in carried.values():  # one pin for a package, here and in the local install
        assert pins.get(canonicalize_name(Requirement(req).name), req) == req, req
    extras = tomllib.loads((ROOT / "kernel_src" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installer = (ROOT / "kernel_src" / "lexrag" / "kaggle" / "install.py").read_text()
    installed = [e for group in re.findall(r"lexrag\[([a-z,]+)\]", installer) for e in group.split(",")]
    assert "ranker" in installed  # the exam preset's learned count
    for extra in installed:
        for dep in extras[extra]:
            assert canonicalize_name(Requirement(dep).name) in carried, f"lexrag[{extra}] needs {dep}, not in the wheels"


def test_a_missing_compiled_wheel_is_named_with_its_python_version():
    params = _wheels_entry()["params"]
    names = [f["path"] for f in _wheels_entry()["files"] if not f["path"].startswith("pystemmer-3.1.0-cp313")]
    assert missing_wheels(params, names) == ["PyStemmer==3.1.0 for Python 3.13"]
    # an abi3 wheel serves later Pythons, a cp312-only wheel does not serve 3.13
    assert missing_wheels({"python_versions": ["3.13"], "extra_wheels": ["igraph==1.0.0"], "platforms": ["manylinux_2_28_x86_64"]},
                          ["igraph-1.0.0-cp39-abi3-manylinux_2_28_x86_64.whl"]) == []
    assert missing_wheels({"python_versions": ["3.13"], "extra_wheels": ["x==1"], "platforms": ["manylinux_2_28_x86_64"]},
                          ["x-1-cp312-cp312-manylinux_2_28_x86_64.whl"]) == ["x==1 for Python 3.13"]


def test_the_lexrag_wheel_builds_byte_identical(tmp_path):
    a = build_lexrag_wheel(tmp_path / "a")
    b = build_lexrag_wheel(tmp_path / "b")
    sha = hashlib.sha256(a.read_bytes()).hexdigest()
    assert sha == hashlib.sha256(b.read_bytes()).hexdigest()


def test_a_required_dependency_neither_carried_nor_on_the_image_is_named():
    from lexrag.io.wheels import unmet_dependencies

    lightgbm = ("lightgbm", "4.7.0", ["narwhals>=1.15", "numpy>=1.21.3", "scipy", 'pandas>=1.3.4; extra == "pandas"',
                                      'tomli; python_version < "3.11"'])
    assert unmet_dependencies([lightgbm], {"numpy": "2.0.2", "scipy": None, "narwhals": "2.29.0"}, ["3.12"]) == []
    assert unmet_dependencies([lightgbm], {"numpy": "2.0.2", "scipy": None}, ["3.12"]) == [
        "lightgbm 4.7.0 requires narwhals>=1.15 (Python 3.12): neither carried nor on Kaggle's image"]
    assert unmet_dependencies([lightgbm], {"numpy": "1.20", "scipy": None, "narwhals": "1.14"}, ["3.11"]) == [
        "lightgbm 4.7.0 requires narwhals>=1.15 (Python 3.11): the dataset or the image has 1.14",
        "lightgbm 4.7.0 requires numpy>=1.21.3 (Python 3.11): the dataset or the image has 1.20"]
    assert unmet_dependencies([lightgbm], {"numpy": None, "scipy": None, "narwhals": None}, ["3.10"]) == [
        "lightgbm 4.7.0 requires tomli (Python 3.10): neither carried nor on Kaggle's image"]


def test_every_dependency_a_carried_wheel_requires_is_carried_or_on_the_emulated_kaggle_image():
    """Each pinned wheel of the wheels entry, and lexrag's own wheel, for each Python version the
    dataset serves: every dependency it requires (not an extra's) is carried at a version in range,
    or is on the emulated Kaggle image (or among the GPU packages the emulation leaves out), since
    the offline install finds nothing else (lightgbm 4.7's narwhals was once neither).  The wheels'
    METADATA comes from the emulated runtime's cache (``make kaggle-sim``), read offline."""
    import tomllib

    import pytest
    from kaggle_sim import NOT_EMULATED, carried_requirements, image_packages
    from lexrag.io.wheels import ON_KAGGLE_IMAGE, unmet_dependencies
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    cache = ROOT / ".cache" / "kaggle-sim"
    recorded = carried_requirements(cache)
    if recorded is None:
        pytest.skip("no record of the carried wheels' dependencies: run `make kaggle-sim` (make test does)")
    params = _wheels_entry()["params"]
    assert recorded["extra_wheels"] == params["extra_wheels"], "the record is stale: run `make kaggle-sim`"
    image = image_packages(cache, "3.12")
    assert "narwhals" not in image  # the emulated image mirrors Kaggle's: the dataset carries narwhals
    have: dict[str, str | None] = {**image, **{canonicalize_name(n): None for n in NOT_EMULATED}}
    # what the builder takes to be on Kaggle's image is on the emulated one, or among the GPU packages it leaves out
    assert {canonicalize_name(n) for n in ON_KAGGLE_IMAGE} - set(have) == set()
    have.update({canonicalize_name(Requirement(r).name): str(Requirement(r).specifier).removeprefix("==")
                 for r in params["extra_wheels"]})
    core = tomllib.loads((ROOT / "kernel_src" / "pyproject.toml").read_text())["project"]["dependencies"]
    for pyver in params["python_versions"]:
        wheels = recorded["python_versions"][pyver]
        pinned = {canonicalize_name(Requirement(r).name) for r in params["extra_wheels"]}
        assert {canonicalize_name(n) for n, _, _ in wheels} == pinned, pyver
        assert unmet_dependencies([*map(tuple, wheels), ("lexrag", "wheel", core)], have, [pyver]) == []
