#!/usr/bin/env bash
# Builds (or reuses) the Go binaries drakit's tests need, into a cache
# outside the repository, and prints the folder that holds them.
#
#   hack/build-binaries.sh [TARGET...]
#     TARGET: kube etcd grpcurl oracle kubelet-harness helm dra-example-driver (default: kube etcd)
#
# The cache folder is $DRAKIT_CACHE_DIR/bin/$KUBE_VERSION (default
# ~/.cache/drakit). A binary is rebuilt only when its tool module's go.sum
# or Go source changed since it was built. Honours KUBEBUILDER_ASSETS: when it names a
# folder holding kube-apiserver and etcd, nothing is built for kube/etcd.
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HACK/versions.env"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
BIN="$CACHE/bin/$KUBE_VERSION"
mkdir -p "$BIN"
# One build at a time per cache: parallel callers (tests, helpers, make
# targets) wait here and then find the binaries up to date.
exec 9>"$BIN/.build.lock"
flock 9

log() { echo "build-binaries: $*" >&2; }

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    log "Go is not installed. Install Go 1.25+ (https://go.dev/dl) to build the pinned"
    log "Kubernetes binaries once, or set KUBEBUILDER_ASSETS to a folder holding"
    log "kube-apiserver and etcd (or TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD)."
    exit 3
  fi
}

# stamp_of MODULE_DIR: hash of go.sum plus the module's own .go files, so a
# change to a local tool's source (oracle, kubelet harness) rebuilds it.
stamp_of() {
  # shellcheck disable=SC2046
  cat "$1/go.sum" $(find "$1" -maxdepth 1 -name '*.go' | sort) | sha256sum | cut -d' ' -f1
}

# up_to_date NAME MODULE_DIR: the binary exists and was built from this source.
up_to_date() {
  local s="$BIN/.$1.stamp"
  [[ -x "$BIN/$1" && -f "$s" ]] && [[ "$(cat "$s")" == "$(stamp_of "$2")" ]]
}

stamp() { stamp_of "$2" >"$BIN/.$1.stamp"; }

# go_build MODULE_DIR OUT_NAME PACKAGE [LDFLAGS]: one atomic build into the cache.
go_build() {
  local dir="$1" out="$2" pkg="$3" ldflags="${4:-}"
  log "building $out from $pkg (cached in $BIN)"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/.$out.tmp" "$pkg")
  mv -f "$BIN/.$out.tmp" "$BIN/$out"
}

build_kube() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]]; then return; fi
  local dir="$HACK/tools/kube"
  if up_to_date kube-apiserver "$dir" && up_to_date kube-scheduler "$dir" && up_to_date kube-controller-manager "$dir"; then return; fi
  need_go
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ldf="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldf+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldf+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=$KUBE_BUILD_DATE"
  ldf+=" -X k8s.io/component-base/version.gitCommit=$KUBE_GIT_COMMIT"
  ldf+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  # One go build per binary, sequentially: they share the compile cache, and
  # linking three at once needs more memory than a small machine has to spare.
  for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
    go_build "$dir" "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$ldf"
    stamp "$cmd" "$dir"
  done
}

build_etcd() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then return; fi
  local dir="$HACK/tools/etcd"
  up_to_date etcd "$dir" && return
  need_go
  go_build "$dir" etcd go.etcd.io/etcd/server/v3 "-s -w"
  stamp etcd "$dir"
}

# build_tool NAME MODULE_DIR PACKAGE: tools that are not part of the control plane.
build_tool() {
  up_to_date "$1" "$2" && return
  need_go
  go_build "$2" "$1" "$3" "-s -w"
  stamp "$1" "$2"
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(kube etcd)
for t in "${targets[@]}"; do
  case "$t" in
    kube) build_kube ;;
    etcd) build_etcd ;;
    grpcurl) build_tool grpcurl "$HACK/tools/grpcurl" github.com/fullstorydev/grpcurl/cmd/grpcurl ;;
    oracle) build_tool dra-oracle "$HACK/oracle" . ;;
    kubelet-harness) build_tool kubelet-harness "$HACK/kubelet-harness" . ;;
    helm) build_tool helm "$HACK/tools/helm" helm.sh/helm/v3/cmd/helm ;;
    dra-example-driver) build_tool dra-example-kubeletplugin "$HACK/tools/dra-example-driver" sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin ;;
    *) log "unknown target $t"; exit 2 ;;
  esac
done
echo "$BIN"
