#!/usr/bin/env bash
# Static checks run by `make verify` (and so by `make test`): lint, format,
# strict typing, the import-layer contract, generated code up to date, and
# rendered manifests in sync. Each check prints its name; the first failure stops.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/.venv/bin"
step() { echo "verify: $*"; }

step "ruff check";         "$BIN/ruff" check .
step "ruff format --check"; "$BIN/ruff" format --check .
step "mypy --strict";      "$BIN/mypy"
step "import layers";      hack/lint-imports.sh
# The example driver is its own distribution: its own package root and import contract.
step "mypy --strict (example driver)"
MYPYPATH=examples/example-driver/src "$BIN/mypy" --strict -p example_driver
step "import layers (example driver)"
hack/lint-imports.sh examples/example-driver/pyproject.toml examples/example-driver/src
if [[ -x hack/verify-codegen.sh ]]; then step "generated gRPC code"; hack/verify-codegen.sh; fi
if [[ -x hack/verify-manifests.sh ]]; then step "rendered manifests"; hack/verify-manifests.sh; fi
step "ok"
