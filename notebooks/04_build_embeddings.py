# %% [markdown]
# # 04 — Build the corpus embeddings (GPU; resumable)
# Encodes the corpus with the configured sentence-transformers model (BGE-M3 on Kaggle) into
# float16 shards of 100K documents. Run it again after a time-out or in a new session with
# `resume_from` pointing at the earlier output: finished shards are kept or copied, and the
# result is identical to an uninterrupted build. With two GPUs set `devices: [cuda:0, cuda:1]`.

# %% tags=["parameters"]
config_path = "kaggle"  # YAML config file or preset name; the kaggle preset finds an attached BGE-M3 (semantic.model)
overrides = {}  # {"section.field": value}, e.g. {"semantic.model": "bge-m3"}
artifacts_dir = None  # folder holding corpus/; None: the resolver's artifacts folder
# the embeddings folder itself (e.g. ARTIFACTS/embeddings); None: ARTIFACTS/embeddings beside the corpus of
# artifacts_dir, else embeddings/ in the working folder (Kaggle) or artifacts folder
out_dir = None
resume_from = None  # an earlier (partial) embeddings folder, e.g. an attached output of a previous session
max_shards = None  # stop after this many new shards (None: all)
time_budget_s = 0.0  # stop starting new shards after this many seconds (0: no limit)

# %%
# Offline install on Kaggle (lexrag is not importable before it): the installer ships in the wheels dataset.
import glob
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("lexrag") is None:
    root = os.environ.get("LEXRAG_KAGGLE_INPUT") or "/kaggle/input"
    # a bounded depth, not "**": links among the inputs (a -> ..) would send a recursive search round for ever
    found = sorted(p for d in range(6) for p in glob.glob(os.path.join(glob.escape(root), *["*"] * d, "lexrag_install.py")))
    assert found, ("lexrag is not installed and no lexrag_install.py is among the inputs: attach lexrag-wheels "
                   "(locally: pip install ./kernel_src)")
    r = subprocess.run([sys.executable, found[0], "--input", root, '--no-llm'], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "the offline install of lexrag failed (see above)"
    importlib.invalidate_caches()

# %%
from lexrag.errors import one_line_errors
from lexrag.kaggle.notebook import build_embeddings_cell

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {out_dir or artifacts_dir or 'the output folder'}"):
    print(build_embeddings_cell(config_path, overrides, artifacts_dir, out_dir, resume_from, max_shards, time_budget_s))
