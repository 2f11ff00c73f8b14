# make demo       build the artifacts from the embedded demo slice, run the validation notebook, print metrics
# make demo-llm   the LLM stages on the demo, answered by the scripted stand-in model (no GPU, no weights)
# make demo-manifest  re-record the demo artifacts' hashes after a change that alters their bytes
# make test       the test suite (after caching the wheels of the emulated Kaggle runtime)
# make test-fast  the in-process tests of lexrag only (no process, notebook kernel or scripts/ tool): the quick loop
# make quality    retrieval quality on the competition data in DATA (default ../shared/data)
# All create .venv on first use: demo the smaller install of requirements-demo.txt, the others requirements.txt (everything).

VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
DEMO_OUT ?= out/demo
DATA ?= ../shared/data
DICTIONARY ?= /usr/share/trans/de-en
# Caches that would otherwise go under the home folder: the artifact hash cache (LEXRAG_CACHE_DIR)
# and matplotlib's font cache. `make clean` removes them with the rest of out/.
CACHE_DIR ?= $(CURDIR)/out/cache
export MPLCONFIGDIR ?= $(CACHE_DIR)/matplotlib
# Keep Jupyter/IPython state out of the home folder: scratch under out/, which `make clean` removes
# (a fresh temporary folder per make call would be left behind by every call).
JUPYTER_TMP ?= $(CURDIR)/out/jupyter
export JUPYTER_DATA_DIR := $(JUPYTER_TMP)/data
export JUPYTER_CONFIG_DIR := $(JUPYTER_TMP)/config
export JUPYTER_RUNTIME_DIR := $(JUPYTER_TMP)/runtime
export IPYTHONDIR := $(JUPYTER_TMP)/ipython
export HF_HUB_OFFLINE := 1
export PYTHONUNBUFFERED := 1

# the tests keep their own hash cache in a temporary folder (tests/conftest.py)
demo demo-llm quality bench: export LEXRAG_CACHE_DIR ?= $(CACHE_DIR)/lexrag

.PHONY: demo demo-llm demo-manifest test test-fast venv demo-venv notebooks bench quality clean kaggle-sim

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt kernel_src/pyproject.toml
	@mkdir -p $(IPYTHONDIR)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e ./kernel_src
	touch $@

# the demo's smaller install (requirements-demo.txt: no torch, transformers, faiss, LightGBM); a full
# venv serves it as it is
demo-venv: $(VENV)/.demo-installed

$(VENV)/.demo-installed: requirements-demo.txt requirements.txt kernel_src/pyproject.toml
	@mkdir -p $(IPYTHONDIR)
	@if [ -f $(VENV)/.installed ] && [ $(VENV)/.installed -nt requirements.txt ]; then touch $@; else \
		$(PYTHON) -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && \
		$(PY) -m pip install -q -r requirements-demo.txt && $(PY) -m pip install -q --no-deps -e ./kernel_src && touch $@; fi

demo: demo-venv
	$(PY) -m lexrag build --laws demo/laws_demo.csv --courts demo/courts_demo.csv --out $(DEMO_OUT)/artifacts --config demo/config.yaml \
		--dictionary demo/dictionary_demo.txt
	$(PY) -m papermill -k python3 notebooks/validation.ipynb $(DEMO_OUT)/validation.ipynb \
		-p config_path demo/config.yaml -p queries demo/queries_demo.csv \
		-p artifacts_dir $(DEMO_OUT)/artifacts -p out_dir $(DEMO_OUT)
	$(PY) -m lexrag show-metrics $(DEMO_OUT)/metrics.json
	$(PY) -m lexrag check-scores $(DEMO_OUT)/metrics.json --expected demo/expected.yaml

# the LLM stages on the demo with the scripted stand-in model (no GPU, no weights): incremental ablation
demo-llm: venv
	$(PY) -m lexrag build --laws demo/laws_demo.csv --courts demo/courts_demo.csv --out $(DEMO_OUT)/artifacts --config demo/config.yaml \
		--dictionary demo/dictionary_demo.txt
	$(PY) -m lexrag -q calibrate --queries demo/queries_demo.csv --artifacts $(DEMO_OUT)/artifacts --config demo/config_llm.yaml \
		--set llm.cache_dir=$(DEMO_OUT)/llm/cache
	$(PY) -m papermill -k python3 notebooks/validation.ipynb $(DEMO_OUT)/llm/validation.ipynb \
		-p config_path demo/config_llm.yaml -p queries demo/queries_demo.csv -p incremental True \
		-p artifacts_dir $(DEMO_OUT)/artifacts -p out_dir $(DEMO_OUT)/llm \
		-y '{"overrides": {"llm.cache_dir": "$(DEMO_OUT)/llm/cache"}}'
	$(PY) -m lexrag show-metrics $(DEMO_OUT)/llm/metrics.json

# re-record demo/artifacts_manifest.yaml after a change that alters the artifacts' bytes (a test compares a fresh build with it)
demo-manifest: venv
	$(PY) build_datasets.py --manifest demo/artifacts_manifest.yaml --record --out $(DEMO_OUT)/datasets \
		--laws demo/laws_demo.csv --courts demo/courts_demo.csv --train demo/queries_demo.csv --only corpus,bm25,graph,prior

# Python of the emulated Kaggle runtime: 3.12 as on Kaggle, else this Python
KAGGLE_PY ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.12) $(PYTHON))

# wheels for the emulated Kaggle runtime (the one step of the tests that uses the package index)
kaggle-sim: venv
	$(PY) tests/kaggle_sim.py prepare --python $(KAGGLE_PY) --out .cache/kaggle-sim

test: venv kaggle-sim
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q tests

# the in-process tests of lexrag only (no notebook kernel, CLI process, or test of a tool under scripts/):
# the quick loop while working; `make test` runs these and the rest
test-fast: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -m "not slow and not process and not scripts" tests

notebooks: venv
	$(VENV)/bin/jupytext --to ipynb --set-kernel python3 notebooks/*.py

# without the data: one line saying what it needs, before .venv is made
ifneq ($(filter quality,$(MAKECMDGOALS)),)
ifeq ($(wildcard $(DATA)/laws_de.csv),)
$(error make quality needs the competition data (laws_de.csv, lexam_dev.csv, train_dev.csv, val.csv) in $(DATA); set DATA=FOLDER)
endif
ifeq ($(wildcard $(DICTIONARY)),)
$(error make quality needs Ding's English-German dictionary at $(DICTIONARY) (apt-get install trans-de-en); set DICTIONARY=FILE)
endif
ifeq ($(wildcard $(DATA)/laws_de_headings.csv),)
$(error make quality needs laws_de_headings.csv in $(DATA) (scripts/make_headings.py makes it): repro/ is measured with the statute headings)
endif
ifeq ($(wildcard $(DATA)/laws_en.csv),)
$(error make quality needs laws_en.csv (the laws' English texts keyed by their German citations) in $(DATA): repro/ measures the English route)
endif
endif
quality: venv
	$(PY) scripts/quality.py --data $(DATA) --dictionary $(DICTIONARY) --final --expected repro/lexam_dev.yaml \
		--json out/quality/lexam_dev.json
	$(PY) scripts/quality.py --data $(DATA) --dictionary $(DICTIONARY) --final --by area --ablation ranker \
		--expected repro/lexam_dev_ranker.yaml --json out/quality/lexam_dev_ranker.json
	$(PY) scripts/quality.py --data $(DATA) --dictionary $(DICTIONARY) --by area --baseline lexical --variants \
		"lexical - dict_de=lexical;dictionary.enabled=false" lexical "lexical + English=lexical;english.enabled=true" \
		"English route alone=lexical;english.enabled=true;dictionary.enabled=false" \
		"exam, fixed count - dict_de=exam;ranker.enabled=false;count.method=fixed;dictionary.enabled=false" \
		"exam, fixed count=exam;ranker.enabled=false;count.method=fixed" \
		"exam, fixed count + English=exam;ranker.enabled=false;count.method=fixed;english.enabled=true" \
		--expected repro/val_dictionary.yaml --json out/quality/val_dictionary.json

bench: venv
	$(PY) scripts/bench_bm25.py

clean:
	rm -rf out .pytest_cache
