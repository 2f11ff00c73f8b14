import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env=None):
    return subprocess.run([sys.executable, str(ROOT / "build_datasets.py"), *map(str, args)],
                          capture_output=True, text=True, env={**os.environ, "CI": "true", **(env or {})})


@pytest.fixture
def manifest(tmp_path):
    m = tmp_path / "manifest.yaml"
    shutil.copy(ROOT / "artifacts_manifest.yaml", m)
    return m


def test_rebuild_records_and_check_names_mismatches(tmp_path, manifest, tiny_inputs):
    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--courts", courts, "--only", "corpus,bm25")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout and f"recorded in {manifest} (rewritten in place)" in r.stderr
    doc = yaml.safe_load(manifest.read_text())
    corpus = next(a for a in doc["artifacts"] if a["name"] == "corpus")
    assert corpus["doc_count"] == 10 and corpus["version"]
    assert {f["path"] for f in corpus["files"]} == {"corpus.parquet", "params.json", "build_report.json", "texts.bin", "text_offsets.npy",
                                                   "citation_keys.parquet"}
    meta = json.loads((out / "bm25" / "dataset-metadata.json").read_text())
    assert meta["id"] == "lexrag/lexrag-bm25"
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus,,bm25")  # a comma too many: said
    assert r.returncode == 0 and "(corpus, bm25 checked)" in r.stdout and "an empty name between its commas" in r.stderr
    upper = tmp_path / "upper.yaml"  # the same digests in upper-case hex: the same files
    upper.write_text(re.sub(r"\b[0-9a-f]{64}\b", lambda m: m.group(0).upper(), manifest.read_text()), encoding="utf-8")
    assert upper.read_text() != manifest.read_text()
    r = run("--manifest", upper, "--out", out, "--check", "--only", "corpus,bm25")
    assert r.returncode == 0, r.stdout

    (out / "bm25" / "dataset-metadata.json").write_text(json.dumps({**meta, "id": "other/x"}), encoding="utf-8")
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus,bm25")  # an upload would go elsewhere
    assert r.returncode == 1 and "bm25: dataset-metadata.json's id is 'other/x', the manifest's dataset 'lexrag-bm25'" in r.stdout
    (out / "bm25" / "dataset-metadata.json").write_text(json.dumps({**meta, "id": "me/lexrag-bm25"}), encoding="utf-8")
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus,bm25")  # another owner (--owner) is fine
    assert r.returncode == 0, r.stdout

    (out / "bm25" / "vocab.index.json").write_text("{}", encoding="utf-8")
    (out / "corpus" / "extra.txt").write_text("x", encoding="utf-8")
    (out / "corpus" / "build_report.json").unlink()
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus,bm25")
    assert r.returncode == 1
    assert "bm25: vocab.index.json has size 2" in r.stdout
    assert "corpus: extra.txt is not in the manifest" in r.stdout
    assert "corpus: build_report.json is missing" in r.stdout
    r = run("--manifest", manifest, "--out", tmp_path / "none", "--check", "--only", "corpus")
    assert r.returncode == 1 and "folder" in r.stdout and "is missing" in r.stdout
    # an input only the corpus build reads, given without it: said, not silently dropped
    abbrev = tmp_path / "abbrev.json"
    abbrev.write_text(json.dumps([{"id": "OR", "abbrev": {"de": "OR", "fr": "CO"}}]), encoding="utf-8")
    r = run("--manifest", manifest, "--out", tmp_path / "ds2", "--laws", laws, "--only", "corpus,bm25", "--abbreviations", abbrev)
    assert r.returncode == 0 and "--abbreviations" not in r.stderr
    assert json.loads((tmp_path / "ds2" / "corpus" / "code_aliases.json").read_text()) == {"CO": "OR"}
    r = run("--manifest", manifest, "--out", tmp_path / "ds2", "--only", "bm25", "--abbreviations", abbrev)
    assert r.returncode == 0 and "--abbreviations: read only when the corpus is built" in r.stderr


def _fake_kaggle(tmp_path: Path, body: str) -> tuple[Path, dict]:
    """A stand-in ``kaggle`` CLI (a shell script of ``body``) in ``tmp_path/bin``: its path, and the
    PATH that finds it first."""
    fake = tmp_path / "bin" / "kaggle"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    return fake, {"PATH": f"{fake.parent}:{os.environ['PATH']}"}


def test_upload_calls_kaggle_cli(tmp_path, manifest, tiny_inputs):
    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus").returncode == 0
    log = tmp_path / "kaggle.log"
    # the dataset does not exist yet (the API answers 404), so create must be called
    _, path = _fake_kaggle(tmp_path, f"echo \"$@\" >> {log}\n[ \"$2\" = status ] && "
                           "{ echo '404 Client Error: Not Found for url: https://www.kaggle.com/api/v1/datasets/status/x' >&2; "
                           "exit 1; }\nexit 0")
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus", "--upload", env=path)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "datasets status lexrag/lexrag-corpus"
    assert calls[1] == f"datasets create -p {out / 'corpus'} --dir-mode zip"
    # a build with --upload uploads what it built (and checked), not the artifacts it did not build
    log.unlink()
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus", "--upload", env=path)
    assert r.returncode == 0 and "(corpus checked)" in r.stdout, r.stderr
    assert log.read_text().splitlines() == ["datasets status lexrag/lexrag-corpus", f"datasets create -p {out / 'corpus'} --dir-mode zip"]
    # no answer about the dataset (no network): nothing is created anew, and the error says why
    log.unlink()
    _fake_kaggle(tmp_path, f"echo \"$@\" >> {log}\n[ \"$2\" = status ] && "
                 "{ echo 'Max retries exceeded with url: /api/v1/datasets/status/x' >&2; exit 1; }\nexit 0")
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus", "--upload", env=path)
    assert r.returncode == 2 and "kaggle datasets status lexrag/lexrag-corpus failed: Max retries exceeded" in r.stderr
    assert log.read_text().splitlines() == ["datasets status lexrag/lexrag-corpus"]


def test_check_of_unbuilt_manifest_is_a_failure(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("artifacts:\n- name: corpus\n  dataset: x\n  files: []\n", encoding="utf-8")
    r = run("--manifest", m, "--out", tmp_path, "--check")
    assert r.returncode == 1 and "nothing is built in" in r.stdout
    r = run("--manifest", m, "--out", tmp_path, "--check", "--only", "corpus")
    assert r.returncode == 1 and "never built" in r.stdout
    r = run("--manifest", tmp_path / "nope.yaml", "--out", tmp_path, "--check")
    assert r.returncode == 2 and "manifest not found" in r.stderr


def test_llm_cache_ships_as_a_dataset_and_checks(tmp_path, manifest):
    from lexrag.llm.cache import LLMCache

    c = LLMCache(tmp_path / "live_cache")
    for i in (3, 1, 2):
        c.put(f"k{i}", "m", "translate@v1:abc", "h", {"max_new_tokens": 8}, f"out {i}", 5, 2, 0.1)
    c.close()
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--only", "llm_cache")
    assert r.returncode == 2 and "needs --llm-cache" in r.stderr
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--only", "llm_cache", "--llm-cache", tmp_path / "live_cache")
    assert r.returncode == 0, r.stderr
    entry = next(a for a in yaml.safe_load(manifest.read_text())["artifacts"] if a["name"] == "llm_cache")
    assert entry["doc_count"] == 3 and {f["path"] for f in entry["files"]} == {"cache.sqlite", "params.json"}
    assert run("--manifest", manifest, "--out", tmp_path / "ds", "--check", "--only", "llm_cache").returncode == 0
    assert LLMCache(None, readonly=[tmp_path / "ds" / "llm_cache"]).get("k2")["output"] == "out 2"


def test_wrong_selections_outputs_and_manifests_are_one_line_errors_before_any_build(tmp_path, manifest, tiny_inputs):
    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpsu")
    assert r.returncode == 2 and "unknown artifact(s) corpsu; known: corpus, bm25" in r.stderr and not out.exists()
    r = run("--manifest", manifest, "--out", out, "--check", "--only", " , ")
    assert r.returncode == 2 and "names no artifact" in r.stderr
    # a missing training file fails before the corpus is built, not after it was published
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus,prior", "--train", tmp_path / "nope.csv")
    assert r.returncode == 2 and "--train" in r.stderr and "file not found" in r.stderr and not (out / "corpus").exists()
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    r = run("--manifest", manifest, "--out", a_file, "--laws", laws, "--only", "corpus")
    assert r.returncode == 2 and "is a file" in r.stderr
    # a folder of other files where an artifact goes is never replaced, and that is known before any
    # build: the corpus is not built (and published) only for the bm25 folder to be refused later
    mine = out / "bm25"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus,bm25")
    assert r.returncode == 2 and f"{mine} holds files but no params.json" in r.stderr
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine" and not (out / "corpus").exists()
    for text, expected in (("artifacts: [\n", "not valid YAML"), (b"\xff\xfeartifacts", "not UTF-8 text"),
                           ("artifacts:\n- name: corpus\n  dataset: x\n  files:\n  - path: a\n    size: 1\n", "path, size and sha256")):
        bad = tmp_path / "bad.yaml"
        bad.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        r = run("--manifest", bad, "--out", out, "--check")
        assert r.returncode == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # --check reads no inputs: flags that would be ignored are named
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus", "--laws", laws)
    assert "--laws not read: --check builds nothing" in r.stderr


def test_check_names_a_missing_dataset_metadata(tmp_path, manifest, tiny_inputs):
    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus").returncode == 0
    (out / "corpus" / "dataset-metadata.json").unlink()
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus")
    assert r.returncode == 1 and "corpus: dataset-metadata.json is missing or not JSON" in r.stdout


def test_check_lists_a_damaged_params_json_among_the_other_problems(tmp_path, manifest, tiny_inputs):
    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus,bm25").returncode == 0
    (out / "corpus" / "params.json").write_text("{not json", encoding="utf-8")
    (out / "bm25" / "extra.txt").write_text("x", encoding="utf-8")
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus,bm25")
    assert r.returncode == 1, r.stderr
    assert "MISMATCH corpus: params.json has size" in r.stdout and "MISMATCH bm25: extra.txt is not in the manifest" in r.stdout


def test_check_without_only_checks_what_was_built_and_upload_reads_the_owner(tmp_path, manifest, tiny_inputs):
    """`--check --out DIR` as the README gives it, after building some of the datasets: what is there
    is checked, what was never built here is named; `--check --upload --owner ME` uploads as ME."""
    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus,bm25").returncode == 0
    r = run("--manifest", manifest, "--out", out, "--check")
    assert r.returncode == 0 and "(corpus, bm25 checked)" in r.stdout, r.stdout + r.stderr
    assert "not built in" in r.stderr and "embeddings" in r.stderr and "llm_cache" in r.stderr
    r = run("--manifest", manifest, "--out", tmp_path / "empty", "--check")
    assert r.returncode == 1 and "nothing is built in" in r.stdout
    log = tmp_path / "kaggle.log"
    _, path = _fake_kaggle(tmp_path, f"echo \"$@\" >> {log}\nexit 0")
    r = run("--manifest", manifest, "--out", out, "--check", "--upload", "--owner", "me", env=path)
    assert r.returncode == 0 and "--owner not read" not in r.stderr, r.stderr
    assert log.read_text().splitlines()[0] == "datasets status me/lexrag-corpus"
    assert json.loads((out / "bm25" / "dataset-metadata.json").read_text())["id"] == "me/lexrag-bm25"


def test_a_damaged_llm_cache_given_to_build_datasets_is_one_line_and_nothing_is_recorded(tmp_path, manifest):
    from lexrag.llm.cache import LLMCache

    LLMCache(tmp_path / "live_cache").close()
    (tmp_path / "live_cache" / "cache.sqlite").write_bytes(b"not a database" * 50)
    before = manifest.read_bytes()
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--only", "llm_cache", "--llm-cache", tmp_path / "live_cache")
    assert r.returncode == 2 and "cache.sqlite: not a readable LLM cache (file is not a database" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and manifest.read_bytes() == before
    assert not (tmp_path / "ds" / "llm_cache" / "cache.sqlite").exists()


def test_a_build_of_other_data_leaves_the_committed_manifest_unless_recorded(tmp_path, tiny_inputs, monkeypatch, capsys,
                                                                            build_datasets, committed_manifest):
    laws, _ = tiny_inputs
    committed, bd = committed_manifest, build_datasets
    before = committed.read_bytes()
    monkeypatch.setenv("CI", "true")
    # the demo slice (or any other corpus) into the committed manifest: recorded beside the datasets instead
    assert bd.main(["--manifest", str(committed), "--out", str(tmp_path / "ds"), "--laws", str(laws), "--no-courts",
                    "--only", "corpus"]) == 0
    out, err = capsys.readouterr()
    assert committed.read_bytes() == before
    assert "this build is of other data than the committed manifest records (corpus: 7 documents, the committed " \
           "manifest records 176043)" in err and "--record" in err
    assert f"OK: {tmp_path / 'ds'} matches {tmp_path / 'ds' / 'artifacts_manifest.yaml'}" in out
    side = yaml.safe_load((tmp_path / "ds" / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    assert next(a for a in side["artifacts"] if a["name"] == "corpus")["doc_count"] == 7
    # asked for: recorded in the committed manifest
    assert bd.main(["--manifest", str(committed), "--out", str(tmp_path / "ds2"), "--laws", str(laws), "--no-courts",
                    "--only", "corpus", "--record"]) == 0
    doc = yaml.safe_load(committed.read_text(encoding="utf-8"))
    assert next(a for a in doc["artifacts"] if a["name"] == "corpus")["doc_count"] == 7


def test_a_build_of_the_demo_slice_matches_its_recorded_manifest(tmp_path):
    """The artifacts' bytes follow the code: a change that alters them fails here until the
    manifests are re-recorded (`make demo-manifest`, and build_datasets.py over the real data)."""
    recorded = ROOT / "demo" / "artifacts_manifest.yaml"
    scratch = tmp_path / "manifest.yaml"
    shutil.copy(recorded, scratch)
    only = "corpus,bm25,graph,prior"
    r = run("--manifest", scratch, "--out", tmp_path / "ds", "--laws", ROOT / "demo" / "laws_demo.csv",
            "--courts", ROOT / "demo" / "courts_demo.csv", "--train", ROOT / "demo" / "queries_demo.csv", "--only", only)
    assert r.returncode == 0, r.stderr
    r = run("--manifest", recorded, "--out", tmp_path / "ds", "--check", "--only", only)
    assert r.returncode == 0, (f"the demo artifacts no longer match demo/artifacts_manifest.yaml; if the change is meant, "
                               f"run `make demo-manifest` and re-record artifacts_manifest.yaml:\n{r.stdout}{r.stderr}")


def test_a_dictionary_dataset_carries_its_sources_licence(tmp_path, manifest):
    """The dictionary dataset's metadata names the licence of the file it was built from (Ding's
    "other" for the demo's own file, which says MIT; FreeDict's GPL-3.0 for a dictd pair), not a fixed one."""
    from lexrag.testing import write_dictd

    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--only", "dictionary", "--dictionary", ROOT / "demo" / "dictionary_demo.txt")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "dictionary" / "dataset-metadata.json").read_text())["licenses"] == [{"name": "other"}]
    src = write_dictd(tmp_path, [("street", "street /ipa/\nStrasse <fem>\n")])
    r = run("--manifest", manifest, "--out", tmp_path / "fd", "--only", "dictionary", "--dictionary", src)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "fd" / "dictionary" / "dataset-metadata.json").read_text())["licenses"] == [{"name": "GPL-3.0"}]


def test_datasets_built_from_competition_data_say_the_competition_s_rules_govern_them(tmp_path, manifest, tiny_inputs):
    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--no-courts", "--only", "corpus,bm25")
    assert r.returncode == 0, r.stderr
    for name in ("corpus", "bm25"):
        meta = json.loads((out / name / "dataset-metadata.json").read_text())
        assert meta["licenses"] == [{"name": "other"}] and "competition's rules" in meta["description"], meta
        assert "private" in meta["description"]


def _wheel(folder, name, version, meta_lines, files):
    import zipfile

    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join([f"Name: {name}", f"Version: {version}", *meta_lines]) + "\n")
        for rel, text in files.items():
            z.writestr(f"{name}-{version}.dist-info/{rel}", text)
        z.writestr(f"{name}/__init__.py", "")
    return path


def test_the_wheels_dataset_lists_each_package_s_licence_and_carries_its_files(tmp_path):
    from lexrag.kaggle.datasets import dataset_licence
    from lexrag.io.wheels import LICENCES_FILE, write_licences

    _wheel(tmp_path, "gplthing", "1.0", ["License-Expression: GPL-3.0-or-later"], {"licenses/COPYING": "GPL text"})
    _wheel(tmp_path, "mitthing", "2.0", ["License: MIT"], {"LICENSE.txt": "MIT text"})
    _wheel(tmp_path, "oldthing", "3.0", ["Classifier: License :: OSI Approved :: BSD License"], {})
    rows = write_licences(tmp_path)
    assert rows[0] == ("gplthing", "1.0", "GPL-3.0-or-later")  # the GPL ones first
    assert (tmp_path / "licenses" / "gplthing-1.0" / "COPYING").read_text() == "GPL text"
    assert (tmp_path / "licenses" / "mitthing-2.0" / "LICENSE.txt").read_text() == "MIT text"
    listed = (tmp_path / LICENCES_FILE).read_text()
    assert "| oldthing | 3.0 | BSD License | none in the wheel |" in listed and "Under the GPL: gplthing" in listed
    name, note = dataset_licence(tmp_path, {"name": "wheels"})
    assert name == "other" and "under the GPL: gplthing (GPL-3.0-or-later)" in note


def test_the_recorded_wheels_dataset_carries_its_licence_list():
    doc = yaml.safe_load((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"))
    files = [f["path"] for f in next(a for a in doc["artifacts"] if a["name"] == "wheels")["files"]]
    assert "LICENSES.md" in files
    for pkg in ("igraph", "leidenalg", "lexrag", "lightgbm"):
        assert any(f.startswith(f"licenses/{pkg}-") for f in files), pkg


def test_a_failed_rebuild_keeps_the_dataset_folder_that_was_there(tmp_path, manifest):
    """A re-export of the LLM cache from a damaged source fails in one line and leaves the good
    export (and its metadata) as it was: every artifact is built aside and put in place whole."""
    from lexrag.llm.cache import LLMCache

    src, out = tmp_path / "cache", tmp_path / "ds"
    c = LLMCache(src)
    c.put("k", "m", "t", "h", {}, "an answer", 1, 1, 0.1)
    c.close()
    assert run("--manifest", manifest, "--out", out, "--only", "llm_cache", "--llm-cache", src).returncode == 0
    before = {p.name: p.read_bytes() for p in (out / "llm_cache").iterdir()}
    assert {"cache.sqlite", "params.json", "dataset-metadata.json"} <= set(before)
    (src / "cache.sqlite").write_bytes(b"garbage")
    r = run("--manifest", manifest, "--out", out, "--only", "llm_cache", "--llm-cache", src)
    assert r.returncode != 0 and "not a readable LLM cache" in r.stderr
    assert {p.name: p.read_bytes() for p in (out / "llm_cache").iterdir()} == before
    assert [p.name for p in out.iterdir()] == ["llm_cache"]  # no staging folder left behind


@pytest.mark.parametrize("name", ["../outside", "/etc", "corpus/../../x"])
def test_a_manifest_entry_that_is_a_path_is_refused_before_anything_is_read(tmp_path, manifest, name):
    doc = yaml.safe_load(manifest.read_text())
    doc["artifacts"][0]["name"] = name
    manifest.write_text(yaml.safe_dump(doc))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "private.txt").write_text("secret", encoding="utf-8")
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--check")
    assert r.returncode != 0 and "is not one lexrag builds" in r.stdout + r.stderr
    assert "private.txt" not in r.stdout + r.stderr


def test_check_never_follows_a_link_out_of_a_dataset_folder(tmp_path, manifest, tiny_inputs):
    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--courts", courts, "--only", "corpus").returncode == 0
    secret = tmp_path / "secret.txt"
    secret.write_text("outside", encoding="utf-8")
    (out / "corpus" / "hn").symlink_to(secret)
    r = run("--manifest", manifest, "--out", out, "--check", "--only", "corpus")
    assert r.returncode != 0 and "a link out of" in r.stdout + r.stderr and "size 7" not in r.stdout + r.stderr


def test_build_datasets_refuses_a_bad_owner_a_doubled_entry_and_a_folder_that_is_no_cache(tmp_path, manifest):
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--only", "dictionary", "--dictionary", ROOT / "demo" / "dictionary_demo.txt",
            "--owner", "../../evil owner")
    assert r.returncode != 0 and "is not a Kaggle user or organisation name" in r.stdout + r.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--only", "llm_cache", "--llm-cache", plain)
    assert r.returncode != 0 and "not an LLM cache folder" in r.stdout + r.stderr
    doc = yaml.safe_load(manifest.read_text())
    doc["artifacts"].append(dict(doc["artifacts"][0]))
    manifest.write_text(yaml.safe_dump(doc))
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--check")
    assert r.returncode != 0 and "is listed twice" in r.stdout + r.stderr


def test_a_failed_build_leaves_no_copy_of_the_committed_manifest_behind(tmp_path, monkeypatch, capsys, build_datasets):
    import tempfile

    from lexrag.kaggle import datasets

    bd = build_datasets
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    laws = tmp_path / "laws.csv"
    laws.write_text("citation,text\n" + "".join(f"Art. {i} OR,Text {i}\n" for i in range(1, 5)), encoding="utf-8")
    monkeypatch.setattr(datasets, "rebuild", lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert bd.main(["--laws", str(laws), "--no-courts", "--only", "corpus", "--out", str(tmp_path / "ds")]) == 2
    assert "the disk is full" in capsys.readouterr().err
    assert list((tmp_path / "t").iterdir()) == []  # nothing in the temporary folder
    assert not (tmp_path / "ds").exists()  # the copy the build recorded into is gone with it, and the folder it made
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / ".lexrag-manifest.999999999-abcd.yaml").write_text("a killed build's copy")
    assert bd.main(["--laws", str(laws), "--no-courts", "--only", "corpus", "--out", str(tmp_path / "ds")]) == 2
    assert list((tmp_path / "ds").iterdir()) == []  # the next build removes a killed one's copy


def test_a_failed_dataset_build_keeps_the_whole_set_that_was_there(tmp_path, manifest, tiny_inputs, monkeypatch):
    """The dataset folders of one build are published together: a build that fails at bm25 (or is
    killed) after the corpus was built leaves the old corpus beside the old bm25."""
    from lexrag.kaggle.datasets import rebuild
    from lexrag.config import load_config

    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    cfg = load_config(None, {"runtime.progress": False})
    rebuild(manifest, out, cfg, laws=laws, courts=courts, only=["corpus", "bm25"])
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    half = tmp_path / "half.csv"
    half.write_text("".join(laws.read_text(encoding="utf-8").splitlines(keepends=True)[:4]), encoding="utf-8")
    from lexrag.testing import swap_steps

    def failing(*a, **k):
        raise OSError(28, "No space left on device")

    with swap_steps("bm25", build=failing), pytest.raises(OSError):
        rebuild(manifest, out, cfg, laws=half, courts=courts, only=["corpus", "bm25"])
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_build_of_other_data_names_an_artifact_without_a_document_count_in_words(tmp_path, capsys, build_datasets):
    bd = build_datasets
    rc = bd.main(["--only", "prior", "--train", str(ROOT / "demo" / "queries_demo.csv"), "--out", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert rc == 0 and "prior: built from other sources than the committed manifest records" in err, err[-600:]
    assert "None" not in err


def test_a_build_of_other_data_in_parts_keeps_every_part_s_record(tmp_path, capsys, build_datasets):
    """README's build in parts, of other data than the committed manifest records: each part's
    entries join OUT/artifacts_manifest.yaml, so a check of OUT against it passes."""
    bd = build_datasets
    out = tmp_path / "ds"
    assert bd.main(["--only", "corpus,bm25", "--laws", str(ROOT / "demo" / "laws_demo.csv"), "--no-courts", "--out", str(out)]) == 0
    assert bd.main(["--only", "dictionary", "--dictionary", str(ROOT / "demo" / "dictionary_demo.txt"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert bd.main(["--check", "--only", "corpus,bm25,dictionary", "--out", str(out), "--manifest",
                    str(out / "artifacts_manifest.yaml")]) == 0, capsys.readouterr().out
    # the README's check, as written (no --manifest): it reads the manifest this build wrote, and says so
    assert bd.main(["--check", "--out", str(out)]) == 0, capsys.readouterr().out
    out_, err = capsys.readouterr()
    assert f"checking against {out / 'artifacts_manifest.yaml'}" in err and "OK:" in out_


@pytest.mark.parametrize("kind", ["torn", "folder", "link"])
def test_an_out_manifest_a_build_cannot_record_into_is_refused_before_anything_is_built(tmp_path, capsys, kind, build_datasets):
    bd = build_datasets
    out = tmp_path / "ds"
    out.mkdir()
    own = out / "artifacts_manifest.yaml"
    if kind == "torn":
        own.write_text("artifacts:\n- name: corpus\n  files: [{path: a", encoding="utf-8")
    elif kind == "folder":
        own.mkdir()
    else:
        (tmp_path / "elsewhere.yaml").write_text((ROOT / "artifacts_manifest.yaml").read_text(encoding="utf-8"), encoding="utf-8")
        own.symlink_to(tmp_path / "elsewhere.yaml")
    rc = bd.main(["--only", "corpus", "--laws", str(ROOT / "demo" / "laws_demo.csv"), "--no-courts", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "repair it or move it away first (nothing was built)" in err, err[-600:]
    assert sorted(p.name for p in out.iterdir()) == ["artifacts_manifest.yaml"]


def test_a_kaggle_cli_that_stalls_or_answers_in_another_encoding_is_one_line(tmp_path, manifest, tiny_inputs, monkeypatch):
    import lexrag.kaggle.upload as kaggle_upload
    from lexrag.errors import ManifestError

    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus").returncode == 0
    _, path = _fake_kaggle(tmp_path, "printf '\\377\\376 Fehler: keine Verbindung\\n' >&2\nexit 1")  # not UTF-8
    monkeypatch.setenv("PATH", path["PATH"])
    with pytest.raises(ManifestError, match="kaggle datasets status lexrag/lexrag-corpus failed: .*keine Verbindung"):
        kaggle_upload.upload(manifest, out, only=["corpus"])
    monkeypatch.setattr(kaggle_upload, "STATUS_TIMEOUT_S", 1)
    for endless in ("exec sleep 60", "exec yes"):  # a stalled network: no answer; a CLI that floods its output
        _fake_kaggle(tmp_path, endless)
        with pytest.raises(ManifestError, match="gave no answer in 1 s"):
            kaggle_upload.upload(manifest, out, only=["corpus"])  # and only the last 4 KB of the flood are held


def test_a_failed_wheels_build_is_one_line_and_keeps_the_wheels_dataset_that_was_there(tmp_path, manifest, monkeypatch):
    import yaml
    from lexrag.config import load_config
    from lexrag.errors import ManifestError
    from lexrag.kaggle.datasets import rebuild

    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    entry = next(a for a in doc["artifacts"] if a["name"] == "wheels")
    entry["params"] = {**entry.get("params", {}), "extra_wheels": ["nosuchpkg-xyz==9.9"]}
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    old = tmp_path / "ds" / "wheels"
    old.mkdir(parents=True)
    for name, text in (("texttable-1.7.2-py2.py3-none-any.whl", "a wheel"), ("params.json", "{}"), ("dataset-metadata.json", "{}")):
        (old / name).write_text(text)
    before = {p.name: p.read_text() for p in old.iterdir()}
    (tmp_path / "index").mkdir()  # a package index that has nothing: pip fails at once, whatever the network
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(ManifestError, match="^wheels: "):
        rebuild(manifest, tmp_path / "ds", load_config(None, {"runtime.progress": False}), only=["wheels"])
    assert {p.name: p.read_text() for p in old.iterdir()} == before
    assert [p.name for p in (tmp_path / "ds").iterdir()] == ["wheels"]  # no staging folder left


def test_an_upload_the_kaggle_api_refuses_with_exit_0_is_said(tmp_path, manifest, tiny_inputs, monkeypatch):
    import lexrag.kaggle.upload as kaggle_upload
    from lexrag.errors import ManifestError

    laws, _ = tiny_inputs
    out = tmp_path / "ds"
    assert run("--manifest", manifest, "--out", out, "--laws", laws, "--only", "corpus").returncode == 0
    _, path = _fake_kaggle(tmp_path, "[ \"$2\" = status ] && exit 0\n"
                           "echo 'Dataset version creation error: The requested dataset is not owned by you'\nexit 0")
    monkeypatch.setenv("PATH", path["PATH"])
    with pytest.raises(ManifestError, match="kaggle datasets version for corpus failed \\(exit 0\\): Dataset version creation "
                                            "error: The requested dataset is not owned by you"):
        kaggle_upload.upload(manifest, out, only=["corpus"])


def _entry_of(doc: dict, name: str) -> dict:
    return next(a for a in doc["artifacts"] if a["name"] == name)


def test_check_names_each_manifest_field_that_disagrees_with_its_spec_and_the_upload_takes_the_spec_s(
        tmp_path, manifest, tiny_inputs):
    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--courts", courts, "--only", "corpus,bm25")
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    title = _entry_of(doc, "bm25")["title"]
    _entry_of(doc, "bm25").update(title="my own title", builder="rm -rf / --only bm25")
    del _entry_of(doc, "corpus")["title"]
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    r = run("--manifest", edited, "--out", out, "--check")
    assert r.returncode == 1 and "OK" not in r.stdout
    said = [line for line in r.stdout.splitlines() if line.startswith("MISMATCH")]
    assert len(said) == 3, r.stdout
    assert f"MISMATCH {edited}: bm25: title 'my own title' is not its spec's ({title!r}); restore the field" in r.stdout
    assert f"{edited}: bm25: builder 'rm -rf / --only bm25' is not its spec's" in r.stdout
    assert f"{edited}: corpus: the entry has no title; restore it" in r.stdout
    assert "rebuild the entry (build_datasets.py --only corpus)" in r.stdout and "Traceback" not in r.stderr
    # the upload is refused, and the metadata it would send is written from the spec, not from the entry
    log = tmp_path / "kaggle.log"
    _, env = _fake_kaggle(tmp_path, f"echo \"$@\" >> {log}\nexit 0")
    r = run("--manifest", edited, "--out", out, "--check", "--upload", "--owner", "me", env=env)
    assert r.returncode == 1 and "title 'my own title'" in r.stdout and not log.exists()
    from lexrag.kaggle.datasets import write_dataset_metadata

    write_dataset_metadata(out / "bm25", _entry_of(doc, "bm25"), "me")
    assert json.loads((out / "bm25" / "dataset-metadata.json").read_text(encoding="utf-8"))["title"] == title


def test_check_names_a_dataset_folder_the_manifest_has_no_entry_for(tmp_path, manifest, tiny_inputs):
    laws, courts = tiny_inputs
    out = tmp_path / "ds"
    r = run("--manifest", manifest, "--out", out, "--laws", laws, "--courts", courts, "--only", "corpus,bm25,graph")
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    doc["artifacts"] = [a for a in doc["artifacts"] if a["name"] != "graph"]
    dropped = tmp_path / "dropped.yaml"
    dropped.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    r = run("--manifest", dropped, "--out", out, "--check")
    assert r.returncode == 1 and "OK" not in r.stdout
    stray = f"MISMATCH {out / 'graph'}: a dataset folder that {dropped} has no entry for, so an upload skips it"
    assert stray in r.stdout
    r = run("--manifest", dropped, "--out", out, "--check", "--only", "graph")
    assert r.returncode == 2 and f"{dropped} has no graph entry; restore it" in r.stderr
    assert "unknown artifact" not in r.stderr and "Traceback" not in r.stderr
    r = run("--manifest", dropped, "--out", out, "--check", "--only", "nonesuch")  # a name lexrag never builds
    assert r.returncode == 2 and "unknown artifact(s) nonesuch" in r.stderr
    (out / "corpus").rename(tmp_path / "corpus")  # only folders the manifest lacks: named, not "nothing is built"
    (out / "bm25").rename(tmp_path / "bm25")
    r = run("--manifest", dropped, "--out", out, "--check")
    assert r.returncode == 1 and "has no entry for" in r.stdout and "nothing is built" not in r.stdout


@pytest.mark.parametrize("name", [["corpus"], {"corpus": 1}, 7])
def test_a_manifest_entry_whose_name_is_not_text_is_one_line(tmp_path, manifest, name):
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    doc["artifacts"][0]["name"] = name
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    r = run("--manifest", manifest, "--out", tmp_path / "ds", "--check", "--only", "corpus")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {manifest}: artifact entry 1: name ")
    assert f"is a {type(name).__name__}, not a name; write one of" in r.stderr
