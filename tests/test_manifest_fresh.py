"""The committed artifacts_manifest.yaml follows the code that writes its entries.

Each entry is recorded from a build of the real data, which the tests do not have; so each entry's
own ``builder`` line is run here over the demo slice (its placeholders, LAWS, TRAIN, OUT and the
rest, standing for small files of the same kinds), and everything about the result that the code
decides, not the data, is compared with the entry:

- the builder line itself: build_datasets.py reads it, it selects this artifact, and it builds;
- the names of the dataset's files;
- the fields of its ``params.json`` (``params_json_keys``: a writer that gains or loses a field,
  such as the digest params.json records of itself, fails here until the entry is re-recorded);
- the ``params`` section: the same keys, and the same values where the code or the preset sets
  them (all but the few named in ``FROM_THE_DATA``);
- the package version, whether a document count and sources are recorded and how many sources;
- the Kaggle dataset name (the registry's), and the title and licence its dataset-metadata.json gets.

What this cannot see: the bytes of any file and the values that follow from the data (sizes and
sha256 of the files, document counts, the sources' hashes, a fitted ranker's calibration and
counts).  A code change that alters bytes fails tests/test_build_datasets.py's demo-manifest test
instead, which is the cue to re-record this manifest from the real data too.  The embeddings (built
on a GPU, from a model folder) and the wheels (downloaded) are not built here: their builder lines
are only read; an embeddings entry recorded by an older writer (no ``params_json_keys``) is accepted
as such, as its params.json without a digest is accepted at load.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

import lexrag.pipeline  # noqa: F401  (declares every artifact: the specs the entries are held to)
from lexrag import __version__

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo"
COMMITTED = ROOT / "artifacts_manifest.yaml"
NOT_BUILT_HERE = {"embeddings": "built on a GPU from a model folder", "wheels": "downloaded by pip"}
# params values a build takes from the data it reads (the rest are the code's or the preset's); the
# ranker's signals (and the features named after them) are those that listed a candidate for some
# training question: the demo's English questions reach the dictionary's, lexam_dev's never do
FROM_THE_DATA = {"ranker": {"calibration", "candidates", "questions", "questions_with_gold_in_candidates", "train",
                            "train_sha256", "signals", "features"}}


def _entries() -> dict[str, dict]:
    return {a["name"]: a for a in yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))["artifacts"]}


def _build_datasets():
    spec = importlib.util.spec_from_file_location("build_datasets_fresh", ROOT / "build_datasets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stand_ins(folder: Path) -> dict[str, str]:
    """Small files of the kinds the builder lines name, over the demo slice's laws."""
    laws = (DEMO / "laws_demo.csv").read_text(encoding="utf-8").splitlines()
    cits = [line.split(",", 1)[0] for line in laws[1:6]]
    keys = folder / "law_keys.txt"
    keys.write_text("\n".join(cits + ["Art. 9999 OR"]) + "\n", encoding="utf-8")
    abbrev = folder / "abbrev-translations.json"
    abbrev.write_text(json.dumps([{"id": "OR", "abbrev": {"de": "OR", "fr": "CO", "it": "CO"}}]), encoding="utf-8")
    headings = folder / "headings.csv"
    headings.write_text("citation,article_heading,path\n" + "".join(f"{c},Abschluss,Erster Titel\n" for c in cits),
                        encoding="utf-8")
    english = folder / "laws_en.csv"
    english.write_text("citation,text,title\n" + "".join(f"{c},The contract is concluded by mutual assent.,Code of "
                                                         "Obligations\n" for c in cits), encoding="utf-8")
    from lexrag.llm.cache import LLMCache

    LLMCache(folder / "llm_cache").close()
    return {"LAWS": str(DEMO / "laws_demo.csv"), "COURTS": str(DEMO / "courts_demo.csv"), "LAW_KEYS": str(keys),
            "ABBREVIATIONS": str(abbrev), "HEADINGS": str(headings), "TRAIN": str(DEMO / "queries_demo.csv"),
            "laws_en.csv": str(english), "/usr/share/trans/de-en": str(DEMO / "dictionary_demo.txt"),
            "CACHE_DIR": str(folder / "llm_cache")}


def _argv(builder: str, stand_ins: dict[str, str], out: Path) -> list[str]:
    words = shlex.split(builder)
    assert words[:2] == ["python", "build_datasets.py"], builder
    unknown = [w for w in words[2:] if w.isupper() and w not in stand_ins and w != "OUT"]
    assert not unknown, f"builder line {builder!r}: no stand-in for {unknown} (add one to _stand_ins)"
    return [str(out) if w == "OUT" else stand_ins.get(w, w) for w in words[2:]]


@pytest.fixture(scope="module")
def demo_datasets(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """Every entry's builder line run once into one folder (the later ones over the corpus the first
    one built; the ranker last, as its training runs the preset's stages over the other artifacts:
    exam reads the dictionary), recorded in a copy of the committed manifest; returns the folder and
    the copy's entries."""
    root = tmp_path_factory.mktemp("manifest_fresh")
    stand_ins = _stand_ins(root)
    manifest = root / "manifest.yaml"
    shutil.copy(COMMITTED, manifest)
    bd = _build_datasets()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CI", "true")  # no progress bars
        for name, entry in sorted(_entries().items(), key=lambda e: e[0] == "ranker"):
            if name in NOT_BUILT_HERE:
                continue
            argv = _argv(entry["builder"], stand_ins, root / "ds")
            assert bd.main(["--manifest", str(manifest), *argv]) == 0, f"{name}: its builder line failed: {entry['builder']}"
    built = {a["name"]: a for a in yaml.safe_load(manifest.read_text(encoding="utf-8"))["artifacts"]}
    return root / "ds", built


def _stand_ins_names() -> dict[str, str]:
    """The placeholders as they are (for reading a builder line without building)."""
    return {w: w for w in ("LAWS", "COURTS", "LAW_KEYS", "ABBREVIATIONS", "HEADINGS", "TRAIN", "CACHE_DIR", "MODEL_FOLDER")}


@pytest.mark.parametrize("name", list(_entries()))
def test_every_builder_line_is_one_build_datasets_reads_for_its_artifact(name):
    entry = _entries()[name]
    args = _build_datasets().parser().parse_args(_argv(entry["builder"], _stand_ins_names(), Path("OUT")))
    assert name in args.only.split(","), entry["builder"]
    from lexrag.registry import spec

    assert entry["dataset"] == spec(name).dataset


BUILT = [n for n in _entries() if n not in NOT_BUILT_HERE]


@pytest.mark.parametrize("name", BUILT)
def test_the_code_writes_what_the_entry_records(demo_datasets, name):
    out, built = demo_datasets
    entry, fresh = _entries()[name], built[name]
    folder = out / name
    params = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    hint = (f"the code now writes {name} otherwise than artifacts_manifest.yaml records: re-record the entry from the "
            f"real data ({entry['builder']})")
    if entry.get("files"):  # an entry never built (the LLM cache) records no files, version or params yet
        assert {f["path"] for f in entry["files"]} == {f["path"] for f in fresh["files"]}, hint
        assert entry.get("params_json_keys") == sorted(params), hint
        assert entry["version"] == __version__, hint
    if name != "llm_cache":  # the LLM cache records no params section until it is exported from a live run
        recorded, written = entry.get("params") or {}, params["params"]
        assert set(recorded) == set(written), hint
        data = FROM_THE_DATA.get(name, set())
        assert {k: v for k, v in recorded.items() if k not in data} == {k: v for k, v in written.items() if k not in data}, hint
        if entry.get("files"):
            assert (entry["doc_count"] is None) == (fresh["doc_count"] is None), hint
            assert type(entry["sources"]) is type(fresh["sources"]), hint
            if isinstance(entry["sources"], dict):  # the same inputs, one source each
                assert len(entry["sources"]) == len(fresh["sources"]), hint
    meta = json.loads((folder / "dataset-metadata.json").read_text(encoding="utf-8"))
    assert meta["id"].endswith("/" + entry["dataset"]) and meta["title"] == entry["title"]
    from lexrag.registry import spec

    if spec(name).licence == "competition":  # the code says: the competition's rules, created private
        assert meta["licenses"] == [{"name": "other"}] and "license" not in entry
    elif spec(name).licence == "own":  # the source's licence from its params.json, the entry's as the fallback
        assert entry.get("license"), f"{name}: an artifact licensed as its source records a fallback licence"


@pytest.mark.parametrize("name", list(NOT_BUILT_HERE))
def test_an_entry_not_built_here_is_one_an_older_writer_recorded_or_carries_its_fields(name):
    """Not built here; its entry is either from before params_json_keys were recorded (accepted,
    as its params.json without a digest is accepted at load) or records params.json's fields."""
    entry = _entries()[name]
    keys = entry.get("params_json_keys")
    assert keys is None or {"artifact", "builder", "version", "params", "params_sha256"} <= set(keys)
