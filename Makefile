# make demo: build the artifacts from the embedded demo slice, run the validation notebook, print metrics
# make test: the test suite (after caching the wheels of the emulated Kaggle runtime)
# Both create .venv and install requirements.txt plus the package on first use.

VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
DEMO_OUT ?= out/demo
# Keep Jupyter/IPython state out of the home folder.
JUPYTER_TMP := $(shell mktemp -d -t lexrag-jupyter-XXXXXX)
export JUPYTER_DATA_DIR := $(JUPYTER_TMP)/data
export JUPYTER_CONFIG_DIR := $(JUPYTER_TMP)/config
export JUPYTER_RUNTIME_DIR := $(JUPYTER_TMP)/runtime
export IPYTHONDIR := $(JUPYTER_TMP)/ipython
export HF_HUB_OFFLINE := 1
export PYTHONUNBUFFERED := 1

.PHONY: demo demo-llm test venv notebooks bench quality clean kaggle-sim

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt kernel_src/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e ./kernel_src
	touch $@

demo: venv
	$(PY) -m lexrag build --laws demo/laws_demo.csv --out $(DEMO_OUT)/artifacts --config demo/config.yaml
	$(PY) -m papermill -k python3 notebooks/validation.ipynb $(DEMO_OUT)/validation.ipynb \
		-p config_path demo/config.yaml -p queries demo/queries_demo.csv \
		-p artifacts_dir $(DEMO_OUT)/artifacts -p out_dir $(DEMO_OUT)
	$(PY) -m lexrag show-metrics $(DEMO_OUT)/metrics.json
	$(PY) -m lexrag check-scores $(DEMO_OUT)/metrics.json --expected demo/expected.yaml

# the LLM stages on the demo with the scripted stand-in model (no GPU, no weights): incremental ablation
demo-llm: venv
	$(PY) -m lexrag build --laws demo/laws_demo.csv --out $(DEMO_OUT)/artifacts --config demo/config.yaml
	$(PY) -m lexrag -q calibrate --queries demo/queries_demo.csv --artifacts $(DEMO_OUT)/artifacts --config demo/config_llm.yaml \
		--set llm.cache_dir=$(DEMO_OUT)/llm/cache
	$(PY) -m papermill -k python3 notebooks/validation.ipynb $(DEMO_OUT)/llm/validation.ipynb \
		-p config_path demo/config_llm.yaml -p queries demo/queries_demo.csv -p incremental True \
		-p artifacts_dir $(DEMO_OUT)/artifacts -p out_dir $(DEMO_OUT)/llm \
		-y '{"overrides": {"llm.cache_dir": "$(DEMO_OUT)/llm/cache"}}'
	cat $(DEMO_OUT)/llm/incremental.csv

# Python of the emulated Kaggle runtime: 3.12 as on Kaggle, else this Python
KAGGLE_PY ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12) $(PYTHON))

# wheels for the emulated Kaggle runtime (the one step of the tests that uses the package index)
kaggle-sim: venv
	$(PY) tests/kaggle_sim.py prepare --python $(KAGGLE_PY) --out .cache/kaggle-sim

test: venv kaggle-sim
	$(PY) -m pytest -q tests

notebooks: venv
	$(VENV)/bin/jupytext --to ipynb --set-kernel python3 notebooks/*.py

quality: venv
	$(PY) scripts/quality.py --data ../shared/data

bench: venv
	$(PY) scripts/bench_bm25.py

clean:
	rm -rf out .pytest_cache
