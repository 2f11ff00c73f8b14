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
    found = sorted(glob.glob(os.path.join(root, "**", "lexrag_install.py"), recursive=True))
    assert found, ("lexrag is not installed and no lexrag_install.py is among the inputs: attach lexrag-wheels "
                   "(locally: pip install ./kernel_src)")
    r = subprocess.run([sys.executable, found[0], "--input", root, '--no-llm'], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    assert r.returncode == 0, "the offline install of lexrag failed (see above)"
    importlib.invalidate_caches()

# %%
import time
from pathlib import Path

from lexrag.config import load_config
from lexrag.errors import LexragError, one_line_errors
from lexrag.index.build import build_index
from lexrag.paths import resolve_paths
from lexrag.notebook_params import notebook_path

# a user error (a missing input, a bad parameter) or a full disk: one line that names it, and the run stops
with one_line_errors(f"a file under {out_dir or artifacts_dir or 'the output folder'}"):
    artifacts_dir = notebook_path("artifacts_dir", artifacts_dir)
    out_dir = notebook_path("out_dir", out_dir)
    resume_from = notebook_path("resume_from", resume_from)
    # the kaggle preset places the encoder on cuda:1 for inference; a build encodes on every GPU there is
    cfg = load_config(config_path, {"semantic.device": "auto", **overrides} if config_path == "kaggle" else overrides)
    paths = resolve_paths(cfg.paths)
    corpus_dir = Path(artifacts_dir) / "corpus" if artifacts_dir else paths.built("corpus")
    out = Path(out_dir) if out_dir else (Path(artifacts_dir) / "embeddings" if artifacts_dir else paths.output_dir / "embeddings")
    if (out / "corpus").is_dir():  # the artifacts root: the shards would lie loose beside corpus/, where no run looks
        raise LexragError(f"parameter out_dir {out} holds corpus/: it is the artifacts folder, not the embeddings folder; "
                          f"give {out / 'embeddings'}")
    t0 = time.perf_counter()
    done = build_index("embeddings", cfg, corpus_dir, out, model=paths.model(cfg.semantic.model, "semantic.model"),
                       max_shards=max_shards, time_budget_s=time_budget_s, resume_from=resume_from)
    print(f"embeddings {'complete' if done else 'incomplete: run again to resume'} in {time.perf_counter() - t0:.1f}s -> {out}")
