#!/usr/bin/env bash
# Builds (or reuses) the Go binaries drakit's tests need, into a cache
# outside the repository, and prints the folder that holds them.
#
#   hack/build-binaries.sh [TARGET...]
#     TARGET: kube etcd grpcurl oracle kubelet-harness helm dra-example-driver
#             kube-apiserver kube-scheduler kube-controller-manager (one control-plane
#             binary each; `kube` is all three)
#             kube-proxy (alone; `node` builds it too)
#             node (the real nodes: kubelet, kube-proxy, containerd, ctr, shim, runc,
#             CNI plugins, crictl, pause; for another version its own kubelet and
#             kube-proxy, the rest linked)
#             (default: kube etcd)
#             compat: what the compat tier needs of one minor (kube-apiserver,
#             kube-scheduler, kubelet-harness; etcd is shared, see below)
#             reference: dra-example-driver's e2e suite (reference/e2e.test, built
#             unmodified from the module), the ginkgo CLI and the Go driver's
#             binaries (reference/dra-example-*), pinned by hack/tools/dra-example-e2e
#             (hack/test-reference.sh)
#             cert-manager: cert-manager v1.20.2's certificate controllers and cainjector
#             (hack/tools/cert-manager), for the Go driver's reference run
#             dra-example-webhook: the Go driver's admission webhook alone
#             (reference/dra-example-webhook, same pin and same file as `reference`),
#             for the admission differential (tests/differential/admission)
#
# DRAKIT_KUBE_VERSION picks one of the supported versions in versions.env
# (KUBE_VERSIONS; default KUBE_VERSION). The default minor builds from each
# module's go.mod; the others from go-v1.MINOR.mod (hack/pin-kube-minor.sh).
# Only kube, compat and kubelet-harness depend on the version: etcd and the
# other tools are the default version's and are linked into an older
# version's folder (every supported minor's apiserver talks etcd v3.5+).
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
DEFAULT_KUBE_VERSION="$KUBE_VERSION"
KUBE_VERSION="${DRAKIT_KUBE_VERSION:-$KUBE_VERSION}"
if [[ " $KUBE_VERSIONS " != *" $KUBE_VERSION "* ]]; then
  echo "build-binaries: DRAKIT_KUBE_VERSION=$KUBE_VERSION is not one of the supported versions ($KUBE_VERSIONS)" >&2
  exit 2
fi
KUBE_MINOR="${KUBE_VERSION%.*}"
# The module file of a Kubernetes-dependent tool for this version.
if [[ $KUBE_VERSION == "$DEFAULT_KUBE_VERSION" ]]; then MODFILE=go.mod; else MODFILE="go-$KUBE_MINOR.mod"; fi
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
  local sum="$1/go.sum"
  [[ -f "$1/$MODFILE" ]] && sum="$1/${MODFILE%.mod}.sum"
  # shellcheck disable=SC2046
  cat "$sum" $(find "$1" -maxdepth 1 -name '*.go' | sort) | sha256sum | cut -d' ' -f1
}

# up_to_date NAME MODULE_DIR: the binary exists and was built from this source.
up_to_date() {
  local s="$BIN/.${1//\//_}.stamp"
  [[ -x "$BIN/$1" && -f "$s" ]] && [[ "$(cat "$s")" == "$(stamp_of "$2")" ]]
}

stamp() { stamp_of "$2" >"$BIN/.${1//\//_}.stamp"; }

# go_build MODULE_DIR OUT_NAME PACKAGE [LDFLAGS [TAGS]]: one atomic build into
# the cache. OUT_NAME may name a subfolder (cni/loopback). CGO_ENABLED may be
# set by the caller (runc needs cgo for seccomp); it defaults to off.
go_build() {
  local dir="$1" out="$2" pkg="$3" ldflags="${4:-}" tags="${5:-}"
  log "building $out from $pkg (cached in $BIN)"
  local target="$BIN/$out"
  local tmp; tmp="$(dirname "$target")/.$(basename "$target").tmp"
  mkdir -p "$(dirname "$target")"
  local modflag=()
  [[ $MODFILE != go.mod && -f "$dir/$MODFILE" ]] && modflag=(-modfile="$MODFILE")
  (cd "$dir" && CGO_ENABLED="${CGO_ENABLED:-0}" go build "${modflag[@]}" -trimpath -tags "$tags" -ldflags "$ldflags" \
    -o "$tmp" "$pkg")
  mv -f "$tmp" "$target"
}

# kube_ldflags: the version stamps every Kubernetes binary reports (without
# them the kubelet says v0.0.0-master and the apiserver's skew checks trip).
kube_ldflags() {
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local ldf="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldf+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldf+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=$KUBE_BUILD_DATE"
  ldf+=" -X k8s.io/component-base/version.gitCommit=$KUBE_GIT_COMMIT"
  ldf+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  echo "$ldf"
}

# build_kube [CMD...]: the control plane (default: all three binaries).
build_kube() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]]; then return; fi
  local dir="$HACK/tools/kube" cmds=("$@")
  [[ ${#cmds[@]} -eq 0 ]] && cmds=(kube-apiserver kube-scheduler kube-controller-manager)
  local ldf="" cmd
  # One go build per binary, sequentially: they share the compile cache, and
  # linking three at once needs more memory than a small machine has to spare.
  for cmd in "${cmds[@]}"; do
    up_to_date "$cmd" "$dir" && continue
    need_go
    [[ -n $ldf ]] || ldf="$(kube_ldflags)"
    go_build "$dir" "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$ldf"
    stamp "$cmd" "$dir"
  done
}

# harness_tags: the kubelet harness's per-minor source files carry a build
# tag naming the minor (kube_v1_35); the default minor's files need none.
harness_tags() {
  [[ $MODFILE == go.mod ]] && return
  echo "kube_${KUBE_MINOR//./_}"
}

# shared_from_default NAME TARGET: an older version's folder reuses the
# default version's build of a tool that does not depend on the Kubernetes
# minor (built there first if needed); returns 1 for the default version.
shared_from_default() {
  [[ $KUBE_VERSION == "$DEFAULT_KUBE_VERSION" ]] && return 1
  DRAKIT_KUBE_VERSION="$DEFAULT_KUBE_VERSION" "$0" "$2" >/dev/null
  ln -sfn "$CACHE/bin/$DEFAULT_KUBE_VERSION/$1" "$BIN/$1"
}

build_etcd() {
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then return; fi
  shared_from_default etcd etcd && return
  local dir="$HACK/tools/etcd"
  up_to_date etcd "$dir" && return
  need_go
  go_build "$dir" etcd go.etcd.io/etcd/server/v3 "-s -w"
  stamp etcd "$dir"
}

# build_tool NAME MODULE_DIR PACKAGE TARGET: tools that are not part of the
# control plane (one build, shared by every Kubernetes version's folder).
build_tool() {
  shared_from_default "$1" "$4" && return
  up_to_date "$1" "$2" && return
  need_go
  go_build "$2" "$1" "$3" "-s -w"
  stamp "$1" "$2"
}

# build_node: everything a real node needs besides the control plane. The
# kubelet matches the control plane's version; containerd, runc, the CNI
# plugins and crictl come from their own modules (versions in their go.mod,
# summarised in versions.env).
build_node() {
  local t="$HACK/tools"
  build_node_kube
  local c
  for c in containerd ctr containerd-shim-runc-v2; do
    up_to_date "$c" "$t/containerd" && continue
    need_go; go_build "$t/containerd" "$c" "github.com/containerd/containerd/v2/cmd/$c" "-s -w"; stamp "$c" "$t/containerd"
  done
  if ! up_to_date runc "$t/runc"; then
    need_go; need_libseccomp
    CGO_ENABLED=1 go_build "$t/runc" runc github.com/opencontainers/runc "-s -w" seccomp; stamp runc "$t/runc"
  fi
  for c in loopback tap host-local bridge portmap; do
    up_to_date "cni/$c" "$t/cni" && continue
    local kind=main; [[ $c == host-local ]] && kind=ipam; [[ $c == portmap ]] && kind=meta
    need_go; go_build "$t/cni" "cni/$c" "github.com/containernetworking/plugins/plugins/$kind/$c" "-s -w"
    stamp "cni/$c" "$t/cni"
  done
  up_to_date crictl "$t/crictl" || { need_go; go_build "$t/crictl" crictl sigs.k8s.io/cri-tools/cmd/crictl "-s -w"; stamp crictl "$t/crictl"; }
  up_to_date pause "$t/pause" || { need_go; go_build "$t/pause" pause . "-s -w"; stamp pause "$t/pause"; }
}

# build_node_kube: the node's Kubernetes binaries, at the control plane's version: the
# kubelet, and kube-proxy (iptables mode) for nodes in their own network namespaces, each
# from its own module (hack/tools/kubelet, hack/tools/kube-proxy).
build_node_kube() {
  local t="$HACK/tools" c
  for c in kubelet kube-proxy; do
    up_to_date "$c" "$t/$c" && continue
    need_go; go_build "$t/$c" "$c" "k8s.io/kubernetes/cmd/$c" "$(kube_ldflags)"; stamp "$c" "$t/$c"
  done
}

# build_node_other_version: an older version's node (hack/test-reference.sh
# REFERENCE_KUBE_VERSION): its own kubelet and kube-proxy (go-v1.MINOR.mod of their
# modules), and
# the default version's containerd, runc, CNI plugins, crictl and pause, which do not
# depend on the Kubernetes version, linked in.
build_node_other_version() {
  local t="$HACK/tools" c
  for c in kubelet kube-proxy; do
    if [[ ! -f $t/$c/$MODFILE ]]; then
      log "no $t/$c/$MODFILE: $c is pinned for ${KUBE_MINOR} only once that file exists"; exit 2
    fi
  done
  build_node_kube
  DRAKIT_KUBE_VERSION="$DEFAULT_KUBE_VERSION" "$0" node >/dev/null
  mkdir -p "$BIN/cni"
  for c in containerd ctr containerd-shim-runc-v2 runc crictl pause cni/loopback cni/tap cni/host-local cni/bridge cni/portmap; do
    ln -sfn "$CACHE/bin/$DEFAULT_KUBE_VERSION/$c" "$BIN/$c"
  done
}

build_harness() {
  local dir="$HACK/kubelet-harness"
  up_to_date kubelet-harness "$dir" && return
  need_go
  go_build "$dir" kubelet-harness . "-s -w" "$(harness_tags)"
  stamp kubelet-harness "$dir"
}

# build_reference: what hack/test-reference.sh runs, into $BIN/reference/. The e2e
# suite is a test package of a dependency: `go test -c` builds it unmodified from the
# module cache (deps.go keeps its test-only imports in the pinning module's go.sum).
build_reference() {
  local dir="$HACK/tools/dra-example-e2e" out
  for out in dra-example-kubeletplugin dra-example-controller dra-example-webhook; do
    build_reference_cmd "$out"
  done
  if ! up_to_date reference/ginkgo "$dir"; then
    need_go; go_build "$dir" reference/ginkgo github.com/onsi/ginkgo/v2/ginkgo "-s -w"; stamp reference/ginkgo "$dir"
  fi
  if ! up_to_date reference/e2e.test "$dir"; then
    need_go
    log "building reference/e2e.test from sigs.k8s.io/dra-example-driver/test/e2e (cached in $BIN)"
    (cd "$dir" && CGO_ENABLED=0 go test -c -trimpath -tags e2e -o "$BIN/reference/.e2e.test.tmp" \
      sigs.k8s.io/dra-example-driver/test/e2e)
    mv -f "$BIN/reference/.e2e.test.tmp" "$BIN/reference/e2e.test"
    stamp reference/e2e.test "$dir"
  fi
}

# build_reference_cmd NAME: one of the Go driver's commands into $BIN/reference/, from the
# module that pins it for the reference suite (so `reference` and the admission
# differential share one build).
build_reference_cmd() {
  local dir="$HACK/tools/dra-example-e2e"
  up_to_date "reference/$1" "$dir" && return
  need_go; go_build "$dir" "reference/$1" "sigs.k8s.io/dra-example-driver/cmd/$1" "-s -w"
  stamp "reference/$1" "$dir"
}

need_libseccomp() {
  if ! pkg-config --exists libseccomp 2>/dev/null; then
    log "runc needs libseccomp's headers: apt-get install libseccomp-dev pkg-config"
    exit 3
  fi
}

targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(kube etcd)
for t in "${targets[@]}"; do
  case "$t" in
    kube) build_kube ;;
    kube-apiserver | kube-scheduler | kube-controller-manager) build_kube "$t" ;;
    kube-proxy)
      [[ $KUBE_VERSION == "$DEFAULT_KUBE_VERSION" || -f $HACK/tools/kube-proxy/$MODFILE ]] ||
        { log "no hack/tools/kube-proxy/$MODFILE: kube-proxy is pinned for ${KUBE_MINOR} only once that file exists"; exit 2; }
      up_to_date kube-proxy "$HACK/tools/kube-proxy" ||
        { need_go; go_build "$HACK/tools/kube-proxy" kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$(kube_ldflags)"; stamp kube-proxy "$HACK/tools/kube-proxy"; } ;;
    compat) build_kube kube-apiserver kube-scheduler; build_harness; build_etcd ;;
    etcd) build_etcd ;;
    grpcurl) build_tool grpcurl "$HACK/tools/grpcurl" github.com/fullstorydev/grpcurl/cmd/grpcurl grpcurl ;;
    oracle) build_tool dra-oracle "$HACK/oracle" . oracle ;;
    kubelet-harness) build_harness ;;
    helm) build_tool helm "$HACK/tools/helm" helm.sh/helm/v3/cmd/helm helm ;;
    cert-manager) build_tool cert-manager "$HACK/tools/cert-manager" . cert-manager ;;
    node)
      if [[ $KUBE_VERSION != "$DEFAULT_KUBE_VERSION" ]]; then build_node_other_version; else build_node; fi ;;
    reference)
      if [[ $KUBE_VERSION != "$DEFAULT_KUBE_VERSION" ]]; then
        log "the reference suite runs the default version ($DEFAULT_KUBE_VERSION) only"; exit 2
      fi
      mkdir -p "$BIN/reference"; build_reference ;;
    dra-example-webhook)
      if [[ $KUBE_VERSION != "$DEFAULT_KUBE_VERSION" ]]; then
        log "the admission differential runs the default version ($DEFAULT_KUBE_VERSION) only"; exit 2
      fi
      mkdir -p "$BIN/reference"; build_reference_cmd dra-example-webhook ;;
    dra-example-driver) build_tool dra-example-kubeletplugin "$HACK/tools/dra-example-driver" sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin dra-example-driver ;;
    *) log "unknown target $t"; exit 2 ;;
  esac
done
echo "$BIN"
