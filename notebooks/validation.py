# %% [markdown]
# # lexrag — validation
# Runs the pipeline over a queries file with gold, writes `metrics.json`, `per_query.csv` and
# `submission.csv` to the output folder and prints the metrics.  Stage switches turn signals
# off for ablations.

# %% tags=["parameters"]
config_path = None  # YAML config file, or None for the defaults
overrides = {}  # {"section.field": value}
queries = None  # CSV with query_id,query,gold_citations
artifacts_dir = None  # folder with corpus/ and bm25/; None: the resolver's artifacts folder
out_dir = "validation_out"  # where metrics.json and per_query.csv go
stages = {}  # stage switches, e.g. {"lexical": False, "seeds": True}

# %%
import json
from pathlib import Path

from lexrag.config import load_config
from lexrag.paths import resolve_paths
from lexrag.pipeline import Artifacts
from lexrag.validation import format_metrics, validate_run

switches = {f"{stage}.enabled": bool(on) for stage, on in stages.items()}
cfg = load_config(config_path, {**overrides, **switches})
paths = resolve_paths(cfg.paths)
art = Artifacts.load(artifacts_dir or paths.artifacts_dir, cfg)
metrics, result = validate_run(cfg, art, queries, out_dir)
print(format_metrics(metrics, title=f"validation on {queries}"))
print(json.dumps({"timings_s": result.timings}, indent=1))
