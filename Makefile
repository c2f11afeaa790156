# trainstack: `make demo` runs the training job locally; `make test` runs every check.
# Both set up what they need on a fresh machine (Python 3.10+ with venv; no GPU, no cloud).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STAMP := $(VENV)/.installed-stamp
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp

.PHONY: setup demo test lint bench clean

setup: $(STAMP) $(CHECKOV_STAMP)

# torch==2.13.0 first: it resolves to the local CPU build; anything else would pull GBs of CUDA wheels.
# requirements.txt is the Pulumi program's lock (what `pulumi install` puts into this same .venv):
# installed with the package, so make's venv holds exactly those pins and Pulumi finds nothing to do.
$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt -e ".[infra,dev]"
	touch $@

# checkov's dependencies conflict with the Pulumi SDK's, so it lives in a venv of its own.
$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q checkov==3.3.30
	touch $@

demo: $(STAMP)
	$(PY) -m training demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: setup lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/cpu_vs_hf_trainer.py
	$(PY) bench/recovery.py
	$(PY) bench/checkpoint_share.py

clean:
	rm -rf .demo .pytest_cache .ruff_cache
