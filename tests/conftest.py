"""Shared fixtures: the embedded demo slice, tiny inline corpora, artifacts built once per session."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the helpers of test files that start another Python process (a CLI run, build_datasets.py, a notebook)
_SPAWNING_HELPERS = {"test_build_datasets.py": "run(", "test_pipeline_cli.py": "cli(", "test_trec.py": "_cli(",
                     "test_kaggle_emulated.py": "_run_notebook(", "test_notebooks.py": "_papermill("}
# test files that test the tools under scripts/ (data preparation, English-question experiments) throughout
_SCRIPT_FILES = {"test_english_questions.py", "test_make_headings.py"}
# a test that imports a module of scripts/ (the tests' pythonpath holds scripts/), in its code or in a child's
_SCRIPT_IMPORT = re.compile(r"\b(?:import|from)\s+(?:%s)\b" % "|".join(sorted(p.stem for p in (ROOT / "scripts").glob("*.py"))))


def pytest_configure(config):
    config.addinivalue_line("markers", "scripts: tests a tool under scripts/ (a benchmark, an experiment, data preparation); "
                                       "marked by tests/conftest.py; make test-fast leaves these out")


def _tests_a_script(item, src: str) -> bool:
    """Whether a test runs or imports a tool under scripts/ (benchmarks, experiments, quality.py)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return (item.path.name in _SCRIPT_FILES or '"scripts"' in src or "'scripts'" in src or bool(_SCRIPT_IMPORT.search(src))
            or any(isinstance(v, str) and v.startswith("scripts/") for v in params.values()))


def pytest_collection_modifyitems(config, items):
    """Mark ``process`` every test that starts another Python process (its source calls subprocess,
    runs papermill, a script under scripts/ or its file's spawning helper), and ``scripts`` every
    test of a tool under scripts/, so ``make test-fast`` keeps the in-process tests of lexrag."""
    import inspect

    for item in items:
        fn = getattr(item, "function", None)
        try:
            src = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            continue
        helper = _SPAWNING_HELPERS.get(item.path.name)
        # "papermill" quoted: a papermill command line (a test of papermill's parameters run in process is not one)
        if ("subprocess" in src or '"papermill"' in src or '"scripts"' in src or "runpy" in src
                or (helper and helper in src.split("\n", 1)[-1])):
            item.add_marker(pytest.mark.process)
        if _tests_a_script(item, src):
            item.add_marker(pytest.mark.scripts)


DEMO = ROOT / "demo"

# Keep Jupyter state out of the home folder, even when pytest is run directly.
_jtmp = tempfile.mkdtemp(prefix="lexrag-test-jupyter-")
atexit.register(shutil.rmtree, _jtmp, True)  # removed when the test session ends
for var, sub in [("JUPYTER_DATA_DIR", "data"), ("JUPYTER_CONFIG_DIR", "config"),
                 ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")]:
    os.environ.setdefault(var, os.path.join(_jtmp, sub))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LEXRAG_CACHE_DIR", os.path.join(_jtmp, "lexrag-cache"))  # artifact hash cache
os.environ.pop("KAGGLE_KERNEL_RUN_TYPE", None)

_frozen_at = 0  # how many modules were imported when the garbage collector last froze what was alive


@pytest.fixture(autouse=True)
def _collect_only_what_tests_make():
    """A run of the pipeline ends with a full garbage collection (models.release_memory); in this one
    long process, holding torch, transformers and every module a test imported, each one walked
    millions of objects (0.3 s; over a minute of make test-fast).  Once a test imported new modules,
    the garbage is collected and what is alive then is frozen (gc.freeze): later collections walk
    only what later tests make, and still free all of it."""
    import gc
    import sys

    global _frozen_at
    if len(sys.modules) != _frozen_at:
        gc.collect()
        gc.freeze()
        _frozen_at = len(sys.modules)
    yield


def write_csv_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def demo_laws() -> Path:
    return DEMO / "laws_demo.csv"


@pytest.fixture(scope="session")
def demo_queries() -> Path:
    return DEMO / "queries_demo.csv"


@pytest.fixture(scope="session")
def demo_courts() -> Path:
    return DEMO / "courts_demo.csv"


@pytest.fixture(scope="session")
def demo_artifacts(tmp_path_factory, demo_laws, demo_courts) -> Path:
    """The artifacts `make demo` builds: the law slice, the demo's court considerations and its small dictionary."""
    from lexrag.config import load_config
    from lexrag.pipeline.build import build_artifacts

    out = tmp_path_factory.mktemp("demo_artifacts")
    cfg = load_config(overrides={"runtime.progress": False})
    build_artifacts(cfg, demo_laws, out, courts=demo_courts, dictionary=DEMO / "dictionary_demo.txt")
    return out


TINY_LAWS = """citation,text,title
Art. 1 Abs. 1 OR,"Der Vertrag kommt durch übereinstimmende gegenseitige Willensäusserung der Parteien zustande.",Obligationenrecht
Art. 1 Abs. 2 OR,"Die Willensäusserung kann eine ausdrückliche oder stillschweigende sein.",Obligationenrecht
Art. 41 Abs. 1 OR,"Wer einem andern widerrechtlich Schaden zufügt, sei es mit Absicht, sei es aus Fahrlässigkeit, wird ihm zum Ersatze verpflichtet.",Obligationenrecht
Art. 8 ZGB,"Wo das Gesetz es nicht anders bestimmt, hat derjenige das Vorhandensein einer behaupteten Tatsache zu beweisen, der aus ihr Rechte ableitet.",Zivilgesetzbuch
Art. 2 Abs. 1 ZGB,"Jedermann hat in der Ausübung seiner Rechte und in der Erfüllung seiner Pflichten nach Treu und Glauben zu handeln.",Zivilgesetzbuch
Art. 2 Abs. 2 ZGB,"Der offenbare Missbrauch eines Rechtes findet keinen Rechtsschutz.",Zivilgesetzbuch
Art. 100 Abs. 1 BGG,"Die Beschwerde gegen einen Entscheid ist innert 30 Tagen nach der Eröffnung der vollständigen Ausfertigung beim Bundesgericht einzureichen.",Bundesgerichtsgesetz
"""

TINY_COURTS = """citation,text
BGE 145 II 32 E. 3.1,"Die Beschwerde ist innert 30 Tagen einzureichen (Art. 100 Abs. 1 BGG; BGE 144 II 1 E. 2)."
BGE 145 II 32 E. 3.2,"Treu und Glauben (Art. 2 Abs. 1 ZGB) gilt auch im Verfahren."
5A_800/2019 E. 2.,"Die Beweislast richtet sich nach Art. 8 ZGB; vgl. BGE 145 II 32 E. 3.1."
"""


@pytest.fixture
def build_datasets():
    """build_datasets.py loaded as a module, so its ``main`` runs in the test's process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_datasets_under_test", ROOT / "build_datasets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def committed_manifest(tmp_path, monkeypatch, build_datasets) -> Path:
    """A copy of the committed artifacts_manifest.yaml that ``build_datasets`` takes for the
    committed one, so a test may let a build rewrite it."""
    committed = tmp_path / "repo" / "artifacts_manifest.yaml"
    committed.parent.mkdir()
    shutil.copy(ROOT / "artifacts_manifest.yaml", committed)
    monkeypatch.setattr(build_datasets, "COMMITTED", committed)
    return committed


@pytest.fixture
def tiny_inputs(tmp_path) -> tuple[Path, Path]:
    laws = tmp_path / "laws.csv"
    courts = tmp_path / "courts.csv"
    laws.write_text(TINY_LAWS, encoding="utf-8")
    courts.write_text(TINY_COURTS, encoding="utf-8")
    return laws, courts


@pytest.fixture(scope="session")
def tiny_llm(tmp_path_factory) -> Path:
    from lexrag.testing import make_tiny_llm

    return make_tiny_llm(tmp_path_factory.mktemp("tiny_llm") / "tiny-qwen2")


class Clock:
    """Seconds that pass only when a test (or the scripted model) says so."""

    def __init__(self):
        self.t = 1000.0

    def perf_counter(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


@pytest.fixture
def clock(monkeypatch):
    """A clock for the walk, the budget and the scripted model's simulated cost: no test races the wall clock."""
    import lexrag.llm.scripted as scripted_mod
    import lexrag.pipeline.budget as budget_mod
    import lexrag.pipeline.run as run_mod

    c = Clock()
    fake = types.SimpleNamespace(perf_counter=c.perf_counter, time=lambda: c.t, sleep=c.sleep)
    monkeypatch.setattr(run_mod, "time", fake)
    monkeypatch.setattr(budget_mod, "time", fake)
    monkeypatch.setattr(scripted_mod, "time", fake, raising=False)
    return c
