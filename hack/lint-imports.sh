#!/usr/bin/env bash
# The import-layer contracts on drakit as it is installed: drakit's own folder and the
# development tools' (drakit-localcluster's source root, distributions/drakit-localcluster/
# src/drakit) in one drakit/ folder, the way pip lays the two wheels out. import-linter reads a
# regular package from one folder only (its spec's search locations), so in a source checkout
# it would not see drakit.localcluster, drakit.demo or drakit.testing, and a contract naming
# them could not be checked.
#
#   hack/lint-imports.sh                       drakit's contracts (pyproject.toml)
#   hack/lint-imports.sh CONFIG [SRC_DIR...]   another distribution's contracts, its package
#                                              folders put on the path (the example driver's)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="$(realpath "${1:-$ROOT/pyproject.toml}")"
shift || true
path=""
for src in "$@"; do path="$path:$(realpath "$src")"; done
view="$(mktemp -d)"
trap 'rm -rf "$view"' EXIT
cp -R "$ROOT/drakit" "$view/drakit"
cp -R "$ROOT/distributions/drakit-localcluster/src/drakit/." "$view/drakit/"
# From the view's folder: lint-imports puts the working folder first on sys.path, where the
# checkout's own drakit/ must not be found before the view's.
cd "$view"
PYTHONPATH="$view$path${PYTHONPATH:+:$PYTHONPATH}" "$ROOT/.venv/bin/lint-imports" \
  --config "$config" --no-cache
