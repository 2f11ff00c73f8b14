"""The checks every command line the kit parses runs (the CLI, ``build_datasets.py``, the harness
and the benchmarks): an option that takes its value once, given twice, is refused, where argparse
would keep the last and drop the first without a word; and an option given an empty value (an
empty shell variable) is refused, where the tool would read it as not given and take its default.
Beside them, the standard output a tool reports on, with its write errors told apart from a file's."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["given_twice", "given_empty", "parse_once", "MarkedStdout", "drop_stdout"]


def _chosen(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser | None:
    """``parser``, or the subcommand's parser ``argv`` chooses (None when it chooses none)."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None:
        return parser
    command = next((t for t in argv if t in sub.choices), None)
    return sub.choices[command] if command is not None else None


def given_twice(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The first option of ``parser`` (of its chosen subcommand, when it has subcommands) that
    stores one value, or one list of values, and is given more than once in ``argv``."""
    parser = _chosen(parser, argv)
    if parser is None:
        return None
    once = {a.dest: a.option_strings[-1] for a in parser._actions if type(a) is argparse._StoreAction and a.option_strings}
    given = [d for d in _given(parser, argv) if d in once]
    return next((once[d] for d in given if given.count(d) > 1), None)


def _given(parser: argparse.ArgumentParser, argv: list[str]) -> list[str | None]:
    """The dest of each option token in ``argv``, abbreviations resolved (None: no option of ``parser``)."""
    dest = {o: a.dest for a in parser._actions for o in a.option_strings}
    return [_option(t.split("=", 1)[0], dest, parser.allow_abbrev) for t in argv if t.startswith("-")]


def _option(token: str, dest: dict[str, str], abbrev: bool) -> str | None:
    """The option ``token`` names, as argparse reads it: itself, or the one option it is a prefix of
    (``--quer`` for ``--queries``)."""
    if token in dest:
        return dest[token]
    hits = {d for o, d in dest.items() if abbrev and token.startswith("--") and o.startswith(token)}
    return hits.pop() if len(hits) == 1 else None


def given_empty(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> str | None:
    """The first option of ``parser`` (or its chosen subcommand) that stores one text value and was
    given a blank one: ``--json ''`` would read as no --json, ``--artifacts ''`` as a build of its own."""
    parser = _chosen(parser, argv)
    if parser is None:
        return None
    given = set(_given(parser, argv))
    for a in parser._actions:
        value = getattr(args, a.dest, None)
        if type(a) is not argparse._StoreAction:
            continue
        if not a.option_strings and isinstance(value, str) and not value.strip():  # `show-metrics ''`: read as "."
            return f"the argument {a.metavar or a.dest}"
        if a.option_strings and a.nargs is None and isinstance(value, str) and not value.strip() and value != a.default:
            return a.option_strings[-1]
        if a.option_strings and a.nargs == "*" and value == [] and (a.default != [] or a.dest in given):
            return a.option_strings[-1]  # `--variants $V` with V empty: no values, read as the default list (or none)
    return None


def parse_once(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, after refusing an option given twice, and then one given a blank
    value (one usage line, exit 2)."""
    try:  # removed while the shell was in it: every relative path, and some libraries' own loading, would fail
        os.getcwd()
    except FileNotFoundError:
        parser.error("the current folder no longer exists (removed while the shell was in it): cd into a folder that "
                     "exists and run again")
    argv_ = sys.argv[1:] if argv is None else [str(t) for t in argv]
    twice = given_twice(parser, argv_)
    if twice:  # argparse keeps the last silently: which one was meant cannot be known
        parser.error(f"{twice} is given twice; give it once")
    args = parser.parse_args(argv)
    empty = given_empty(parser, args, argv_)
    if empty:  # an empty shell variable: the tool would take the option as not given
        fix = "give a path or a value" + ("" if empty.startswith("the argument") else ", or leave the option out")
        (_chosen(parser, argv_) or parser).error(f"{empty} is empty: {fix}")
    return args


class MarkedStdout:
    """Standard output whose write errors carry ``stdout = True``, so a full or closed terminal
    stream is told apart from a file the command writes."""

    def __init__(self, stream):
        self._stream = stream

    def _marked(self, call, *a):
        try:
            return call(*a)
        except OSError as e:
            e.stdout = True
            raise

    def write(self, text):
        return self._marked(self._stream.write, text)

    def flush(self):
        return self._marked(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def drop_stdout() -> None:
    """Point standard output at the null device, so what is still buffered does not fail again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
