# %% [markdown]
# # 02 — Build the BM25 index
# The paper's German analyzer (lowercase, split on non-alphanumerics, 86 stopwords, drop
# 1-character tokens, Snowball German stem) over the corpus artifact; saved as a bm25s folder
# with `params.json`, refused at load time under a different config or corpus.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
artifacts_dir = None  # folder holding corpus/, the index goes beside it; None: the corpus built or attached, output to the working folder (Kaggle) or artifacts folder

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
from lexrag.index.build import build_index
from lexrag.kaggle.paths import resolve_paths

try:  # a user error (a missing input, a bad parameter): one line that names it, and the run stops
    artifacts_dir = notebook_path("artifacts_dir", artifacts_dir)
    cfg = load_config(config_path, overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(artifacts_dir) / "bm25" if artifacts_dir else paths.output_dir / "bm25"
    t0 = time.perf_counter()
    index = build_index("bm25", cfg, corpus_dir, out)
    print(f"{index.n_docs} documents, vocabulary {index.params['vocab_size']}, {time.perf_counter() - t0:.1f}s")
except LexragError as e:
    raise SystemExit(f"error: {e}") from None
