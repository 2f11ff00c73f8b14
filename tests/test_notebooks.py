import json
import os
import subprocess
import sys
import shutil
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
REQUIRED = {"01_build_corpus", "02_build_bm25", "03_build_graph", "04_build_embeddings", "inference", "validation"}


def test_required_notebooks_exist():
    assert REQUIRED <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_in_sync(py):
    ipynb = py.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{ipynb.name} missing: run `make notebooks`"
    a = jupytext.read(py)
    b = jupytext.read(ipynb)
    cells = lambda nb: [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]
    assert cells(a) == cells(b), f"{py.name} and {ipynb.name} differ: run `make notebooks`"
    assert b.metadata.get("kernelspec", {}).get("name") == "python3"


def _text(nb: Path) -> str:
    doc = json.loads(Path(nb).read_text(encoding="utf-8"))
    return "".join("".join(o.get("text", "")) for c in doc["cells"] for o in c.get("outputs", []))


def _papermill(nb, out, **params):
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(nb), str(out)]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def _papermill_params(p: dict | None = None, y: dict | None = None) -> dict:
    """The parameters papermill's command line hands a notebook: ``-y`` read as YAML, then each
    ``-p`` typed as papermill types it ("True", "None" and numbers become values, any other text
    stays a string: ``-p ablation false`` is the string "false")."""
    import yaml
    from papermill.cli import _resolve_type
    from papermill.iorw import NoDatesSafeLoader

    params = dict(yaml.load(json.dumps(y), Loader=NoDatesSafeLoader) or {}) if y is not None else {}
    for k, v in (p or {}).items():
        params[k] = _resolve_type(str(v))
    return params


def _in_process(nb: str, cwd: Path, monkeypatch, p: dict | None = None, y: dict | None = None, timeout: int = 300) -> str:
    """The notebook as papermill runs it, in this process: papermill's own parameters cell is
    injected after the notebook's, then each code cell runs in order in one namespace, in ``cwd``.
    Returns what the cells printed; a cell's ``SystemExit`` (the one ``error:`` line the kernel
    shows) or any other exception propagates.  The real kernel path of each notebook is proven by
    the papermill tests below; these check the parameter handling without starting a kernel."""
    import contextlib
    import csv
    import io
    import logging
    import signal

    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    book = parameterize_notebook(load_notebook_node(str(ROOT / "notebooks" / f"{nb}.ipynb")), _papermill_params(p, y))
    assert [c.metadata.get("tags") for c in book.cells if c.cell_type == "code"][:2] == [["parameters"], ["injected-parameters"]]
    monkeypatch.chdir(cwd)
    namespace = {"__name__": "__main__"}
    printed = io.StringIO()
    # what a notebook changes in the interpreter (the inference notebook sets up logging and the csv field limit)
    handlers, level, limit = logging.root.handlers[:], logging.root.level, csv.field_size_limit()

    def stuck(signum, frame):  # a FIFO opened by mistake would block for ever: the test fails instead
        raise TimeoutError(f"{nb} still running after {timeout}s")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(printed):
            for i, cell in enumerate(book.cells):
                if cell.cell_type == "code":
                    exec(compile(cell.source, f"{nb}.ipynb, cell {i}", "exec"), namespace)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
        csv.field_size_limit(limit)
        print(printed.getvalue())  # shown by pytest when the test fails
    return printed.getvalue()


def _refused(nb: str, cwd: Path, monkeypatch, p: dict | None = None, y: dict | None = None, timeout: int = 300) -> str:
    """The one line a notebook stops on (run in process): the message of the SystemExit a cell raised."""
    with pytest.raises(SystemExit) as e:
        _in_process(nb, cwd, monkeypatch, p, y, timeout)
    assert e.value.code not in (None, 0)
    return str(e.value.code)


@pytest.mark.slow
def test_validation_notebook_runs_on_demo(tmp_path, demo_artifacts, demo_queries):
    _papermill(ROOT / "notebooks" / "validation.ipynb", tmp_path / "out.ipynb",
               queries=demo_queries, artifacts_dir=demo_artifacts, out_dir=tmp_path / "val",
               config_path=ROOT / "demo" / "config.yaml", ablation=True)
    metrics = json.loads((tmp_path / "val" / "metrics.json").read_text())["metrics"]
    assert metrics["n_queries"] == 22 and metrics["recall@10"] > 0.5
    assert (tmp_path / "val" / "per_query.csv").is_file()
    import csv

    rows = {r["run"]: r for r in csv.DictReader(open(tmp_path / "val" / "ablation.csv", encoding="utf-8"))}
    assert set(rows) == {"full", "without citation seeds", "without BM25"}  # one row per stage the demo config runs
    assert float(rows["full"]["macro_f1"]) == pytest.approx(metrics["macro_f1"])
    # without BM25 only the questions that name their provisions are answered
    assert float(rows["without BM25"]["recall@100"]) < float(rows["full"]["recall@100"])
    assert (tmp_path / "val" / "ablation.png").stat().st_size > 1000
    # the demo's expected scores hold (make test runs the checker on the demo)
    r = subprocess.run([sys.executable, "-m", "lexrag", "check-scores", str(tmp_path / "val" / "metrics.json"),
                        "--expected", str(ROOT / "demo" / "expected.yaml")], capture_output=True, text=True)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout
    # show-metrics: the metrics, the status table, the count, the ablation as a table, the outputs there
    r = subprocess.run([sys.executable, "-m", "lexrag", "show-metrics", str(tmp_path / "val" / "metrics.json")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "\nOK: every stage" in r.stdout and "\ncount: fixed, k = 5 citations per question" in r.stdout
    table = r.stdout.split("ablation (each row drops one stage from the full run)")[1].splitlines()
    assert table[1].split()[0] == "run" and table[2].startswith("full ") and "without BM25" in r.stdout
    assert f"outputs in {tmp_path / 'val'}/: submission.csv, per_query.csv, metrics.json" in r.stdout and "ablation.csv" in r.stdout
    report = (tmp_path / "val" / "report.html").read_text(encoding="utf-8")
    assert report.count("<img") >= 2 and "Leave-one-stage-out" in report and "Recall by citation kind" in report


@pytest.mark.slow
def test_validation_notebook_adds_the_llm_stages_one_by_one_with_the_scripted_model(tmp_path, demo_artifacts, demo_queries):
    import csv
    import shutil

    art = tmp_path / "art"
    shutil.copytree(demo_artifacts, art)
    over = {"llm.model": str(ROOT / "demo" / "scripted_llm"), "llm.cache_dir": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "calibrate", "--queries", str(demo_queries), "--artifacts", str(art),
                        "--config", str(ROOT / "demo" / "config_llm.yaml")] + [x for k, v in over.items() for x in ("--set", f"{k}={v}")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "validation.ipynb"), str(tmp_path / "o.ipynb"),
            "-p", "queries", str(demo_queries), "-p", "artifacts_dir", str(art), "-p", "out_dir", str(tmp_path / "val"),
            "-p", "config_path", str(ROOT / "demo" / "config_llm.yaml"), "-p", "incremental", "True",
            "-y", json.dumps({"overrides": over})]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {r["run"]: r for r in csv.DictReader(open(tmp_path / "val" / "incremental.csv", encoding="utf-8"))}
    # one row per stage the config asks for (incremental_steps); the LLM seeds share the rewrite's row
    assert list(rows) == ["BM25", "+citation seeds", "+LLM rewrite +LLM seeds", "+verification", "+agentic loop"]
    ran = list(rows.values())
    assert all(r["status"] == "ran" and float(r["ci_low"]) <= float(r["macro_f1"]) <= float(r["ci_high"]) for r in ran)
    assert float(rows["+verification"]["delta_macro_f1"]) == pytest.approx(
        float(rows["+verification"]["macro_f1"]) - float(rows["+LLM rewrite +LLM seeds"]["macro_f1"]))
    assert 0.0 <= float(rows["+verification"]["p_value"]) <= 1.0
    trace = [json.loads(line) for line in open(tmp_path / "val" / "agent_trace.jsonl", encoding="utf-8")]
    assert trace and {t["round"] for t in trace} >= {0, 1} and all("queries" in t and "kept" in t for t in trace)
    assert (tmp_path / "val" / "incremental.png").stat().st_size > 1000
    r = subprocess.run([sys.executable, "-m", "lexrag", "show-metrics", str(tmp_path / "val" / "metrics.json")],
                       capture_output=True, text=True)
    shown = r.stdout.split("incremental ablation (each row adds one stage to the row above)")[1].splitlines()[1:7]
    assert r.returncode == 0 and [line.split("  ")[0] for line in shown[1:]] == list(rows), r.stdout
    report = (tmp_path / "val" / "report.html").read_text(encoding="utf-8")
    assert report.count("<img") >= 3  # ablation bars, per-query heatmap, signal contribution
    assert "Incremental ablation" in report and "data:image/png;base64," in report and "http" not in report.split("<body>")[1]


@pytest.mark.slow
def test_build_and_inference_notebooks(tmp_path, demo_laws, demo_queries):
    """The competition's files side by side: notebook 01 reads court_considerations.csv beside
    laws_de.csv without being told, so notebook 03's graph has court edges."""
    import shutil

    art = tmp_path / "art"
    data = tmp_path / "data"
    data.mkdir()
    laws = shutil.copyfile(demo_laws, data / "laws_de.csv")
    shutil.copyfile(ROOT / "demo" / "courts_demo.csv", data / "court_considerations.csv")
    abbrev = tmp_path / "abbrev-translations.json"
    abbrev.write_text(json.dumps([{"id": "OR", "abbrev": {"de": "OR", "fr": "CO", "it": "CO"}}]), encoding="utf-8")
    _papermill(ROOT / "notebooks" / "01_build_corpus.ipynb", tmp_path / "1.ipynb", laws=laws, out_dir=art, abbreviations=abbrev,
               dictionary=ROOT / "demo" / "dictionary_demo.txt")
    assert json.loads((art / "corpus" / "code_aliases.json").read_text(encoding="utf-8")) == {"CO": "OR"}
    assert "courts: " + str(data / "court_considerations.csv") in _text(tmp_path / "1.ipynb")
    assert (art / "dictionary" / "params.json").is_file() and "English keys from" in _text(tmp_path / "1.ipynb")
    _papermill(ROOT / "notebooks" / "02_build_bm25.ipynb", tmp_path / "2.ipynb", artifacts_dir=art)
    _papermill(ROOT / "notebooks" / "03_build_graph.ipynb", tmp_path / "g.ipynb", artifacts_dir=art)
    graph = json.loads((art / "graph" / "params.json").read_text(encoding="utf-8"))
    assert graph["n_edges"] > 0 and "no court edges" not in _text(tmp_path / "g.ipynb")
    # courts=False: laws only, said in the notebook, and the graph build warns that it has no edges
    _papermill(ROOT / "notebooks" / "01_build_corpus.ipynb", tmp_path / "1b.ipynb", laws=laws, out_dir=tmp_path / "lawsonly",
               courts=False)
    assert _text(tmp_path / "1b.ipynb").count("courts: ") == 1 and "courts: none: laws only" in _text(tmp_path / "1b.ipynb")
    assert "dictionary: none given" in _text(tmp_path / "1b.ipynb") and not (tmp_path / "lawsonly" / "dictionary").exists()
    _papermill(ROOT / "notebooks" / "03_build_graph.ipynb", tmp_path / "gb.ipynb", artifacts_dir=tmp_path / "lawsonly")
    assert "warning: the graph has no court edges" in _text(tmp_path / "gb.ipynb")
    _papermill(ROOT / "notebooks" / "inference.ipynb", tmp_path / "3.ipynb", artifacts_dir=art,
               queries=demo_queries, out_path=tmp_path / "submission.csv", config_path="lexical")
    lines = (tmp_path / "submission.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query_id,predicted_citations" and len(lines) == 23


@pytest.mark.slow
def test_embeddings_notebook_builds_and_resumes(tmp_path, tiny_inputs):
    """Notebook 04 stops after max_shards, and a second run resumes to the whole set: a corpus of
    ten documents in shards of four (notebook 01's kernel path: test_build_and_inference_notebooks)."""
    from lexrag.config import load_config
    from lexrag.index.corpus import build_corpus
    from lexrag.testing import make_tiny_encoder

    enc = make_tiny_encoder(tmp_path / "enc")
    art = tmp_path / "art"
    build_corpus(art / "corpus", *tiny_inputs, load_config().corpus, progress=False)
    overrides = f"overrides: {{semantic.model: '{enc}', semantic.device: cpu, semantic.shard_size: 4, semantic.max_seq: 64}}"
    shards = []
    for max_shards, expect in ((1, "incomplete"), ("None", "complete")):
        args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "04_build_embeddings.ipynb"),
                str(tmp_path / "4.ipynb"), "-p", "artifacts_dir", str(art), "-y", overrides, "-p", "max_shards", str(max_shards)]
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads((tmp_path / "4.ipynb").read_text())
        text = "".join("".join(o.get("text", "")) for c in out["cells"] for o in c.get("outputs", []))
        assert f"embeddings {expect}" in text
        shards.append(sorted(p.name for p in (art / "embeddings").glob("shard_*.npy")))
    assert shards == [["shard_00000.npy"], ["shard_00000.npy", "shard_00001.npy", "shard_00002.npy"]]


@pytest.mark.slow
def test_the_embeddings_notebook_with_its_defaults_finds_an_attached_bge_m3(tmp_path, tiny_inputs):
    """On Kaggle with its default (the kaggle preset), notebook 04 finds the encoder attached as a
    folder named bge-m3 among the inputs, with no semantic.model set."""
    import os
    import shutil

    from lexrag.testing import make_tiny_encoder

    from lexrag.config import load_config
    from lexrag.index.corpus import build_corpus

    root, working = tmp_path / "input", tmp_path / "working"
    make_tiny_encoder(root / "models" / "bge-m3")
    build_corpus(root / "datasets" / "me" / "lexrag-corpus", tiny_inputs[0], None, load_config().corpus, progress=False)
    env = {**os.environ, "KAGGLE_KERNEL_RUN_TYPE": "Batch", "LEXRAG_KAGGLE_INPUT": str(root), "LEXRAG_KAGGLE_WORKING": str(working)}
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "04_build_embeddings.ipynb"),
            str(tmp_path / "4.ipynb"), "-y", "overrides: {semantic.shard_size: 4, semantic.max_seq: 64}", "-p", "max_shards", "1"]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "embeddings incomplete" in _text(tmp_path / "4.ipynb") and (working / "embeddings" / "shard_00000.npy").is_file()
    shutil.rmtree(working)


@pytest.mark.slow
def test_validation_notebook_replays_an_llm_cache_without_a_model(tmp_path, demo_artifacts, demo_queries, tiny_llm):
    """A live CLI run with the tiny 4-bit LLM fills a cache; the validation notebook replays it
    (the model folder is not even there) and writes the same submission, byte for byte."""
    llm = ["--set", "llm.enabled=true", "--set", "llm.device=cpu", "--set", "llm.max_new_tokens=8"]
    r = subprocess.run([sys.executable, "-m", "lexrag", "-q", "run", "--artifacts", str(demo_artifacts), "--queries",
                        str(demo_queries), "--out", str(tmp_path / "live.csv"), "--config", str(ROOT / "demo" / "config.yaml"),
                        *llm, "--set", f"llm.model={tiny_llm}", "--set", f"llm.cache_dir={tmp_path / 'cache'}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LLM 1" in r.stdout and "generated tokens" in r.stdout
    overrides = f"overrides: {{llm.enabled: true, llm.model: '{tmp_path / 'gone' / tiny_llm.name}', llm.max_new_tokens: 8}}"
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "validation.ipynb"),
            str(tmp_path / "v.ipynb"), "-p", "queries", str(demo_queries), "-p", "artifacts_dir", str(demo_artifacts),
            "-p", "out_dir", str(tmp_path / "val"), "-p", "config_path", str(ROOT / "demo" / "config.yaml"),
            "-p", "llm_cache", str(tmp_path / "cache"), "-y", overrides]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "val" / "submission.csv").read_bytes() == (tmp_path / "live.csv").read_bytes()
    doc = json.loads((tmp_path / "val" / "metrics.json").read_text())
    assert doc["model_loads"] == {} and doc["cost"]["total"]["rewrite"]["cache_hits"] >= 22 * 5
    variants = [json.loads(line) for line in (tmp_path / "val" / "variants.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(variants) == 22 and all(v["variants"]["query"]["origin"] == "input" for v in variants)


def test_papermill_string_parameters_are_read_as_meant_and_a_bad_one_is_named(tmp_path, demo_artifacts, demo_queries, monkeypatch):
    # papermill's -p passes "false" and '{"graph": false}' as strings; "false" used to switch the ablation ON
    assert _papermill_params({"ablation": "false", "incremental": "False", "stages": '{"graph": false}'}) == \
        {"ablation": "false", "incremental": False, "stages": '{"graph": false}'}  # as papermill's command line types them
    _in_process("validation", tmp_path, monkeypatch, p=dict(
        queries=demo_queries, artifacts_dir=demo_artifacts, out_dir=tmp_path / "val", config_path=ROOT / "demo" / "config.yaml",
        ablation="false", stages='{"graph": false}', overrides='{"count.k": 3}'))
    assert (tmp_path / "val" / "metrics.json").is_file() and not (tmp_path / "val" / "ablation.csv").exists()
    ran = json.loads((tmp_path / "val" / "metrics.json").read_text(encoding="utf-8"))["config"]
    assert ran["graph"]["enabled"] is False and ran["count"]["k"] == 3  # the strings were applied, not dropped
    assert "error: parameter stages: expected a mapping" in _refused("validation", tmp_path, monkeypatch, p=dict(
        queries=demo_queries, artifacts_dir=demo_artifacts, out_dir=tmp_path / "bad", stages="x"))


@pytest.mark.slow
def test_a_bad_parameter_stops_the_kernel_with_its_one_line(tmp_path, demo_artifacts, demo_queries):
    """The kernel path of a parameter error (the in-process tests check each error's line): the
    run fails and papermill's stderr carries the one line."""
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "validation.ipynb"), str(tmp_path / "bad.ipynb"),
            "-p", "queries", str(demo_queries), "-p", "artifacts_dir", str(demo_artifacts), "-p", "out_dir", str(tmp_path / "bad"),
            "-p", "stages", "x"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode != 0 and "error: parameter stages: expected a mapping" in r.stderr
    assert "Traceback" not in r.stderr.split("SystemExit")[-1]  # the line, not a traceback of lexrag's


@pytest.mark.slow
def test_inference_refuses_to_write_over_its_queries_file(tmp_path, demo_artifacts, demo_queries):
    q = tmp_path / "test.csv"
    shutil.copyfile(demo_queries, q)
    args = [sys.executable, "-m", "papermill", "-k", "python3", str(ROOT / "notebooks" / "inference.ipynb"), str(tmp_path / "o.ipynb"),
            "-p", "queries", str(q), "-p", "out_path", str(q), "-p", "artifacts_dir", str(demo_artifacts)]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode != 0 and "is the queries file: writing it would overwrite the input" in r.stderr
    assert q.read_bytes() == demo_queries.read_bytes()


def test_the_inference_fallback_in_a_folder_that_cannot_be_written_is_one_line(tmp_path, demo_queries, monkeypatch):
    folder = tmp_path / "locked"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        os.chmod(folder, 0o555)  # without chattr (or its rights): a read-only folder, which root may still write
    try:
        probe = folder / ".probe"
        try:
            probe.write_text("x")
            probe.unlink()
            pytest.skip("this user can write into a read-only folder and chattr is not available")
        except OSError:
            pass
        line = _refused("inference", tmp_path, monkeypatch, p={"queries": demo_queries, "out_path": folder / "s.csv"})
        assert f"error: {folder / 's.csv'}: cannot be written (" in line and "choose a writable folder for out_path" in line
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        os.chmod(folder, 0o755)


@pytest.mark.parametrize("case", ["out_path a link", "out_path the config", "out_path a FIFO", "queries a FIFO",
                                  "out_path below a file"])
def test_the_inference_fallback_never_writes_through_a_link_over_an_input_or_into_a_fifo(tmp_path, demo_queries, case, monkeypatch):
    """The first cell writes the fallback before lexrag is installed: its own checks come first."""
    target = tmp_path / "kept.csv"
    target.write_text("keep me\n")
    config = tmp_path / "config.yaml"
    config.write_text("count:\n  k: 3\n")
    queries, out = str(demo_queries), tmp_path / "s.csv"
    if case == "out_path a link":
        out.symlink_to(target)
        expected = f"error: out_path {out} is a link, a FIFO or a device"
    elif case == "out_path the config":
        out = config
        expected = f"error: out_path {out} is config_path: writing it would overwrite the input"
    elif case == "out_path a FIFO":
        os.mkfifo(out)
        expected = f"error: out_path {out} is a link, a FIFO or a device"
    elif case == "out_path below a file":
        out = target / "submission.csv"
        expected = f"error: {out}: {target} is a file, not a folder; give a path in a folder; nothing was written"
    else:
        queries = str(tmp_path / "q.csv")
        os.mkfifo(queries)
        expected = f"error: queries {queries}: is a FIFO, socket or device, not a file; nothing was written"
    line = _refused("inference", tmp_path, monkeypatch, p={"queries": queries, "out_path": out, "config_path": config}, timeout=60)
    assert expected in line, line
    assert target.read_text() == "keep me\n" and config.read_text() == "count:\n  k: 3\n"


@pytest.mark.parametrize("nb,params,expected", [
    ("inference", {"queries": "{tmp}/nope.csv"}, "error: queries {tmp}/nope.csv: file not found; nothing was written"),
    ("inference", {"queries": "{queries}", "out_path": "{tmp}"}, "error: out_path {tmp} is a folder"),
    ("validation", {"artifacts_dir": "{artifacts}"}, "error: parameter queries is not set"),
    ("validation", {"queries": "{queries}", "artifacts_dir": "{artifacts}", "llm_cache": "{tmp}/nope"},
     "error: parameter llm_cache {tmp}/nope: not a folder"),
    ("validation", {"queries": "{queries}", "artifacts_dir": "{artifacts}", "llm_cache": "{tmp}"},
     "error: parameter llm_cache {tmp}: the config switches the LLM off"),
    ("01_build_corpus", {"laws": "{tmp}/nope.csv", "out_dir": "{tmp}/art"}, "error: {tmp}/nope.csv: file not found"),
    ("01_build_corpus", {"laws": str(ROOT / "demo" / "laws_demo.csv"), "out_dir": "{artifacts}/corpus"},
     "error: parameter out_dir {artifacts}/corpus is or lies inside the artifact folder"),
    ("04_build_embeddings", {"artifacts_dir": "{artifacts}", "out_dir": "{artifacts}"},
     "error: parameter out_dir {artifacts} holds corpus/: it is the artifacts folder, not the embeddings folder"),
    ("01_build_corpus", {"laws": str(ROOT / "demo" / "laws_demo.csv"), "out_dir": ""},
     "error: parameter out_dir is empty; leave it out (None) for the default, or give a path"),
    ("03_build_graph", {"artifacts_dir": " "}, "error: parameter artifacts_dir is empty"),
    ("inference", {"queries": "{queries}", "out_path": ""}, "error: parameter out_path is empty"),
], ids=["inference: no such queries", "inference: out_path a folder", "validation: no queries", "validation: no such llm_cache",
        "validation: llm_cache with the LLM off",
        "01: no such laws", "01: out_dir the corpus folder", "04: out_dir the artifacts folder", "01: out_dir empty",
        "03: artifacts_dir blank", "inference: out_path empty"])
def test_a_notebook_stops_on_a_wrong_path_with_one_line_naming_it(tmp_path, demo_artifacts, demo_queries, nb, params, expected,
                                                                  monkeypatch):
    fill = {"tmp": tmp_path, "queries": demo_queries, "artifacts": demo_artifacts}
    line = _refused(nb, tmp_path, monkeypatch, p={k: v.format(**fill) for k, v in params.items()})
    assert expected.format(**fill) in line, line


@pytest.mark.parametrize("nb,params,expected", [
    ("validation", {"queries": 3}, "error: parameter queries: expected a path (a string), got int 3"),
    ("validation", {"out_dir": ["a", "b"]}, "error: parameter out_dir: expected a path (a string), got list ['a', 'b']"),
    ("validation", {"llm_cache": {"a": 1}}, "error: parameter llm_cache: expected a path (a string), got dict {'a': 1}"),
    ("validation", {"config_path": 7}, "error: parameter config_path: expected a path (a string), got int 7"),
    ("validation", {"artifacts_dir": 1.5}, "error: parameter artifacts_dir: expected a path (a string), got float 1.5"),
    ("inference", {"queries": [1]}, "error: parameter queries: expected a path (a string), got list [1]"),
    ("01_build_corpus", {"out_dir": 5}, "error: parameter out_dir: expected a path (a string), got int 5"),
], ids=["validation: queries a number", "validation: out_dir a list", "validation: llm_cache a mapping",
        "validation: config_path a number", "validation: artifacts_dir a number", "inference: queries a list", "01: out_dir a number"])
def test_a_path_parameter_of_the_wrong_type_is_one_line_naming_it(tmp_path, demo_artifacts, demo_queries, nb, params, expected,
                                                                  monkeypatch):
    # papermill's -y passes YAML values as they are: a number, list or mapping where a path belongs
    base = {"validation": {"queries": str(demo_queries), "artifacts_dir": str(demo_artifacts), "out_dir": str(tmp_path / "v")},
            "inference": {"artifacts_dir": str(demo_artifacts), "out_path": str(tmp_path / "s.csv")},
            "01_build_corpus": {"laws": str(ROOT / "demo" / "laws_demo.csv")}}[nb]
    # a TypeError where a path is used would propagate instead of the SystemExit: named before any code could trip over it
    line = _refused(nb, tmp_path, monkeypatch, y={**base, **params})
    assert expected in line, line


def test_the_inference_fallback_keeps_an_earlier_answer_and_the_ids_as_written(tmp_path, demo_queries, monkeypatch):
    q = tmp_path / "test.csv"
    # q3 is longer than the csv module's default field limit (128 KiB), which a standard parser reads with a higher one
    q.write_text("query_id,query\n q1 ,Kaufvertrag Pflichten\nq2,Mietvertrag\nq3," + "Vertrag " * 20_000 + "\n", encoding="utf-8")
    out = tmp_path / "s.csv"
    out.write_text("query_id,predicted_citations\nq1,Art. 1 OR\n", encoding="utf-8")
    params = {"queries": q, "out_path": out, "artifacts_dir": tmp_path / "none"}
    printed = _in_process("inference", tmp_path, monkeypatch, p=params)
    assert f"the earlier {out} is kept as {out}.prev" in printed and "FAILED" in printed  # no artifacts: the fallback stays
    assert (tmp_path / "s.csv.prev").read_text(encoding="utf-8") == "query_id,predicted_citations\nq1,Art. 1 OR\n"
    import csv

    rows = list(csv.reader(open(out, encoding="utf-8", newline="")))
    assert [r[0] for r in rows[1:]] == [" q1 ", "q2", "q3"]  # as test.csv writes them: a trimmed id would not match
    assert "FAILED" in _in_process("inference", tmp_path, monkeypatch, p=params)  # fails again: its fallback replaces the fallback
    assert (tmp_path / "s.csv.prev").read_text(encoding="utf-8") == "query_id,predicted_citations\nq1,Art. 1 OR\n"


def test_the_kaggle_folder_variables_without_kaggle_are_refused_before_anything_is_written(tmp_path, demo_queries, monkeypatch):
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.setenv("LEXRAG_KAGGLE_INPUT", str(tmp_path / "in"))
    monkeypatch.setenv("LEXRAG_KAGGLE_WORKING", str(tmp_path / "work"))
    line = _refused("inference", tmp_path, monkeypatch, p={"queries": demo_queries})
    assert "set KAGGLE_KERNEL_RUN_TYPE=Batch too, or unset them" in line, line
    assert not (tmp_path / "submission.csv").exists()


def test_an_earlier_answer_is_never_moved_into_a_folder_of_the_user_s(tmp_path, demo_queries, monkeypatch):
    out = tmp_path / "sub.csv"
    out.write_text("query_id,predicted_citations\ndemo_01,Art. 41 Abs. 1 OR\n", encoding="utf-8")
    (tmp_path / "sub.csv.prev").mkdir()
    line = _refused("inference", tmp_path, monkeypatch, p={"queries": demo_queries, "out_path": out})
    assert f"error: {out}.prev is not a file (a folder or a link)" in line, line
    assert out.read_text(encoding="utf-8").endswith("Art. 41 Abs. 1 OR\n")  # the earlier answer stays where it was
