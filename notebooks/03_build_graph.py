# %% [markdown]
# # 03 — Build the citation graph
# Extracts every law, BGE and docket reference from the court considerations of the corpus,
# builds the weighted directed graph over parents (decisions, law articles) and its nested
# Leiden communities; saved as arrays and parquet with `params.json`.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
artifacts_dir = None  # folder holding corpus/; the graph goes to <artifacts_dir>/graph

# %%
import time
from pathlib import Path

from lexrag.config import load_config
from lexrag.kaggle.paths import resolve_paths
from lexrag.index.build import build_index

cfg = load_config(config_path, overrides)
art = Path(artifacts_dir) if artifacts_dir else resolve_paths(cfg.paths).artifacts_dir
t0 = time.perf_counter()
graph = build_index("graph", cfg, art / "corpus", art / "graph")
print(f"{graph.n} nodes, {graph.adj.nnz} edges, communities per level {graph.params['communities']}, {time.perf_counter() - t0:.1f}s")
