"""What runs is what is reported: a preset with a fixed count ships the k its reported nested
numbers chose (repro/lexam_dev.yaml records it from `make quality`), and the README's results table
names the count each preset ships."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lexrag.config import load_config

ROOT = Path(__file__).resolve().parents[1]
REPRO = yaml.safe_load((ROOT / "repro" / "lexam_dev.yaml").read_text(encoding="utf-8"))["metrics"]


@pytest.mark.parametrize("variant, preset", [("lexical", "lexical"), ("default", None)])
def test_a_fixed_count_preset_ships_the_k_its_nested_numbers_chose(variant, preset):
    count = load_config(preset).count
    assert count.method == "fixed"
    assert count.k == REPRO[f"{variant} | k"]["value"], (
        f"{preset or 'the defaults'} ship count.k = {count.k}, the nested numbers chose k = {REPRO[f'{variant} | k']['value']}")


def _readme_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## Results (held out)"):].split("\n## ", 1)[0]
    lines = [ln for ln in table.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return {cells[0]: cells for ln in lines[2:] for cells in [[c.strip() for c in ln.strip("|").split("|")]]} | {"": head}


def test_the_readme_results_table_reports_the_count_each_preset_ships():
    rows = _readme_rows()
    k_col = rows[""].index("k")
    for label, preset in (("`lexical` = the defaults + the dictionary + whole articles first", "lexical"), ("`exam` preset", "exam"),
                          ("`kaggle` preset, CPU stages", "kaggle")):
        count, cell = load_config(preset).count, rows[label][k_col]
        if count.method == "fixed":
            assert cell == str(count.k), f"README: {label} at k {cell}, the preset ships k = {count.k}"
        elif preset == "kaggle":  # measured at the k its CPU stages chose; the preset ships its own count rule: the cell says both
            assert cell.startswith(str(REPRO["kaggle (CPU stages) | k"]["value"])) and count.method in cell, cell
        else:  # scored as it emits: no k was chosen for it, the cell names its count
            assert f"{preset} | k" not in REPRO and cell == count.method, cell


def test_a_preset_with_the_learned_count_cuts_as_its_fixed_count_variant_chose_where_the_ranker_is_silent():
    # exam's count.k is the cut of a question the ranker gives no probabilities for: the k the
    # ranker ablation's fixed-count exam chose (repro/lexam_dev_ranker.yaml)
    ranker = yaml.safe_load((ROOT / "repro" / "lexam_dev_ranker.yaml").read_text(encoding="utf-8"))["metrics"]
    count = load_config("exam").count
    assert count.method == "expected_f1" and count.k == ranker["exam, fixed count | k"]["value"]
