# %% [markdown]
# # lexrag — validation
# Runs the pipeline over a queries file with gold, writes `metrics.json`, `per_query.csv` and
# `submission.csv` (and `agent_trace.jsonl`, `variants.jsonl`) to the output folder and prints the
# metrics.  Stage switches turn signals off for ablations; `incremental` adds the LLM stages one at
# a time (on a CPU, `demo/config_llm.yaml` runs them with the scripted stand-in model).

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
queries = None  # CSV with query_id,query,gold_citations
artifacts_dir = None  # folder with corpus/ and bm25/; None: the resolver's artifacts folder
out_dir = "validation_out"  # where metrics.json and per_query.csv go
stages = {}  # stage switches, e.g. {"lexical": False, "seeds": True}
ablation = False  # also run with each active stage switched off: ablation.csv and ablation.png
# also add the stages one by one (BM25 alone, then one row per stage the config asks for): incremental.csv, incremental.png
incremental = False
llm_cache = None  # an LLM cache folder (e.g. the lexrag-llm-cache dataset): replay it, load no model

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
    r = subprocess.run([sys.executable, found[0], "--input", root], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "the offline install of lexrag failed (see above)"
    importlib.invalidate_caches()

# %%
import json
from pathlib import Path

from lexrag.config import load_config, notebook_stages
from lexrag.errors import LexragError, one_line_errors
from lexrag.eval.status import run_status
from lexrag.eval.report import plot_ablation
from lexrag.eval.validation import ablation_table, format_metrics, incremental_ablation, validate_run
from lexrag.paths import paths_for
from lexrag.config.notebook import notebook_flag, notebook_mapping, notebook_path
from lexrag.pipeline import Artifacts

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {out_dir}"):
    queries, artifacts_dir, out_dir, llm_cache = (notebook_path(n, v) for n, v in (
        ("queries", queries), ("artifacts_dir", artifacts_dir), ("out_dir", out_dir), ("llm_cache", llm_cache)))
    if not out_dir:
        raise LexragError("parameter out_dir is not set: give the folder for metrics.json and per_query.csv (-p out_dir DIR)")
    if not queries:
        raise LexragError("parameter queries is not set: give a CSV with query_id,query,gold_citations (-p queries FILE.csv)")
    switches = notebook_stages(stages)
    ablation, incremental = notebook_flag("ablation", ablation), notebook_flag("incremental", incremental)
    if llm_cache and not Path(llm_cache).is_dir():
        raise LexragError(f"parameter llm_cache {llm_cache}: not a folder (an LLM cache: the llm.cache_dir of a live run)")
    replay = {"llm.mode": "replay", "llm.replay_dirs": [str(llm_cache)]} if llm_cache else {}
    cfg = load_config(config_path, {**notebook_mapping("overrides", overrides), **switches, **replay})
    if llm_cache and not cfg.llm.enabled:  # else the replay asked for silently would not happen
        raise LexragError(f"parameter llm_cache {llm_cache}: the config switches the LLM off (llm.enabled false), so "
                          "the cache would not be read; use a config with the LLM on, or leave llm_cache out")
    paths = paths_for(artifacts_dir, cfg.paths)
    art = Artifacts.load(paths, cfg)
    metrics, result = validate_run(cfg, art, queries, out_dir, paths=paths, inputs=[("config_path", config_path)])
print(run_status(cfg, art, result).table())
print(format_metrics(metrics, title=f"validation on {queries}"))
print(json.dumps({"timings_s": result.timings, "cost": result.cost_totals(), "model_loads": result.model_loads}, indent=1))

# %%
if ablation:
    rows = ablation_table(cfg, art, queries, out_dir)
    plot_ablation(rows, Path(out_dir) / "ablation.png", title="ablation: the full run, then each stage switched off")
    for r in rows:
        print(f"{r['run']:<18} macro_f1 {r['macro_f1']:.4f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] ({r['delta_macro_f1']:+.4f})  "
              f"recall@100 {r['recall@100']:.4f} ({r['delta_recall@100']:+.4f})")

# %%
if incremental:
    rows = incremental_ablation(cfg, art, queries, out_dir, paths=paths)
    plot_ablation(rows, Path(out_dir) / "incremental.png", title="incremental ablation: BM25, then one stage added per row")
    for r in rows:
        if "macro_f1" in r:
            print(f"{r['run']:<20} macro_f1 {r['macro_f1']:.4f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
                  f"({r['delta_macro_f1']:+.4f}, p={r['p_value']:.3f})  recall@100 {r['recall@100']:.4f}  "
                  f"{r['seconds_per_query']:.3f}s/query")
        else:
            print(f"{r['run']:<20} {r['status']}")

# %%
# One self-contained report of everything above: tables and plots, nothing fetched.
from lexrag.eval.report import write_report

print("report:", write_report(out_dir, title=f"lexrag validation: {queries}"))
