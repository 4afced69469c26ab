#!/usr/bin/env bash
# Runs dra-example-driver v0.4.0's own e2e suite (test/e2e, 23 Ginkgo specs over its
# demo/examples manifests, unmodified) against a DRA driver on this machine's real
# local node. Needs root, Linux, Go, buildah (see docs/reference-parity.md).
#
#   DRIVER=go hack/test-reference.sh        # upstream's Go driver (the reference)
#   hack/test-reference.sh                  # DRIVER=drakit: drakit's example driver
#   hack/test-reference.sh --focus='CEL'    # extra arguments go to the ginkgo CLI
#
# Environment:
#   DRIVER             drakit (default) or go
#   REFERENCE_OUT      output folder (default build/reference/$DRIVER-$VERSION): junit.xml,
#                      ginkgo.log, results.txt, logs/ of every component and pod
#   REFERENCE_EXCLUDE  file of specs whose failure does not fail the run, one
#                      'SPEC TEXT | REASON' a line (default
#                      hack/reference/exclude-$DRIVER-v1.MINOR.txt when it exists;
#                      REFERENCE_EXCLUDE=/dev/null counts every failure)
#   REFERENCE_PROCS    ginkgo parallel processes (default 2; Serial specs run last, alone)
#   REFERENCE_NODES    real nodes (default 1, on the host's network, each chart staged for
#                      it); 3 runs three nodes in their own network namespaces with pod
#                      networking and kube-proxy, each chart with its defaults (webhooks
#                      behind their Services), the Go chart unpatched
#   REFERENCE_KUBE_VERSION  Kubernetes of the control plane and the kubelet (default
#                      the pinned one, v1.37.2; v1.36.3 is the minor the suite targets)
#
# Builds (cached): the suite, the ginkgo CLI and the Go driver from the pinned module
# hack/tools/dra-example-e2e (hack/build-binaries.sh reference), for DRIVER=go cert-manager
# (hack/tools/cert-manager) and helm, the control plane and
# node binaries, the images (hack/reference/build-images.sh; drakit's example image
# from examples/example-driver/hack/build-image.sh). Prints a per-spec table and exits
# non-zero when a spec failed that the exclusion file does not name. Everything it
# starts is stopped and the machine restored on exit, Ctrl-C or SIGTERM; a run killed
# with SIGKILL is cleaned up by the next one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DRIVER="${DRIVER:-drakit}"
case "$DRIVER" in
  go | drakit) ;;
  *) echo "test-reference: DRIVER must be go or drakit, not '$DRIVER'" >&2; exit 2 ;;
esac
PROCS="${REFERENCE_PROCS:-2}"
EXCLUDE="${REFERENCE_EXCLUDE:-}"
# shellcheck source=versions.env
source "$ROOT/hack/versions.env"
KUBE="${REFERENCE_KUBE_VERSION:-$KUBE_VERSION}"
KUBE_MINOR="${KUBE#v}"; KUBE_MINOR="v${KUBE_MINOR%.*}"
if [[ " $KUBE_VERSIONS " != *" $KUBE "* ]]; then
  echo "test-reference: REFERENCE_KUBE_VERSION=$KUBE is not one of $KUBE_VERSIONS" >&2; exit 2
fi
OUT="${REFERENCE_OUT:-$ROOT/build/reference/$DRIVER-$KUBE}"
# Default: the specs this environment rules out for that driver and minor, each with its reason.
if [[ -z $EXCLUDE && -f $ROOT/hack/reference/exclude-$DRIVER-$KUBE_MINOR.txt ]]; then
  EXCLUDE="$ROOT/hack/reference/exclude-$DRIVER-$KUBE_MINOR.txt"
fi
log() { echo "test-reference: $*" >&2; }

if [[ $EUID -ne 0 ]]; then
  log "needs root: the real node's kubelet, containerd and runc manage cgroups and mounts"; exit 3
fi
PY="$ROOT/.venv/bin/python"
[[ -x $PY ]] || make -C "$ROOT" venv >/dev/null

start=$SECONDS
# The suite and the Go driver do not depend on the cluster's version: the default's build.
REF_BIN="$(DRAKIT_KUBE_VERSION="$KUBE_VERSION" "$ROOT/hack/build-binaries.sh" reference)/reference"
DRAKIT_KUBE_VERSION="$KUBE" "$ROOT/hack/build-binaries.sh" kube etcd node >/dev/null
MODULE_DIR="$(cd "$ROOT/hack/tools/dra-example-e2e" && go list -m -f '{{.Dir}}' sigs.k8s.io/dra-example-driver)"

REFERENCE_GO_IMAGE=$([[ $DRIVER == go ]] && echo 1 || echo 0)
images=()
while read -r name archive; do images+=(--image "$name=$archive"); done \
  < <(REFERENCE_GO_IMAGE=$REFERENCE_GO_IMAGE "$ROOT/hack/reference/build-images.sh" "$REF_BIN")

cert_manager_args=()
if [[ $DRIVER == go ]]; then
  chart="$MODULE_DIR/deployments/helm/dra-example-driver"
  driver_image="registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0"
  # The Go chart's webhook takes its certificate and CA bundle from cert-manager, which
  # upstream's e2e setup installs (v1.20.2): its controllers and cainjector from the pinned
  # module, its CRDs rendered from its chart with helm (hack/reference/certmanager.py).
  TOOLS="$(DRAKIT_KUBE_VERSION="$KUBE_VERSION" "$ROOT/hack/build-binaries.sh" cert-manager helm)"
  CM_DIR="$(cd "$ROOT/hack/tools/cert-manager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
  cert_manager_args=(--cert-manager "$TOOLS/cert-manager" --helm "$TOOLS/helm"
    --cert-manager-chart "$CM_DIR/deploy/charts/cert-manager")
else
  chart="$ROOT/examples/example-driver/deployments/helm/example-driver"
  build="$ROOT/examples/example-driver/hack/build-image.sh"
  if [[ ! -x $build || ! -f $chart/Chart.yaml ]]; then
    log "drakit's example driver (its chart and $build) is not there yet"; exit 3
  fi
  # The script prints the OCI archive's path last; the archive carries the image name.
  archive="$("$build" | tail -n 1)"
  driver_image="$(tar -xOf "$archive" index.json | "$PY" -c \
    'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])')"
  images+=(--image "$driver_image=$archive")
fi
log "built or found everything in $((SECONDS - start))s"

exclude_args=()
[[ -n $EXCLUDE ]] && exclude_args=(--exclude "$EXCLUDE")
cd "$ROOT"
PYTHONPATH="$ROOT/hack/reference${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" "$ROOT/hack/reference/launcher.py" \
  --driver "$DRIVER" --out "$OUT" --bin "$REF_BIN" --module-dir "$MODULE_DIR" --chart "$chart" \
  --driver-image "$driver_image" "${images[@]}" "${exclude_args[@]}" "${cert_manager_args[@]}" \
  --procs "$PROCS" --nodes "${REFERENCE_NODES:-1}" \
  --kube-version "$KUBE" -- "$@"
