# trainstack: `make demo` runs the training job locally; `make test` runs every check.
# Both set up what they need on a fresh machine (Python 3.10+ with venv; no GPU, no cloud).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STAMP := $(VENV)/.installed-stamp
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp
POLICY_VENV := policy/venv
POLICY_STAMP := $(POLICY_VENV)/.installed-stamp

.PHONY: setup demo test test-image lint bench clean schema

setup: $(STAMP) $(CHECKOV_STAMP) $(POLICY_STAMP)

# torch==2.13.0 first: it resolves to the local CPU build; anything else would pull GBs of CUDA wheels.
# requirements.txt is the Pulumi program's lock (what `pulumi install` puts into this same .venv):
# installed with the package, so make's venv holds exactly those pins and Pulumi finds nothing to do.
$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt -e ".[infra,train,dev]"
	touch $@

# checkov's dependencies conflict with the Pulumi SDK's, so it lives in a venv of its own.
$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q checkov==3.3.30
	touch $@

# The policy pack's own venv, where policy/PulumiPolicy.yaml points `pulumi preview --policy-pack policy`
# (pulumi-policy pins protobuf 5; tensorboard in .venv needs 6). tests/policy/test_pack.py loads the pack in it.
$(POLICY_STAMP): policy/requirements.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/pip install -q --upgrade pip
	$(POLICY_VENV)/bin/pip install -q -r policy/requirements.txt
	touch $@

demo: $(STAMP)
	$(PY) -m training demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# tests/library in a process of its own: importing the Pulumi provider SDK registers its own copy of
# google.rpc.Status in protobuf's default pool, and gcsfs (google-api-core) then fails to import in that
# process with "duplicate symbol 'google.rpc.Status'" (the trainer and the provider never share one).
test: setup lint
	$(PY) -m pytest -q --ignore=tests/library
	$(PY) -m pytest -q tests/library

# The image tier: images/Dockerfile built with buildah (--isolation chroot) on a stand-in base (Debian +
# CPU torch, tests/image/stand_in_base.py) and run with podman as the chart runs it. Needs root (debootstrap,
# chroot, rootful podman) and the Debian packages below; a cold run takes about 3 minutes.
IMAGE_TOOLS := podman buildah debootstrap runc
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
test-image: $(STAMP)
	@command -v podman >/dev/null && command -v buildah >/dev/null && command -v debootstrap >/dev/null || \
		($(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(IMAGE_TOOLS))
	$(SUDO) $(PY) -m pytest -q -s tests/image --image-tier

bench: $(STAMP)
	$(PY) -m bench.cpu_vs_hf_trainer
	$(PY) -m bench.recovery
	$(PY) -m bench.checkpoint_share

# schema.json: the component package's schema, inferred from trainstack/components (tests/library checks it).
schema: $(STAMP)
	$(PY) -m trainstack.schema

clean:
	rm -rf .demo .pytest_cache .ruff_cache
