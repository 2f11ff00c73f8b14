"""Every command the README and docs/ give (`python -m lexrag ...`, `python scripts/... .py`,
`python build_datasets.py ...`) parses with its target's own argparse, so a renamed or removed
option shows up here rather than in a user's terminal.  A command is only parsed, never run:
argparse's ``parse_args`` is wrapped to stop right after a successful parse.

What the docs write for a reader is normalised first: ``[--opt X]`` is an option (its first
alternative where it reads ``[--a | --b]``), ``...`` and ``$VAR`` stand for arguments left out
(then only the options given are checked, not the required ones), ``# ...`` is a comment.  A
fenced block that checks out a commit (``git checkout 4f42850``) documents a command as it ran
then: it is not parsed against today's code."""

from __future__ import annotations

import argparse
import ast
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_TARGET = re.compile(r"python3? (?:-m lexrag(?:\.gpu_check)?|scripts/[\w.]+\.py|build_datasets\.py)(?![\w.])")


def _commands(path: Path) -> list[tuple[str, str]]:
    """(where, command) of every command in a file: in fenced blocks one per line (with ``\\``
    continuations), in the prose the inline code spans (which may wrap lines)."""
    out, prose, fenced, block, then = [], [], False, [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced, then = not fenced, False
            continue
        if fenced and line.lstrip().startswith("git checkout "):
            then = True  # the rest of the block ran at an earlier commit
        if then:
            continue
        if not fenced:
            prose.append(line)
            continue
        block.append(line.rstrip())
        if block[-1].endswith("\\"):
            continue
        text = " ".join(b.rstrip("\\").strip() for b in block)
        block = []
        m = _TARGET.search(text)
        if m:
            out.append((f"{path.name}:{n}", text[m.start():]))
    for span in re.findall(r"`([^`]+)`", " ".join(prose)):
        m = _TARGET.match(span.strip())
        if m:
            out.append((f"{path.name} (prose)", span.strip()))
    return out


COMMANDS = [c for p in DOCS for c in _commands(p) if " COMMAND" not in c[1]]  # "python -m lexrag COMMAND": the pattern


class _Parsed(Exception):
    pass


def _argv(command: str) -> tuple[str, list[str], bool]:
    """(target, argv, elided) of a documented command."""
    command = re.sub(r"\[([^\]]*?)\s*\|[^\]]*\]", r"\1", command)  # [--a X | --b]: the first alternative
    command = re.sub(r"\[(--?[^\]]*)\]", r"\1", command)  # [--opt X]: the option
    tokens = shlex.split(command, comments=True)
    # "$Q" after an option is its value; anywhere else, like "...", arguments left out
    tokens = ["VALUE" if t.startswith("$") and tokens[i - 1].startswith("--") else t for i, t in enumerate(tokens)]
    elided = any(t == "..." or t.startswith("$") for t in tokens)
    tokens = [t for t in tokens if t != "..." and not t.startswith("$")]
    if tokens[1] == "-m":
        return tokens[2], tokens[3:], elided
    return tokens[1], tokens[2:], elided


def _parse(target: str, argv: list[str], elided: bool, monkeypatch) -> str | None:
    """None when argv parses, else argparse's message."""
    errors: list[str] = []
    parsed: list[bool] = []
    real = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, args=None, namespace=None):
        parsed.append(True)
        ns, extra = real(self, args, namespace)
        if self.prog.split()[0] != "pytest":  # the target's parser, not pytest's
            if extra:
                errors.append(f"unrecognized arguments: {' '.join(extra)}")
            raise _Parsed(extra)
        return ns, extra

    def error(self, message):
        if elided and "the following arguments are required" in message:
            raise _Parsed([])
        errors.append(message)
        raise _Parsed(None)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)
    monkeypatch.setattr(argparse.ArgumentParser, "error", error)
    try:
        if target.startswith("lexrag"):  # python -m lexrag, python -m lexrag.cli.gpu_check
            import importlib

            importlib.import_module("lexrag.cli" if target == "lexrag" else target).main(argv)
        else:
            monkeypatch.setattr(sys, "argv", [str(ROOT / target), *argv])
            monkeypatch.syspath_prepend(str((ROOT / target).parent))
            runpy.run_path(str(ROOT / target), run_name="__main__")
    except _Parsed:
        pass
    except SystemExit:  # --help and the like
        pass
    if not parsed:  # a script that reads sys.argv itself ran instead of being parsed: it must use argparse
        errors.append("the target parses no arguments with argparse")
    return errors[0] if errors else None


def test_the_docs_give_commands():
    targets = {_argv(c)[0] for _, c in COMMANDS}
    assert len(COMMANDS) > 40 and {"lexrag", "build_datasets.py", "scripts/quality.py"} <= targets


@pytest.mark.parametrize("where,command", COMMANDS, ids=[f"{w}:{c[:50]}" for w, c in COMMANDS])
def test_a_documented_command_parses(where, command, monkeypatch):
    target, argv, elided = _argv(command)
    assert (ROOT / target).is_file() or target.startswith("lexrag"), f"{where}: {target} does not exist"
    error = _parse(target, argv, elided, monkeypatch)
    assert error is None, f"{where}: `{command}` does not parse: {error}"


def test_a_wrong_option_or_a_missing_argument_is_caught(monkeypatch):
    assert "unrecognized arguments: --no-such" in _parse("lexrag", ["evaluate", "--gold", "g.csv", "--pred", "p.csv", "--no-such"],
                                                         False, monkeypatch)
    assert "required: --work" in _parse("scripts/bench_inference.py", [], False, monkeypatch)
    assert _parse("scripts/bench_inference.py", [], True, monkeypatch) is None  # "..." stands for what is left out
    assert _argv("python -m lexrag build --laws L [--courts C | --no-courts] ... --out A  # comment") == \
        ("lexrag", ["build", "--laws", "L", "--courts", "C", "--out", "A"], True)


def test_the_readme_python_examples_run(demo_artifacts, capsys):
    """The README's Python examples (the Searcher, then the pipeline's parts), run as written over
    the demo artifacts."""
    from lexrag.index.corpus import Corpus

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2, "the README has two Python examples"
    corpus = Corpus(demo_artifacts / "corpus")
    for i, block in enumerate(blocks):
        code = block.replace('"out/demo/artifacts"', repr(str(demo_artifacts)))
        exec(compile(code, "README.md", "exec"), {})
        printed = capsys.readouterr().out.strip().splitlines()
        cited = ast.literal_eval(printed[-1])  # the last line: the citations a run emits
        assert cited and len(cited) <= 5 and not corpus.lacks(cited), printed
        if i == 0:  # three hits, each "rank citation score text"
            hits = printed[:-1]
            assert [h.split()[0] for h in hits] == ["1", "2", "3"]
            assert all(any(h.split(" ", 1)[1].startswith(c + " ") for c in cited) for h in hits[: len(cited)])
        else:
            assert len(cited) == 3


# the documented `lexrag` verbs that run in seconds on the demo artifacts, and what their
# placeholders stand for there (the files a reader would have)
_CHEAP = {"run", "evaluate", "validate-submission", "config"}


def _on_demo(argv: list[str], demo_artifacts: Path, tmp_path: Path) -> list[str] | None:
    """argv with the docs' placeholders put on the demo (None: it names something the demo lacks)."""
    queries = str(ROOT / "demo" / "queries_demo.csv")
    subs = {"ARTIFACTS": str(demo_artifacts), "out/demo/artifacts": str(demo_artifacts), "test.csv": queries,
            "val.csv": queries, "demo/queries_demo.csv": queries, "submission.csv": str(tmp_path / "submission.csv"),
            "g.csv": str(tmp_path / "submission.csv"), "CFG.yaml": str(ROOT / "demo" / "config.yaml"),
            "demo/config.yaml": str(ROOT / "demo" / "config.yaml")}
    out = []
    for i, t in enumerate(argv):
        if t in subs:
            out.append(subs[t])
        elif t.endswith(".trec") and "/" not in t:  # a run file written, then read: in the test's folder
            out.append(str(tmp_path / t))
        elif ("/" in t or t.endswith((".csv", ".yaml", ".json"))) and not (i and argv[i - 1] == "--set"):
            return None  # a file of the reader's own
        else:
            out.append(t)
    if argv[0] == "run" and "--artifacts" not in argv:
        return None  # the resolver's default folder
    return out


def test_the_cheap_documented_commands_run_on_the_demo(demo_artifacts, tmp_path, monkeypatch, capsys):
    """Each `lexrag run/evaluate/validate-submission/config` command of README.md and docs/ that
    the demo can answer, run as written (its placeholders on the demo's files): exit 0."""
    from lexrag.cli import main

    monkeypatch.setenv("CI", "true")
    ran = []
    runs_first = sorted(COMMANDS, key=lambda wc: _argv(wc[1])[1][:1] != ["run"])  # evaluate reads what run wrote
    for where, command in runs_first:
        target, argv, elided = _argv(command)
        if target != "lexrag" or elided or not argv or argv[0] not in _CHEAP:
            continue
        demo = _on_demo(argv, demo_artifacts, tmp_path)
        if demo is None:
            continue
        rc = main(["-q", *demo])
        out = capsys.readouterr()
        assert rc == 0, f"{where}: `{command}` exited {rc}: {out.err[-400:]}"
        ran.append(where)
    assert len(ran) >= 6, ran
