#!/usr/bin/env bash
# The example driver's tests as a vendor runs a driver's tests: from a copy of
# examples/example-driver outside this repository, in a fresh venv holding drakit's and
# drakit-localcluster's wheels (built from this checkout), the example and its `test` extra,
# and nothing else of drakit.
#
#   hack/test-example-standalone.sh [PYTEST_ARGS...]
#   KEEP=1 hack/test-example-standalone.sh     # keep the folder (printed) for a look
#
# - The wheels are built as a release builds them (python -m build, build isolation), into
#   a build folder of their own (DIST_EXTRA_CONFIG), so nothing from an earlier build in the
#   checkout's build/ is shipped.
# - The venv's dependencies are resolved from the wheels' and the example's own metadata
#   (not from drakit's lock), at the versions of drakit's lock where it has them (its
#   requirements/dev.txt as constraints, without hashes); `pip check` must pass.
# - The Kubernetes binaries (etcd, kube-apiserver, the kubelet harness, helm) are not built
#   here: an installed drakit.localcluster does not build (it has no hack/ scripts); it
#   finds them in drakit's cache, $DRAKIT_CACHE_DIR/bin/<version>/ (default
#   ~/.cache/drakit), or through KUBEBUILDER_ASSETS and TEST_ASSET_<NAME>.
#   `make test-example-standalone` builds them first.
# - pytest runs with --drakit-require-tools: a helm that cannot be found fails the chart
#   tests instead of skipping them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
work="$(mktemp -d /tmp/dk-example-XXXXXX)"
if [[ -z "${KEEP:-}" ]]; then
  trap 'rm -rf "$work"' EXIT
else
  echo "test-example-standalone: keeping $work" >&2
fi
start=$SECONDS
# Each line with the seconds since the start: where a slow run spends its time.
log() { echo "test-example-standalone: [$((SECONDS - start)) s] $*" >&2; }

log "building the wheels of drakit and drakit-localcluster"
printf '[build]\nbuild_base = %s\n' "$work/setuptools-build" >"$work/setuptools-build.cfg"
for source in "$ROOT" "$ROOT/distributions/drakit-localcluster"; do
  DIST_EXTRA_CONFIG="$work/setuptools-build.cfg" \
    "$PYTHON" -m build --wheel --outdir "$work/wheels" "$source" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log" >&2; exit 1; }
done

log "copying examples/example-driver to $work/example-driver"
mkdir "$work/example-driver"
(cd "$ROOT/examples/example-driver" && tar -c --exclude=__pycache__ --exclude='*.egg-info' \
  --exclude=build --exclude=.pytest_cache pyproject.toml README.md src tests deployments) \
  | tar -x -C "$work/example-driver"

log "installing the wheels and the example with its test extra into a fresh venv"
"$PYTHON" -m venv "$work/venv"
sed -e '/^[[:space:]]*--hash=/d' -e 's/[[:space:]]*\\$//' "$ROOT/requirements/dev.txt" \
  >"$work/constraints.txt"
# --no-compile: byte-compiling every module of every dependency (the kubernetes client's
# thousands) took most of the set-up; Python compiles what the tests import as they run.
"$work/venv/bin/python" -m pip install --quiet --no-compile --constraint "$work/constraints.txt" \
  "$work"/wheels/drakit-*.whl "$work"/wheels/drakit_localcluster-*.whl \
  "$work/example-driver[test]"
"$work/venv/bin/python" -m pip check >&2
log "running the example's tests in $work/example-driver"

cd "$work/example-driver"
# Not the checkout's drakit: the venv's alone (PYTHONPATH could reach back into it).
env -u PYTHONPATH "$work/venv/bin/python" -m pytest -p no:cacheprovider --drakit-require-tools "$@"
log "done"
