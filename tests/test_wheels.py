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
