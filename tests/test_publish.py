"""Publishing artifact folders: a build killed in the middle of a publish is rolled back (or
finished) by the next build, never leaving a half set or hidden old folders behind."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lexrag.io.publish import staged, staged_set

ROOT = Path(__file__).resolve().parents[1]


def _artifact(folder: Path, tag: str) -> None:
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(f'{{"artifact": "{folder.name}", "files": {{"data.txt": {{}}}}}}', encoding="utf-8")
    (folder / "data.txt").write_text(tag, encoding="utf-8")


def _killed_publish(out: Path, kill_at: int, names=("bm25", "corpus")) -> None:
    """Publish a new set of ``names`` into ``out`` in a child process that dies (``os._exit``, no
    cleanup, as under SIGKILL) at its ``kill_at``-th rename or journal step."""
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from lexrag.io import publish
        calls = [0]
        real_replace, real_rmtree = os.replace, publish.shutil.rmtree
        def step(fn):
            def inner(*a, **k):
                calls[0] += 1
                if calls[0] == {kill_at}:
                    os._exit(9)
                return fn(*a, **k)
            return inner
        publish.os.replace = step(real_replace)
        publish.shutil.rmtree = step(real_rmtree)
        with publish.staged_set({str(out)!r}) as tmp:
            for name in {list(names)!r}:
                d = tmp / name
                d.mkdir()
                (d / "params.json").write_text('{{"files": {{}}}}')
                (d / "data.txt").write_text("new")
    """)
    rc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={"PYTHONPATH": str(ROOT / "kernel_src"),
                                                                       "PATH": "/usr/bin:/bin"}).returncode
    assert rc == 9


def _state(out: Path) -> dict:
    return {p.name: (p / "data.txt").read_text() for p in sorted(out.iterdir()) if p.is_dir() and not p.name.startswith(".")}


@pytest.mark.parametrize("kill_at", [2, 3, 4])
def test_a_build_killed_while_moving_folders_is_rolled_back_by_the_next_build(tmp_path, kill_at):
    """Killed after one or both old folders were set aside, or after the first new one moved in:
    the next build puts the whole old set back before it builds (and says so)."""
    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    _artifact(out / "corpus", "old")
    _killed_publish(out, kill_at)
    assert _state(out) != {"bm25": "old", "corpus": "old"}  # a half set: a run over it would fail
    with pytest.warns(UserWarning, match="killed while publishing: the earlier .* is put back"):
        with staged_set(out):
            assert _state(out) == {"bm25": "old", "corpus": "old"}  # put back before the new build runs
    assert _state(out) == {"bm25": "old", "corpus": "old"}
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_a_build_killed_while_removing_the_old_folders_finishes_the_removal(tmp_path):
    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    _artifact(out / "corpus", "old")
    _killed_publish(out, kill_at=5)  # 2 set aside, 2 moved in, the journal marked done; killed at the first removal
    assert _state(out) == {"bm25": "new", "corpus": "new"}
    with staged_set(out):
        pass
    assert _state(out) == {"bm25": "new", "corpus": "new"}
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_an_old_folder_set_aside_without_a_journal_is_put_back_or_left_alone(tmp_path):
    """Left by a build of an earlier version (no journal): put back where its artifact is missing,
    left alone with a warning where a newer one is in place (no journal says it is a build's)."""
    out = tmp_path / "arts"
    _artifact(out / ".corpus.old-999999999-abcd1234", "old")
    _artifact(out / "bm25", "new")
    _artifact(out / ".bm25.old-999999999-abcd1234", "old")
    with pytest.warns(UserWarning, match="the earlier .*corpus is put back"):
        with staged(out / "graph") as folder:
            (folder / "params.json").write_text("{}")
    assert (out / "corpus" / "data.txt").read_text() == "old"
    assert (out / "bm25" / "data.txt").read_text() == "new"
    assert sorted(p.name for p in out.iterdir()) == [".bm25.old-999999999-abcd1234", "bm25", "corpus", "graph"]


def test_a_publish_waits_for_one_under_way_in_the_same_folder(tmp_path, caplog):
    """Two builds into one folder publish one after the other: the second waits for the lock the
    first holds (a flock on the folder, released also when a process is killed)."""
    out = tmp_path / "arts"
    _artifact(out / "corpus", "old")
    script = textwrap.dedent(f"""
        import fcntl, os, time
        from pathlib import Path
        out = Path({str(out)!r})
        fd = os.open(out, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        (out / "holding").write_text("")
        for _ in range(6000):  # until the test says its publish waits (or ten minutes)
            if (out / "go").exists():
                break
            time.sleep(0.1)
        (out / "released").write_text("")
    """)

    class Go(logging.Handler):  # once the publish says it waits, the child may let go
        def emit(self, record):
            if "waiting for it to finish" in record.getMessage():
                (out / "go").write_text("")

    child = subprocess.Popen([sys.executable, "-c", script])
    go = Go()
    logging.getLogger("lexrag").addHandler(go)
    try:
        while not (out / "holding").exists():  # until the child holds the lock
            assert child.poll() is None, "the child ended before it held the lock"
            time.sleep(0.05)
        with caplog.at_level("WARNING"):
            with staged(out / "bm25") as folder:
                (folder / "params.json").write_text("{}")
        assert (out / "released").exists()  # it published only once the other let go
        assert "another build is publishing there; waiting for it to finish" in caplog.text  # said, not a silent wait
    finally:
        logging.getLogger("lexrag").removeHandler(go)
        (out / "go").write_text("")
        child.wait(timeout=60)


def test_killed_publish_then_another_build_keeps_the_later_build_s_set(tmp_path):
    """A build killed mid-publish, then a build of a new set: the new set stands, and a third
    build rolls nothing back over it."""
    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    _artifact(out / "corpus", "old")
    _killed_publish(out, kill_at=3)
    with pytest.warns(UserWarning, match="put back"):
        with staged_set(out) as tmp:
            for name in ("bm25", "corpus"):
                _artifact(tmp / name, "later")
    assert _state(out) == {"bm25": "later", "corpus": "later"}
    with staged_set(out):
        pass
    assert _state(out) == {"bm25": "later", "corpus": "later"}


def test_a_torn_journal_goes_and_hidden_folders_of_other_names_are_the_user_s(tmp_path):
    out = tmp_path / "arts"
    _artifact(out / "notes", "mine")
    _artifact(out / ".notes.old-2021-03", "draft")  # the user's, not named as a publish names its folders
    _artifact(out / ".thesis.old-4242-final", "chapter")
    (out / ".lexrag-publish-999999999-abcd1234.json").write_text("")  # killed while writing it: nothing was moved
    with staged_set(out):
        pass
    assert sorted(p.name for p in out.iterdir()) == [".notes.old-2021-03", ".thesis.old-4242-final", "notes"]


def test_a_hostile_or_unreadable_journal_moves_nothing_outside_the_folder(tmp_path):
    out = tmp_path / "arts"
    victim = tmp_path / "victim"
    _artifact(victim, "mine")
    _artifact(out / "corpus", "new")
    _artifact(out / ".corpus.old-999999999-abcd1234", "old")
    (out / ".lexrag-publish-999999999-abcd1234.json").write_text('{"moved": ["../victim", "corpus"]}')
    os.mkfifo(out / ".lexrag-publish-999999998-abcd1234.json")  # a FIFO: refused, not blocked on
    with pytest.warns(UserWarning, match="the journal of a killed build's publish, cannot be read") as said:
        with staged_set(out) as tmp:
            _artifact(tmp / "graph", "built")  # recovered when the build starts and again when it publishes
    assert (victim / "data.txt").read_text() == "mine"
    assert sum("publish-999999999" in str(w.message) for w in said) == 1  # recovered before and at publish: said once
    assert (out / "corpus" / "data.txt").read_text() == "new"  # the journal named no plain folder: nothing rolled back
    assert (out / ".corpus.old-999999999-abcd1234" / "data.txt").read_text() == "old"  # left for the user, as the warning says


def test_a_run_over_a_half_published_set_says_where_the_earlier_one_is(tmp_path):
    from lexrag.artifacts import read_params
    from lexrag.errors import ArtifactError

    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    _artifact(out / "corpus", "old")
    _killed_publish(out, kill_at=3)  # both set aside, neither new one moved in
    with pytest.raises(ArtifactError, match=r"corpus is missing, and \.corpus\.old-\d+-[0-9a-f]{8} beside it holds the "
                                            r"earlier one, set aside by a build killed while publishing: the next build"):
        read_params(out / "corpus", "corpus")


def test_an_old_folder_whose_place_holds_something_else_is_kept_on_every_build(tmp_path):
    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    _artifact(out / "corpus", "old")
    _killed_publish(out, kill_at=3)  # both set aside
    (out / "corpus").mkdir()
    (out / "corpus" / "mine.txt").write_text("the user's")  # not an artifact: not the folder the build moved in
    for _ in range(2):
        with pytest.warns(UserWarning, match="the earlier corpus set aside by a killed build, is kept"):
            with staged_set(out):
                pass
        assert [p.name for p in out.iterdir() if p.name.startswith(".corpus.old-")]  # never removed
    assert (out / "corpus" / "mine.txt").read_text() == "the user's"


def test_a_dataset_folder_rebuilt_by_a_build_that_writes_no_metadata_keeps_its_own(tmp_path):
    out = tmp_path / "ds"
    _artifact(out / "bm25", "old")
    (out / "bm25" / "params.json").write_text('{"artifact": "bm25", "files": {"data.txt": {}}}')
    (out / "bm25" / "dataset-metadata.json").write_text('{"id": "me/lexrag-bm25"}')
    with staged(out / "bm25") as folder:
        (folder / "params.json").write_text("{}")
    assert (out / "bm25" / "dataset-metadata.json").read_text() == '{"id": "me/lexrag-bm25"}'


def test_a_linked_artifact_folder_is_replaced_by_a_folder_and_its_target_kept(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "bm25"
    _artifact(elsewhere, "mine")
    out = tmp_path / "arts"
    out.mkdir()
    (out / "bm25").symlink_to(elsewhere)
    with staged(out / "bm25") as folder:
        (folder / "params.json").write_text("{}")
    assert (out / "bm25").is_dir() and not (out / "bm25").is_symlink()
    assert (elsewhere / "data.txt").read_text() == "mine"
    assert [p.name for p in out.iterdir()] == ["bm25"]  # no link left behind under a hidden name


def test_a_full_disk_while_writing_the_journal_leaves_no_journal(tmp_path, monkeypatch):
    out = tmp_path / "arts"
    _artifact(out / "bm25", "old")
    real = Path.write_text

    def full(self, *a, **k):
        if self.name.startswith(".lexrag-publish-"):
            real(self, "")
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError):
        with staged(out / "bm25") as folder:
            (folder / "params.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == ["bm25"] and (out / "bm25" / "data.txt").read_text() == "old"


def test_a_failed_first_build_leaves_no_empty_folders_it_made(tmp_path):
    """As the CLI's build: a notebook's build into a folder that did not exist, failing, leaves
    nothing that looks like output; a folder that was there stays."""
    with pytest.raises(ValueError):
        with staged(tmp_path / "new" / "arts" / "corpus") as tmp:
            (tmp / "part.txt").write_text("half")
            raise ValueError("the laws file is not UTF-8")
    assert not (tmp_path / "new").exists()
    (tmp_path / "there").mkdir()
    with pytest.raises(ValueError):
        with staged(tmp_path / "there" / "corpus"):
            raise ValueError("again")
    assert list(tmp_path.iterdir()) == [tmp_path / "there"] and not list((tmp_path / "there").iterdir())
    with pytest.raises(ValueError):  # a set of artifacts built together, the same way
        with staged_set(tmp_path / "new" / "arts") as stage:
            (stage / "corpus").mkdir()
            raise ValueError("the courts file is not UTF-8")
    assert list(tmp_path.iterdir()) == [tmp_path / "there"]


def test_a_file_system_without_locks_is_said_for_a_publish_and_a_run_s_folder(tmp_path, monkeypatch):
    import errno
    import fcntl

    from lexrag.io.outputs import claim_folder

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(UserWarning, match="the file system refuses a lock .*; do not build into it from two processes at once"):
        with staged(tmp_path / "arts" / "bm25") as folder:
            (folder / "params.json").write_text("{}")
    assert (tmp_path / "arts" / "bm25" / "params.json").is_file()  # built all the same
    (tmp_path / "out").mkdir()
    with pytest.warns(UserWarning, match="out_dir .*out: the file system refuses a lock .*do not write outputs there from two runs"):
        claim_folder(tmp_path / "out", "out_dir")
