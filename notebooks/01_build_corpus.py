# %% [markdown]
# # 01 — Build the unified corpus
# Streams `laws_de.csv` and the `court_considerations.csv` beside it (or the one given) into the corpus artifact,
# with the French and Italian law abbreviations of `abbrev-translations.json` when it is there:
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
    found = sorted(glob.glob(os.path.join(root, "**", "lexrag_install.py"), recursive=True))
    assert found, ("lexrag is not installed and no lexrag_install.py is among the inputs: attach lexrag-wheels "
                   "(locally: pip install ./kernel_src)")
    r = subprocess.run([sys.executable, found[0], "--input", root, '--no-llm'], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "the offline install of lexrag failed (see above)"
    importlib.invalidate_caches()

# %%
import json
from pathlib import Path

from lexrag.config import load_config
from lexrag.errors import one_line_errors
from lexrag.index.build import courts_beside
from lexrag.index.corpus import build_corpus
from lexrag.index.dictionary import build_dictionary
from lexrag.paths import InputNotFound, resolve_paths
from lexrag.notebook_params import notebook_path

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {out_dir or 'the output folder'}"):
    laws = notebook_path("laws", laws)
    courts = False if courts is False else notebook_path("courts", courts)  # False: laws only
    abbreviations = notebook_path("abbreviations", abbreviations)
    dictionary = False if dictionary is False else notebook_path("dictionary", dictionary)
    out_dir = notebook_path("out_dir", out_dir)
    cfg = load_config(config_path, overrides)
    paths = resolve_paths(cfg.paths)
    laws = laws or paths.input_file("laws_de.csv")
    if abbreviations is None:
        try:
            abbreviations = paths.input_file("abbrev-translations.json")
        except InputNotFound:
            abbreviations = None  # then questions citing "Art. 17 LAI" find nothing for it (README "Design notes")
        if abbreviations is not None and not Path(abbreviations).is_file():
            abbreviations = None
    if dictionary is None:
        try:
            dictionary = paths.input_file("de-en")
        except InputNotFound:
            dictionary = None
        if dictionary is not None and not Path(dictionary).is_file():
            dictionary = None
    out = Path(out_dir) if out_dir else paths.output_dir
    from lexrag.outputs import check_outside_artifacts

    check_outside_artifacts(out, "parameter out_dir", "give the artifacts folder that holds (or will hold) corpus/")
    courts = courts_beside(laws, courts, say=False)  # said once, here
    print(f"courts: {courts or 'none: laws only, so the graph will have no court edges'}")
    print(f"abbreviations: {abbreviations or 'none: questions citing a French or Italian abbreviation (Art. 17 LAI) find nothing for it'}")
    report = build_corpus(out / "corpus", laws, courts, cfg.corpus, progress=cfg.runtime.progress, abbreviations=abbreviations)
    print(json.dumps({"n_docs": report["n_docs"], "code_aliases": report.get("code_aliases", 0)}))
    if dictionary:
        d = build_dictionary(dictionary, out / "dictionary")
        print(f"dictionary: {len(d.entries)} English keys from {dictionary} ({d.doc['licence'].split(' (')[0]})")
    else:
        print("dictionary: none given, so English questions are searched as written where the LLM does not translate")
