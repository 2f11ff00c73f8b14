"""The catalogue's specs are the one source: the committed manifest's fields, the run status's
fixes and the build command lines' input flags are what the specs say."""

from pathlib import Path

import yaml

import lexrag.pipeline  # noqa: F401  (declares every artifact and part)
from lexrag.registry import ARTIFACTS, INPUTS, build_order, fix_for, loadable, names, spec

ROOT = Path(__file__).resolve().parents[1]


def _flags(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def _says_what_each_spec_says(manifest: Path) -> dict:
    from lexrag.kaggle.manifest import SPEC_FIELDS, spec_fields

    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    entries = {a["name"]: a for a in doc["artifacts"]}
    for name, entry in entries.items():
        said = {k: entry.get(k) for k in SPEC_FIELDS}
        assert said == spec_fields(name), (f"{manifest.relative_to(ROOT)}: {name}: the entry and its spec disagree; "
                                           "rebuild it or follow the spec")
    return entries


def test_the_committed_manifest_says_what_each_spec_says():
    entries = _says_what_each_spec_says(ROOT / "artifacts_manifest.yaml")
    assert set(entries) == set(names()), "a spec without a manifest entry, or an entry without a spec"


def test_the_demo_manifest_says_what_each_spec_says():
    """The demo slice's manifest (`make demo-manifest` records it) follows the specs as the committed one does."""
    entries = _says_what_each_spec_says(ROOT / "demo" / "artifacts_manifest.yaml")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recorded = makefile.split("demo-manifest: venv", 1)[1].split("--only ", 1)[1].split()[0].split(",")
    assert list(entries) and set(entries) == set(recorded) <= set(names()), "re-record it: make demo-manifest"


def test_every_part_a_stage_can_need_has_a_fix_from_its_spec():
    for part in loadable():
        fix = fix_for(part)
        a = spec(part)
        assert fix, part
        if a.dataset:  # an artifact: attach its dataset or rebuild it
            assert a.dataset in fix and a.rebuild in fix, part
    assert fix_for("no-such-part") == ""


def test_the_build_command_lines_take_the_inputs_the_specs_read():
    from lexrag.cli import build_parser

    read = {f for a in ARTIFACTS for f in (a.needs_input, a.build_with, *a.reads) if f}
    read_by_build = {f for a in build_order() if a.in_build for f in (a.needs_input, a.build_with, *a.reads) if f}
    assert read == {i.field for i in INPUTS}, "an input no spec reads, or one a spec reads that no flag gives"
    assert read_by_build == {i.field for i in INPUTS if not i.datasets_only}
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert {i.flag for i in INPUTS if not i.datasets_only} <= _flags(sub.choices["build"])
    assert not {i.flag for i in INPUTS if i.datasets_only} & _flags(sub.choices["build"])


def test_the_build_order_puts_each_artifact_after_what_it_depends_on():
    order = [a.name for a in build_order()]
    assert order[0] == "corpus" and set(order) == set(names())
    for a in build_order():
        assert all(order.index(d) < order.index(a.name) for d in a.depends_on if d in order), a.name


def test_build_datasets_takes_every_input_the_specs_read(build_datasets):
    flags = _flags(build_datasets.parser())
    assert {i.flag for i in INPUTS} <= flags
