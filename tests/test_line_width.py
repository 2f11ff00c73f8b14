"""The house line width, 120 characters, held by a per-file baseline that only shrinks.

ruff's E501 (ruff.toml) is the hard ceiling, 140 characters, for every line.  Under it, this test
counts per Python file of the project (``kernel_src/``, ``scripts/``, ``tests/``,
``build_datasets.py``, ``notebooks/*.py``: the files git tracks, and new ones it does not ignore)
the lines longer than 120 characters, and compares them with ``tests/data/line_width_baseline.json``
(``{path: count}``):

- a file with more long lines than its entry, or a file the baseline does not list with any long
  line, fails, naming the file and its long lines.  A renamed or split file is such a file: its
  long lines count as new until its entry is moved with ``--move`` (below), which moves no more
  long lines than the old entry allowed;
- a file with fewer long lines than its entry, or an entry whose file is gone, fails too, saying
  to lower the baseline with ``--shrink``: the baseline stays equal to the tree, so it can only go
  down and a line brought under 120 cannot be traded for a new long one elsewhere.

The test itself never writes the baseline.  Two commands do, from the repository root:

    .venv/bin/python tests/test_line_width.py --shrink
        lowers each entry to the file's count now and drops the entries at 0 and those of files
        that are gone; it never raises an entry or adds a file
    .venv/bin/python tests/test_line_width.py --move OLD NEW [NEW ...]
        for a file renamed or split: the long lines that left OLD (its entry less its count now)
        go to the NEW files, up to their counts now; refused when the NEW files hold more long
        lines than left OLD (wrap the rest); the baseline's total never grows, and the move shows in
        its diff

A line's length is its count of characters without the line end, as Python counts a str.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "data" / "line_width_baseline.json"
WIDTH = 120  # the house style
CEILING = 140  # ruff's E501, for every line
SHRINK = ".venv/bin/python tests/test_line_width.py --shrink"
MOVE = ".venv/bin/python tests/test_line_width.py --move OLD NEW [NEW ...]"
_DIRS = ("kernel_src", "scripts", "tests")
_SKIP = {"__pycache__", ".venv", "build", "dist"}  # outputs, for a tree outside git


def _in_scope(rel: str) -> bool:
    parts = rel.split("/")
    if not rel.endswith(".py") or _SKIP & set(parts) or any(p.endswith(".egg-info") for p in parts):
        return False
    return parts[0] in _DIRS or rel == "build_datasets.py" or (len(parts) == 2 and parts[0] == "notebooks")


def project_files() -> list[str]:
    """The Python files counted, relative to the root with ``/``: those git tracks and the new
    ones it does not ignore (what a commit would carry); without git, every file in scope."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *_DIRS,
                              "build_datasets.py", "notebooks"], cwd=ROOT, capture_output=True, check=True,
                             timeout=60).stdout.decode("utf-8", "surrogateescape")
        rels = [r for r in out.split("\0") if r]
    except (OSError, subprocess.SubprocessError):
        rels = [p.relative_to(ROOT).as_posix() for d in (*_DIRS, "notebooks") for p in (ROOT / d).rglob("*.py")]
        rels.append("build_datasets.py")
    return sorted({r for r in rels if _in_scope(r) and (ROOT / r).is_file()})  # a deleted, still tracked file is gone


def long_lines(rel: str) -> list[tuple[int, int]]:
    """(line number, length) of each line of ``rel`` longer than :data:`WIDTH`."""
    text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
    lines = (line.rstrip("\r") for line in text.split("\n"))
    return [(i, len(line)) for i, line in enumerate(lines, 1) if len(line) > WIDTH]


def measure() -> dict[str, list[tuple[int, int]]]:
    """The long lines of every counted file that has any."""
    return {rel: found for rel in project_files() if (found := long_lines(rel))}


def read_baseline() -> dict[str, int]:
    return json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.is_file() else {}


def write_baseline(counts: dict[str, int]) -> None:
    BASELINE.parent.mkdir(parents=True, exist_ok=True)
    BASELINE.write_text(json.dumps({k: counts[k] for k in sorted(counts) if counts[k] > 0}, indent=1) + "\n",
                        encoding="utf-8")


def _where(found: list[tuple[int, int]], most: int = 12) -> str:
    shown = ", ".join(f"{n} ({w} chars)" for n, w in found[:most])
    return shown + (f" and {len(found) - most} more" if len(found) > most else "")


def test_no_file_has_more_lines_over_120_than_its_baseline_allows():
    base, now = read_baseline(), measure()
    over = [f"{rel}: {len(found)} lines over {WIDTH} characters, the baseline allows {base.get(rel, 0)}"
            f"{'' if rel in base else ' (not in the baseline)'}; lines {_where(found)}"
            for rel, found in now.items() if len(found) > base.get(rel, 0)]
    if over:
        pytest.fail("\n".join(over) + f"\nwrap these lines to {WIDTH} characters. A file renamed or split from one the "
                    f"baseline lists counts its long lines as new until its entry moves: {MOVE}", pytrace=False)


def test_the_baseline_is_no_higher_than_the_tree():
    base, now = read_baseline(), measure()
    high = [f"{rel}: the baseline allows {n} lines over {WIDTH} characters, the file has "
            f"{len(now[rel]) if rel in now else 0}{'' if (ROOT / rel).is_file() else ' (the file is gone)'}"
            for rel, n in sorted(base.items()) if len(now.get(rel, ())) < n]
    if high:
        pytest.fail("\n".join(high) + f"\nlower the baseline (it only shrinks): {SHRINK}; for a file renamed or split, "
                    f"move its entry first: {MOVE}", pytrace=False)


def test_ruff_keeps_140_as_the_hard_ceiling():
    doc = tomllib.loads((ROOT / "ruff.toml").read_text(encoding="utf-8"))
    lint = doc.get("lint", {})
    assert doc.get("line-length") == CEILING and lint.get("line-length", CEILING) == CEILING, \
        f"ruff.toml: line-length must stay {CEILING}, the hard ceiling under the baseline of 120"
    assert "E501" in lint.get("select", ()) and "E501" not in lint.get("ignore", ()), "ruff.toml: E501 selected"


def shrink() -> list[str]:
    """Lower each entry to its file's count now; drop entries at 0 and of files that are gone."""
    base, now = read_baseline(), measure()
    new = {rel: min(n, len(now.get(rel, ()))) for rel, n in base.items()}
    write_baseline(new)
    return [f"{rel}: {n} -> {new[rel]}" for rel, n in sorted(base.items()) if new[rel] != n]


def move(old: str, targets: list[str]) -> list[str]:
    """The long lines that left ``old`` go to ``targets`` (a renamed or split file), up to their
    counts now; refused when the targets hold more than left ``old``."""
    base, now = read_baseline(), measure()
    if old not in base:
        raise SystemExit(f"error: {old} is not in {BASELINE.relative_to(ROOT)}")
    left = max(0, base[old] - len(now.get(old, ())))  # an OLD over its entry gives nothing away
    wanted = {t: max(0, len(now.get(t, ())) - base.get(t, 0)) for t in targets}
    if sum(wanted.values()) > left:
        raise SystemExit(f"error: {', '.join(targets)} hold {sum(wanted.values())} new lines over {WIDTH} characters, "
                         f"{left} left {old}: wrap the rest")
    base[old] -= left
    for t, n in wanted.items():
        base[t] = base.get(t, 0) + n
    write_baseline(base)
    return [f"{old}: -{left}"] + [f"{t}: +{n}" for t, n in wanted.items()]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--shrink"]:
        changes = shrink()
    elif len(args) >= 3 and args[0] == "--move":
        changes = move(args[1], args[2:])
    else:
        raise SystemExit(f"usage: {SHRINK} | {MOVE}")
    print("\n".join(changes) or "the baseline is as low as the tree already")
