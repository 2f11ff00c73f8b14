#!/usr/bin/env python
"""The package's shape in a few lines: the modules at the root of kernel_src/lexrag (at most ten),
the modules over 400 lines (a warning: does one hold more than one concern?) and the import circles
(none; imports inside functions count).  Exit 1 when the root holds more than ten modules or a
circle exists.  The import layers are checked by tests/test_stage_protocol.py.

    python scripts/check_layout.py
"""

import argparse
import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "kernel_src" / "lexrag"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    root = sorted(p.name for p in PKG.glob("*.py"))
    lines = {p.relative_to(PKG).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in PKG.rglob("*.py")}
    mods = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): p for p in PKG.rglob("*.py")}
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = ([node.module] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.module else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            graph[m] |= {n for n in names if n in mods and n != m and not m.startswith(n + ".")}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for n in graph[todo.pop()] - seen:
                seen.add(n)
                todo.append(n)
        return seen

    circles = sorted(m for m in graph if m in reach(m))
    over = {k: v for k, v in sorted(lines.items()) if v > 400}
    print(f"{len(root)} modules at the root (at most 10): {', '.join(root)}")
    print(f"{len(lines)} modules, {sum(lines.values())} lines; over 400 lines: "
          + (", ".join(f"{k} ({v})" for k, v in over.items()) or "none"))
    print(f"import circles: {', '.join(circles) or 'none'}")
    return 1 if len(root) > 10 or circles else 0


if __name__ == "__main__":
    sys.exit(main())
