# %% [markdown]
# # 03 — Build the citation graph
# Extracts every law, BGE and docket reference from the court considerations of the corpus,
# builds the weighted directed graph over parents (decisions, law articles) and its nested
# Leiden communities; saved as arrays and parquet with `params.json`.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
# folder holding corpus/, the graph goes beside it; None: the corpus built or attached, output to the working
# folder (Kaggle) or artifacts folder
artifacts_dir = None

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
from lexrag.kaggle.notebook import build_artifact
from lexrag.config.notebook import notebook_path

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {artifacts_dir or 'the output folder'}"):
    print(build_artifact("graph", config_path, overrides, notebook_path("artifacts_dir", artifacts_dir)))
