# %% [markdown]
# # 03 — Build the citation graph
# Extracts every law, BGE and docket reference from the court considerations of the corpus,
# builds the weighted directed graph over parents (decisions, law articles) and its nested
# Leiden communities; saved as arrays and parquet with `params.json`.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
artifacts_dir = None  # folder holding corpus/, the graph goes beside it; None: the corpus built or attached, output to the working folder (Kaggle) or artifacts folder

# %%
# Offline install on Kaggle (lexrag is not importable before it): the installer ships in the wheels dataset.
import glob
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("lexrag") is None:
    root = os.environ.get("LEXRAG_KAGGLE_INPUT", "/kaggle/input")
    found = sorted(glob.glob(os.path.join(root, "**", "lexrag_install.py"), recursive=True))
    assert found, "lexrag is not installed and no lexrag_install.py is among the inputs: attach lexrag-wheels (locally: pip install ./kernel_src)"
    r = subprocess.run([sys.executable, found[0], "--input", root, '--no-llm'], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "the offline install of lexrag failed (see above)"
    importlib.invalidate_caches()

# %%
import time
from pathlib import Path

from lexrag.config import load_config, notebook_path
from lexrag.errors import LexragError
from lexrag.index.build import build_index, has_court_edges
from lexrag.kaggle.paths import resolve_paths

try:  # a user error (a missing input, a bad parameter): one line that names it, and the run stops
    artifacts_dir = notebook_path("artifacts_dir", artifacts_dir)
    cfg = load_config(config_path, overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(artifacts_dir) / "graph" if artifacts_dir else paths.output_dir / "graph"
    t0 = time.perf_counter()
    graph = build_index("graph", cfg, corpus_dir, out)
    print(f"{graph.n} nodes, {graph.adj.nnz} edges, communities per level {graph.params['communities']}, {time.perf_counter() - t0:.1f}s")
    if not has_court_edges(graph):
        print("warning: the graph has no court edges (the corpus holds no court considerations that cite): runs leave "
              "the graph signals off over it; build the corpus with court_considerations.csv (notebook 01) and rebuild")
except LexragError as e:
    raise SystemExit(f"error: {e}") from None
