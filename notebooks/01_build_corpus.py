# %% [markdown]
# # 01 — Build the unified corpus
# Streams `laws_de.csv` and the `court_considerations.csv` beside it (or the one given) into the corpus artifact,
# with the French and Italian law abbreviations of `abbrev-translations.json` and the statute headings of
# `laws_de_headings.csv` (made by `scripts/make_headings.py`; indexed beside each paragraph) when they are there:
# one parquet row per document plus `params.json` and a build report that counts and quotes
# every dropped or repaired row.  Given an English-German dictionary file (Ding's `de-en`, or
# FreeDict's `freedict-eng-deu.index` beside its `.dict.dz`; GPL, attach it as your own dataset),
# it also builds the dictionary artifact that translates English questions without an LLM
# (upload it as `lexrag-dictionary`, under the dictionary's licence).

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
laws = None  # path to laws_de.csv; None: <input folder>/laws_de.csv
courts = None  # path to court_considerations.csv; None: the one beside laws_de.csv when there is one; False: laws only
abbreviations = None  # abbrev-translations.json (French/Italian law abbreviations); None: the input's, when there is one
headings = None  # citation,article_heading,path CSV (scripts/make_headings.py); None: an input's laws_de_headings.csv; False: none
dictionary = None  # Ding's de-en or FreeDict's freedict-eng-deu.index; None: an input's de-en, when there is one; False: none
out_dir = None  # artifacts folder; None: the working folder on Kaggle, the artifacts folder locally

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
from lexrag.kaggle.notebook import build_corpus_cell

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {out_dir or 'the output folder'}"):
    print(build_corpus_cell(config_path, overrides, laws, courts, abbreviations, dictionary, out_dir, headings))
