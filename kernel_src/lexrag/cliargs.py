"""One check for every command line the kit parses (the CLI, ``build_datasets.py``, the harness and
the benchmarks): an option that takes its value once, given twice, is refused, where argparse
would keep the last and drop the first without a word."""

from __future__ import annotations

import argparse

__all__ = ["given_twice", "parse_once"]


def given_twice(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The first option of ``parser`` (of its chosen subcommand, when it has subcommands) that
    stores one value, or one list of values, and is given more than once in ``argv``."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is not None:
        command = next((t for t in argv if t in sub.choices), None)
        if command is None:
            return None
        parser = sub.choices[command]
    once = {o for a in parser._actions if type(a) is argparse._StoreAction for o in a.option_strings}
    given = [t.split("=", 1)[0] for t in argv if t.startswith("-") and t.split("=", 1)[0] in once]
    return next((o for o in given if given.count(o) > 1), None)


def parse_once(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, after refusing an option given twice (one usage line, exit 2)."""
    import sys

    twice = given_twice(parser, sys.argv[1:] if argv is None else list(argv))
    if twice:  # argparse keeps the last silently: which one was meant cannot be known
        parser.error(f"{twice} is given twice; give it once")
    return parser.parse_args(argv)
