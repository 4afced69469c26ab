#!/usr/bin/env bash
# Fails when drakit/kubeletapi/gen is not what hack/update-codegen.sh makes of proto/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$ROOT/hack/update-codegen.sh" "$tmp/gen" 2>/dev/null
if ! diff -r -x __pycache__ "$tmp/gen" "$ROOT/drakit/kubeletapi/gen"; then
  echo "verify-codegen: drakit/kubeletapi/gen is stale; run hack/update-codegen.sh and commit the result" >&2
  exit 1
fi
echo "verify-codegen: drakit/kubeletapi/gen is up to date" >&2
