# %% [markdown]
# # lexrag — inference
# "Save & Run All": installs the vendored package offline (on Kaggle), loads the artifacts from
# the attached datasets, answers `test.csv` and always writes a valid `submission.csv`.

# %% tags=["parameters"]
config_path = "kaggle"  # YAML config file or a preset name (kaggle, lexical); None: the defaults
overrides = {}  # {"section.field": value}
queries = None  # queries CSV; None: test.csv from the competition input
artifacts_dir = None  # folder with corpus/ and bm25/; None: the resolver (attached datasets on Kaggle)
out_path = None  # None: submission.csv in the working folder
wheels_dir = None  # folder of wheels for the offline install; None: search attached datasets

# %%
# Offline install on Kaggle: the package is not importable until it is installed, so this cell
# alone looks for the wheels dataset itself.
import glob
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("lexrag") is None:
    if not os.environ.get("KAGGLE_KERNEL_RUN_TYPE") and wheels_dir is None:
        raise RuntimeError("lexrag is not installed: pip install ./kernel_src (or pass wheels_dir)")
    found = [wheels_dir] if wheels_dir else sorted({os.path.dirname(p) for p in glob.glob("/kaggle/input/*/lexrag-*.whl") + glob.glob("/kaggle/input/*/*/lexrag-*.whl")})
    if not found:
        raise RuntimeError("no lexrag wheel found in the attached datasets; attach the lexrag-wheels dataset")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", found[0], "lexrag[semantic,llm]"])

# %%
from pathlib import Path

from lexrag.config import load_config
from lexrag.kaggle.paths import resolve_paths
from lexrag.pipeline import Artifacts, run_pipeline
from lexrag.queries import load_queries
from lexrag.eval.submission import validate_submission, write_submission

cfg = load_config(config_path, overrides)
paths = resolve_paths(cfg.paths)
queries_file = Path(queries) if queries else paths.input_file("test.csv")
qs = load_queries(queries_file, cfg.query.max_chars)
out = Path(out_path) if out_path else paths.working_dir / "submission.csv"

# %%
# Always leave a valid file behind: an empty submission first, then the real one.
write_submission(out, {}, [q.query_id for q in qs])
art = Artifacts.load(artifacts_dir, cfg) if artifacts_dir else Artifacts.load(None, cfg, paths=paths)
result = run_pipeline(qs, art, cfg, paths=paths)
write_submission(out, result.predictions, result.query_ids)
problems = validate_submission(out, result.query_ids, art.corpus.citations)
assert not problems, problems
print(f"wrote {out}: {len(result.query_ids)} queries in {result.timings['total']:.1f}s; degraded: {len(result.degraded)}")
print("seconds per stage:", {k: round(v, 1) for k, v in result.timings.items()})
print("cost per stage:", result.cost_totals())
