#!/usr/bin/env bash
# Moves the Go tool modules that build on Kubernetes (hack/tools/kube, the
# kubelet harness, the oracle) and drakit/version.py to the versions in
# hack/versions.env: k8s.io/kubernetes and every staging module that is
# required or replaced at a release version (pseudo-versions such as
# kube-openapi's are left to go mod tidy), then tidies the modules.
# Usage: edit hack/versions.env, run hack/bump-kube.sh, run make test, commit.
# The older supported minors (KUBE_VERSIONS) build from go-v1.MINOR.mod files
# written by hack/pin-kube-minor.sh; this script writes them for every
# version in KUBE_VERSIONS but the default, and updates drakit/version.py.
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HACK")"
source "$HACK/versions.env"
for mod in "$HACK"/tools/kube "$HACK"/tools/kubelet "$HACK"/tools/kube-proxy "$HACK"/kubelet-harness "$HACK"/oracle; do
  [[ -f "$mod/go.mod" ]] || continue
  sed -i -E \
    -e "s#(k8s.io/kubernetes )v1\.[0-9]+\.[0-9]+#\1$KUBE_VERSION#" \
    -e "s#(=> k8s.io/[a-z-]+ )v0\.[0-9]+\.[0-9]+#\1$KUBE_STAGING_VERSION#" \
    -e "s#^(\s*k8s.io/[a-z-]+ )v0\.[0-9]+\.[0-9]+(\s|$)#\1$KUBE_STAGING_VERSION\2#" \
    "$mod/go.mod"
  (cd "$mod" && go mod tidy)
  echo "bumped $mod"
done
older=()
for v in $KUBE_VERSIONS; do [[ $v == "$KUBE_VERSION" ]] || older+=("$v"); done
[[ ${#older[@]} -eq 0 ]] || "$HACK/pin-kube-minor.sh" "${older[@]}"
sed -i -E "s#^KUBERNETES_VERSION = \".*\"#KUBERNETES_VERSION = \"$KUBE_VERSION\"#" "$ROOT/drakit/version.py"
quoted="$(printf '"%s", ' $KUBE_VERSIONS)"
sed -i -E "s#^SUPPORTED_KUBERNETES_VERSIONS = .*#SUPPORTED_KUBERNETES_VERSIONS = (${quoted%, })#" "$ROOT/drakit/version.py"
echo "now: make test"
