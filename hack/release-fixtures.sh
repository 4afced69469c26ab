#!/usr/bin/env bash
# Regenerates tests/fixtures/releases/<tag>/: the node plugin state a release really writes.
#
#   hack/release-fixtures.sh            # every release tag (git tag -l 'v*')
#   hack/release-fixtures.sh v0.1.0     # one release
#
# For each tag: its tree from hack/build-release.sh --no-image (a git worktree in the cache),
# its own venv (`make venv` in that tree), then hack/release_fixtures.py under that venv's
# interpreter, so the state is written by the release's own prepare path (PrepareCore, the
# example backend, real files). The state is made in /tmp/drakit-release-fixtures/<tag> (a
# fixed folder: the CDI specs name it; a second run differs in the journal's epoch only) and
# copied to tests/fixtures/releases/<tag>/; tests/unit/node_plugin/test_release_checkpoints.py
# reads it. A release whose venv is made already: a few seconds (its first venv: about a minute).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="${DRAKIT_RELEASE_REPO:-$ROOT}"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"

if [[ $# -eq 0 ]]; then
  mapfile -t TAGS < <(git -C "$REPO" tag --list 'v*' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+([.+-][0-9A-Za-z.+-]*)?$' || true)
else
  TAGS=("$@")
fi
if [[ ${#TAGS[@]} -eq 0 ]]; then
  echo "release-fixtures: no release tag in $REPO (git fetch --tags)" >&2
  exit 3
fi

for TAG in "${TAGS[@]}"; do
  SRC="$("$ROOT/hack/build-release.sh" --no-image "$TAG" | sed -n 's/^source=//p')"
  COMMIT="$(git -C "$SRC" rev-parse HEAD)"
  echo "release-fixtures: $TAG ($COMMIT): its venv" >&2
  # The release's lock: hack/build-release.sh remakes the tree under it.
  flock "$CACHE/releases/$TAG/.lock" make -C "$SRC" venv >&2
  echo "release-fixtures: $TAG: preparing with its own node plugin code" >&2
  flock "$CACHE/releases/$TAG/.lock" \
    "$SRC/.venv/bin/python" -I "$ROOT/hack/release_fixtures.py" \
      --tag "$TAG" --commit "$COMMIT" --source "$SRC" \
      --root "/tmp/drakit-release-fixtures/$TAG" \
      --out "$ROOT/tests/fixtures/releases/$TAG"
  echo "release-fixtures: wrote tests/fixtures/releases/$TAG" >&2
done
rmdir /tmp/drakit-release-fixtures 2>/dev/null || true
