#!/usr/bin/env bash
# Builds drakit's image from deploy/Dockerfile without a Docker daemon and
# prints the path of an OCI archive that `ctr images import` loads.
#
#   hack/build-image.sh            # prints <cache>/images/drakit-<tag>.oci.tar
#   IMAGE_TAG=x hack/build-image.sh
#
# - The builder is buildah (Debian package), rootful, vfs storage, chroot
#   isolation: no daemon, no mounts left behind on the host.
# - The Dockerfile is used unchanged; only its PYTHON_IMAGE build argument
#   points at a Python base image made here from Debian packages with
#   mmdebstrap (there is no registry to pull python:3.11-slim from). A user
#   with a registry builds with `docker build -f deploy/Dockerfile .` as usual.
# - Both images are cached under $DRAKIT_CACHE_DIR/images (default
#   ~/.cache/drakit): the base by its package list, drakit's by the content of
#   every file the Dockerfile copies. The tag is dev-<content hash>, so a
#   changed source gives a new tag and an unchanged one costs nothing.
# - The build reaches PyPI (pip inside the build); the host's CA bundle is
#   mounted read-only into the build for machines behind a TLS proxy.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
IMAGES="$CACHE/images"
STORE="$CACHE/buildah"
mkdir -p "$IMAGES" "$STORE"
exec 9>"$IMAGES/.build.lock"
flock 9

log() { echo "build-image: $*" >&2; }

for tool in buildah mmdebstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is not installed: apt-get install buildah mmdebstrap (Debian/Ubuntu)"
    exit 3
  fi
done
if [[ $EUID -ne 0 ]]; then
  log "needs root (rootful buildah with chroot isolation)"
  exit 3
fi

BUILDAH=(buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs)
# buildah's network backend otherwise makes /etc/cni/net.d (and a cni.lock in it) on the
# host for every command, even an inspect: keep its CNI configuration in the cache.
mkdir -p "$STORE/cni"
printf '[network]\nnetwork_config_dir = "%s"\n' "$STORE/cni" > "$STORE/containers.conf"
export CONTAINERS_CONF="$STORE/containers.conf"
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,python-is-python3,ca-certificates
BASE_KEY="$(echo "$SUITE $BASE_PACKAGES" | sha256sum | cut -c1-12)"
BASE_IMAGE="localhost/drakit-python-base:$SUITE-$BASE_KEY"

# Files the Dockerfile copies: their content names the image. The development tools are
# another distribution's source root (distributions/), outside the build context.
context_hash() {
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard -- \
      deploy/Dockerfile requirements/runtime.txt pyproject.toml README.md drakit .dockerignore \
    | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-12
}
TAG="${IMAGE_TAG:-dev-$(context_hash)}"
IMAGE="localhost/drakit:$TAG"
ARCHIVE="$IMAGES/drakit-$TAG.oci.tar"

build_base() {
  if "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then return; fi
  local tar="$IMAGES/python-base-$SUITE-$BASE_KEY.tar"
  if [[ ! -s "$tar" ]]; then
    log "making the Python base image from Debian $SUITE packages (mmdebstrap)"
    mmdebstrap --quiet --variant=apt --include="$BASE_PACKAGES" --format=tar "$SUITE" "$tar.tmp" >&2
    mv -f "$tar.tmp" "$tar"
  fi
  local ctr
  ctr="$("${BUILDAH[@]}" from --quiet scratch)"
  "${BUILDAH[@]}" add --quiet "$ctr" "$tar" / >&2
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$ctr" >&2
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE_IMAGE" >&2
}

build_drakit() {
  if [[ -s "$ARCHIVE" ]]; then return; fi
  log "building $IMAGE from deploy/Dockerfile (buildah)"
  local ca=()
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] &&
    ca=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  "${BUILDAH[@]}" build --quiet --isolation chroot --pull-never --layers=false \
    --build-arg PYTHON_IMAGE="$BASE_IMAGE" "${ca[@]}" \
    -f "$ROOT/deploy/Dockerfile" -t "$IMAGE" "$ROOT" >&2
  "${BUILDAH[@]}" push --quiet "$IMAGE" "oci-archive:$ARCHIVE.tmp:$IMAGE" >&2
  mv -f "$ARCHIVE.tmp" "$ARCHIVE"
  # Only the archive is needed from here on; the vfs copies are large.
  "${BUILDAH[@]}" rmi "$IMAGE" >/dev/null 2>&1 || true
  # Keep the three newest archives: every source change makes a new one.
  ls -1t "$IMAGES"/drakit-dev-*.oci.tar 2>/dev/null | tail -n +4 | xargs -r rm -f
}

build_base
build_drakit
echo "$ARCHIVE"
