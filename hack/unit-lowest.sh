#!/usr/bin/env bash
# The unit tier on the lowest versions pyproject.toml allows (make unit-lowest).
#
#   hack/unit-lowest.sh [pytest arguments...]
#
# A new virtual environment in build/venv-lowest gets drakit and drakit-localcluster (editable), drakit with its extras
# `kubernetes`, `webhook` and `test` (the first two are also what drakit.localcluster needs, the
# drakit-localcluster distribution's dependencies), resolved by uv with --resolution lowest-direct: every direct
# dependency at the lowest version its range admits (their own dependencies as new as fits),
# binary wheels only, as the locked install. Then the unit tier runs on it. A failure here
# means a lower bound in pyproject.toml is not real: raise it (and say why beside it).
# The dev tools (mypy, ruff, ...) are not installed: the unit tier does not use them, and their
# exact pins would hold the resolution up. The installed versions are printed first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
UV_VERSION=0.13.9
TOOL="$CACHE/tools/uv-$UV_VERSION"
VENV="$ROOT/build/venv-lowest"
if [[ ! -x "$TOOL/bin/uv" ]]; then
  python3 -m venv "$TOOL"
  "$TOOL/bin/pip" install --quiet "uv==$UV_VERSION"
fi
cd "$ROOT"
rm -rf "$VENV"
"$TOOL/bin/uv" venv --quiet --python python3.11 "$VENV"
VIRTUAL_ENV="$VENV" "$TOOL/bin/uv" pip install --quiet --resolution lowest-direct \
  --only-binary :all: --config-setting editable_mode=compat -e '.[kubernetes,webhook,test]'
# The development tools beside it, both as plain sys.path entries (see the Makefile's venv).
VIRTUAL_ENV="$VENV" "$TOOL/bin/uv" pip install --quiet --no-deps \
  --config-setting editable_mode=compat -e distributions/drakit-localcluster
echo "unit-lowest: $(VIRTUAL_ENV="$VENV" "$TOOL/bin/uv" pip freeze --quiet --exclude-editable \
  | grep -iE '^(grpcio|grpcio-health-checking|grpcio-reflection|protobuf|pydantic|pyyaml|urllib3|orjson|prometheus-client|common-expression-language|google-re2|cel-expr-python|kubernetes|cryptography)==' \
  | tr '\n' ' ')" >&2
# The wheel test builds and installs a wheel of its own: the lock's business, not the ranges'.
# The example driver's import contract runs the example's own tool (import-linter, which this
# venv of drakit's dependencies does not hold); `make test` and its standalone step run it.
# The NoExecute budget's property test is pure code over 10,000 schedules (two minutes or
# more): no dependency's version changes what it proves, and `make test` runs it.
exec "$VENV/bin/pytest" -m "not integration and not e2e and not node and not differential and not soak" \
  -p no:cacheprovider --deselect tests/unit/test_wheel.py --ignore tests/unit/packaging/test_release_build.py \
  --deselect examples/example-driver/tests/test_layers.py::test_example_driver_keeps_the_import_contract \
  --deselect tests/unit/controller/test_noexecute_budget_property.py "$@"
