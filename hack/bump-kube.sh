#!/usr/bin/env bash
# Moves every Go tool module and drakit/version.py to the Kubernetes version in
# hack/versions.env, then tidies the modules. Usage: edit hack/versions.env,
# run hack/bump-kube.sh, run make test, commit.
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HACK")"
source "$HACK/versions.env"
for mod in "$HACK"/tools/kube "$HACK"/kubelet-harness "$HACK"/oracle; do
  [[ -f "$mod/go.mod" ]] || continue
  sed -i -E \
    -e "s#(k8s.io/kubernetes )v1\.[0-9]+\.[0-9]+#\1$KUBE_VERSION#" \
    -e "s#(=> k8s.io/[a-z-]+ )v0\.[0-9]+\.[0-9]+#\1$KUBE_STAGING_VERSION#" \
    -e "s#^(\s*k8s.io/(api|apimachinery|client-go|dynamic-resource-allocation|component-base|klog) )v0\.[0-9]+\.[0-9]+#\1$KUBE_STAGING_VERSION#" \
    "$mod/go.mod"
  (cd "$mod" && go mod tidy)
  echo "bumped $mod"
done
sed -i -E "s#^KUBERNETES_VERSION = \".*\"#KUBERNETES_VERSION = \"$KUBE_VERSION\"#" "$ROOT/drakit/version.py"
echo "now: make test"
