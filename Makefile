# drakit developer entry points. `make demo` and `make test` are the two
# set-up commands: each creates or reuses .venv, installs what it needs and
# builds or reuses the pinned Kubernetes binaries (hack/build-binaries.sh).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all venv docs test-example-standalone test-reference binaries demo-binaries test-binaries compat-binaries test-compat node-assets test-node soak tools manifests codegen verify lint format typecheck imports test unit unit-lowest integration integration-grpc-fallback e2e bench demo clean

all: test

venv: $(STAMP)

# Reinstall when the lock or the package changes. Every dependency comes from the hashed
# dev lock (hack/update-lock.sh), binary wheels only; then drakit and its development tools
# (drakit-localcluster, its own source root under distributions/), editable, without
# resolving anything further. Both as plain sys.path entries (setuptools' compat mode, a .pth
# line each), not import hooks: the tools' drakit/ folder is a namespace portion, which
# Python's path search would otherwise find before a hook is asked for drakit's own
# (regular) package. drakit/__init__.py and drakit/cli/__init__.py extend their __path__ to
# the tools' folders, new modules included, without a reinstall.
DEV_DIST := distributions/drakit-localcluster
$(STAMP): pyproject.toml requirements/dev.txt $(DEV_DIST)/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes --only-binary :all: -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --config-settings editable_mode=compat -e . -e $(DEV_DIST)
	@touch $@

# The default version's control plane (kube-apiserver, kube-scheduler,
# kube-controller-manager) and etcd: what the integration and e2e tiers, the benchmarks
# and the soak start.
binaries:
	@hack/build-binaries.sh kube etcd >/dev/null

# Only what `make demo` starts: the default version's kube-apiserver, kube-scheduler and
# etcd (its flow runs no kube-controller-manager; the kubelet harness it builds itself on
# the first run). A cold `make demo` thus builds no binary it does not use.
demo-binaries:
	@hack/build-binaries.sh kube-apiserver kube-scheduler etcd >/dev/null

# Besides the default version, `make test` runs a test against another minor's apiserver
# (tests/integration/publisher/test_node_allocatable_mappings.py: v1.36.3, apiserver and
# etcd only). Its apiserver is built here, before pytest, not inside the test: a cold build
# takes longer than a test may (pytest-timeout), and failed the cold-cache CI run.
TEST_KUBE_VERSIONS := v1.36.3
test-binaries: binaries
	@for v in $(TEST_KUBE_VERSIONS); do \
	  DRAKIT_KUBE_VERSION=$$v hack/build-binaries.sh kube-apiserver etcd >/dev/null || exit 1; \
	done

# The real-node tier's binaries (kubelet, containerd, runc, CNI, crictl) and
# drakit's image from deploy/Dockerfile. Only as root (the tier skips
# elsewhere); hack/install-node-deps.sh installs buildah and friends.
node-assets: venv binaries
	@if [ "$$(id -u)" = 0 ]; then \
	  hack/install-node-deps.sh && hack/build-binaries.sh node helm >/dev/null && hack/build-image.sh >/dev/null; \
	fi

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
	hack/lint-imports.sh

# Everything: static checks, the documentation site, then unit, integration, e2e and (as
# root) real-node tests; last, as a step of its own, the example driver's tests from a copy
# outside the repository (test-example-standalone, without PYTEST_ARGS: those name drakit's
# tests).
test: verify docs test-binaries node-assets
	$(VENV)/bin/pytest --ignore=tests/site $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-example-standalone PYTEST_ARGS=

# The documentation site (mkdocs.yml): a --strict build into build/site, every internal link
# and anchor checked, no stub page, and every page opened in headless Chromium from a local
# server on 127.0.0.1 (screenshots in build/docs-screenshots/; hack/install-docs-deps.sh
# installs Debian's chromium). About a minute.
docs: venv
	$(VENV)/bin/pytest tests/site -q

unit: venv
	$(VENV)/bin/pytest -m "not integration and not e2e and not node and not differential and not soak" --ignore=tests/site $(PYTEST_ARGS)

# The unit tier on the lowest dependency versions pyproject.toml allows (uv's lowest-direct
# resolution, in its own venv build/venv-lowest): proves the lower bounds are real.
unit-lowest:
	hack/unit-lowest.sh $(PYTEST_ARGS)

integration: venv binaries
	$(VENV)/bin/pytest -m integration $(PYTEST_ARGS)

e2e: venv binaries
	$(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

# The node plugin's integration tier once more with the DRA calls on grpcio's own server,
# the fallback of the direct path (drakit/node_plugin/service/direct_support.py): about a minute.
integration-grpc-fallback: venv binaries
	DRAKIT_GRPC_DIRECT=0 $(VENV)/bin/pytest tests/integration/node_plugin $(PYTEST_ARGS)

# The example driver's tests as a vendor runs a driver's: from a copy of examples/example-driver
# outside the repository, in a fresh venv with drakit's two wheels (built from this checkout),
# the example and its `test` extra (hack/test-example-standalone.sh). The Kubernetes binaries,
# the kubelet harness and helm come from the cache (~/.cache/drakit), built here first.
# `make test` runs it after pytest.
test-example-standalone: venv binaries
	@hack/build-binaries.sh kubelet-harness helm >/dev/null
	hack/test-example-standalone.sh $(PYTEST_ARGS)

# The real-node tier alone (root): kubelet + containerd + runc, the chart, real containers.
test-node: venv node-assets
	$(VENV)/bin/pytest -m node $(PYTEST_ARGS)

# dra-example-driver v0.4.0's own e2e suite, unmodified, on the real local node (root):
# DRIVER=drakit runs it against examples/example-driver (drakit's example), DRIVER=go against
# upstream's Go driver built here. The suite targets Kubernetes 1.36 (its PodGroup manifest and
# node-allocatable fields are 1.36's), so that is the default; docs/reference-parity.md.
DRIVER ?= drakit
REFERENCE_KUBE_VERSION ?= v1.36.3
test-reference: venv
	DRIVER=$(DRIVER) REFERENCE_KUBE_VERSION=$(REFERENCE_KUBE_VERSION) hack/test-reference.sh

# The compat tier: the `compat` tests once per supported Kubernetes version
# (KUBE_VERSIONS in hack/versions.env), each against that version's
# kube-apiserver, kube-scheduler and kubelet harness. Builds run one at a
# time (the cache's lock); etcd, helm and grpcurl are shared with the default.
# COMPAT_VERSIONS narrows the list (CI: the older ones; `make test` ran the default).
KUBE_VERSIONS := $(shell . hack/versions.env && echo $$KUBE_VERSIONS)
COMPAT_VERSIONS ?= $(KUBE_VERSIONS)
compat-binaries:
	@for v in $(COMPAT_VERSIONS); do \
	  echo "compat: binaries for $$v" >&2; \
	  DRAKIT_KUBE_VERSION=$$v hack/build-binaries.sh compat helm grpcurl >/dev/null || exit 1; \
	done

# --kube-version=V as one word: pytest reads its arguments before tests/conftest.py defines
# the option, and a separate V would be taken for a test path; the example driver's
# conftest would then not be an initial conftest, and its pytest_plugins refused.
test-compat: venv compat-binaries
	@for v in $(COMPAT_VERSIONS); do \
	  echo "compat: Kubernetes $$v" >&2; \
	  $(VENV)/bin/pytest -m compat --kube-version=$$v $(PYTEST_ARGS) || exit 1; \
	done

bench: venv binaries
	hack/bench.sh

# The chaos soak (tests/soak): pods churn while seeded faults kill, pause and cut off every
# component; ends with one summary line and exits non-zero on any violation.
# `PYTHONPATH=tests .venv/bin/python -m soak --help` explains the options.
DURATION ?= 30m
SEED ?= 1
SOAK_ARGS ?=
soak: venv binaries
	@hack/build-binaries.sh kubelet-harness >/dev/null
	PYTHONPATH=tests $(PY) -m soak --duration $(DURATION) --seed $(SEED) $(SOAK_ARGS)

# DEMO_ARGS=--hold stops before the clean-up so you can look around.
demo: venv demo-binaries
	$(VENV)/bin/python -m drakit.demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
