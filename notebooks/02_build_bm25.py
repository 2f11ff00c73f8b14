# %% [markdown]
# # 02 — Build the BM25 index
# The paper's German analyzer (lowercase, split on non-alphanumerics, 86 stopwords, drop
# 1-character tokens, Snowball German stem) over the corpus artifact; saved as a bm25s folder
# with `params.json`, refused at load time under a different config or corpus.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
artifacts_dir = None  # folder holding corpus/; the index goes to <artifacts_dir>/bm25

# %%
import time
from pathlib import Path

from lexrag.config import load_config
from lexrag.kaggle.paths import resolve_paths
from lexrag.index.build import build_index

cfg = load_config(config_path, overrides)
art = Path(artifacts_dir) if artifacts_dir else resolve_paths(cfg.paths).artifacts_dir
t0 = time.perf_counter()
index = build_index("bm25", cfg, art / "corpus", art / "bm25")
print(f"{index.n_docs} documents, vocabulary {index.params['vocab_size']}, {time.perf_counter() - t0:.1f}s")
