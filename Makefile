# drakit developer entry points. `make demo` and `make test` are the two
# set-up commands: each creates or reuses .venv, installs what it needs and
# builds or reuses the pinned Kubernetes binaries (hack/build-binaries.sh).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all venv binaries tools manifests codegen verify lint format typecheck imports test unit integration e2e bench demo clean

all: test

venv: $(STAMP)

# Reinstall when the dependency list changes.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

binaries:
	@hack/build-binaries.sh kube etcd >/dev/null

# grpcurl and helm for manual testing and the deploy checks.
tools: binaries
	@hack/build-binaries.sh grpcurl helm >/dev/null

# Re-render deploy/manifests/ from the Helm chart (make verify checks they match).
manifests: venv
	hack/update-manifests.sh

codegen: venv
	hack/update-codegen.sh

verify: venv
	hack/verify.sh

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: venv
	$(VENV)/bin/mypy

imports: venv
	$(VENV)/bin/lint-imports

# Everything: static checks, then unit, integration and e2e tests.
test: verify binaries
	$(VENV)/bin/pytest $(PYTEST_ARGS)

unit: venv
	$(VENV)/bin/pytest -m "not integration and not e2e" $(PYTEST_ARGS)

integration: venv binaries
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

e2e: venv binaries
	$(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

bench: venv binaries
	hack/bench.sh

# DEMO_ARGS=--hold stops before the clean-up so you can look around.
demo: venv binaries
	$(VENV)/bin/python -m drakit.demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
