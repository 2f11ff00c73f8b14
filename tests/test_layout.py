"""The package's shape (docs/architecture.md, "Package layers"): the root holds at most ten modules,
so a concern that outgrows its module gets a package rather than another module at the root
(``python scripts/check_layout.py`` says the rest: modules over 400 lines, a warning, and import circles)."""

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "kernel_src" / "lexrag"


def test_the_package_root_holds_at_most_ten_modules():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= 10, f"{len(root)} modules at the package root: give a concern a package instead ({', '.join(root)})"



def test_the_layout_check_finds_no_circle_and_counts_the_root(capsys):
    import check_layout

    assert check_layout.main([]) == 0
    out = capsys.readouterr().out
    assert f"{len(list(PKG.glob('*.py')))} modules at the root" in out and "import circles: none" in out
