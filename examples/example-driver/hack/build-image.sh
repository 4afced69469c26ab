#!/usr/bin/env bash
# Builds the example driver's image without a Docker daemon and prints the
# path of an OCI archive that `ctr images import` loads.
#
#   examples/example-driver/hack/build-image.sh
#     # prints <cache>/images/drakit-example-driver-<tag>.oci.tar, whose image
#     # is localhost/drakit-example-driver:<tag>
#   IMAGE_TAG=x examples/example-driver/hack/build-image.sh
#
# - drakit's image comes first from the repository's hack/build-image.sh (the
#   same buildah store, vfs, no daemon; the Debian Python base it makes with
#   mmdebstrap; drakit's wheel and runtime lock in /opt/drakit). That script
#   caches by content, so an unchanged drakit costs nothing.
# - The example driver's wheel is built here (pip wheel --no-deps, no build
#   isolation: no index is reached) and installed into drakit's venv by the
#   Containerfile beside this script. The build reaches no registry.
# - The tag is dev-<hash of drakit's image tag and every file of the example
#   driver's distribution>: a changed source gives a new tag, an unchanged one
#   is not rebuilt. The three newest archives are kept.
set -euo pipefail
EXAMPLE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$EXAMPLE/../.." && pwd)"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
IMAGES="$CACHE/images"
STORE="$CACHE/buildah"
NAME=drakit-example-driver

log() { echo "build-image (example driver): $*" >&2; }

# drakit's image (builds the Python base first when needed); its own lock.
DRAKIT_ARCHIVE="$(IMAGE_TAG= "$ROOT/hack/build-image.sh")"
DRAKIT_TAG="$(basename "$DRAKIT_ARCHIVE" .oci.tar)"
DRAKIT_TAG="${DRAKIT_TAG#drakit-}"

mkdir -p "$IMAGES"
exec 9>"$IMAGES/.example-driver-build.lock"
flock 9

# The same store and network configuration as hack/build-image.sh.
BUILDAH=(buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs)
export CONTAINERS_CONF="$STORE/containers.conf"

PYTHON="$ROOT/.venv/bin/python"
[[ -x "$PYTHON" ]] || PYTHON=python3

context_hash() {
  {
    echo "drakit $DRAKIT_TAG"
    (cd "$EXAMPLE" && git ls-files -z --cached --others --exclude-standard -- \
        Containerfile pyproject.toml README.md src \
      | sort -z | xargs -0 -r sha256sum)
  } | sha256sum | cut -c1-12
}
TAG="${IMAGE_TAG:-dev-$(context_hash)}"
IMAGE="localhost/$NAME:$TAG"
ARCHIVE="$IMAGES/$NAME-$TAG.oci.tar"

build() {
  if [[ -s "$ARCHIVE" ]]; then return; fi
  local ctx base
  ctx="$(mktemp -d)"
  trap 'rm -rf "$ctx"' RETURN
  log "building the example driver's wheel"
  # From a copy: setuptools writes build/ and *.egg-info beside the sources.
  mkdir -p "$ctx/source"
  cp -r "$EXAMPLE/pyproject.toml" "$EXAMPLE/README.md" "$EXAMPLE/src" "$ctx/source/"
  find "$ctx/source" -name __pycache__ -prune -exec rm -rf {} +
  "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation --no-index \
    --wheel-dir "$ctx/wheels" "$ctx/source" >&2
  cp "$EXAMPLE/Containerfile" "$ctx/Containerfile"
  base="localhost/drakit:$DRAKIT_TAG"
  if ! "${BUILDAH[@]}" inspect --type image "$base" >/dev/null 2>&1; then
    local id
    id="$("${BUILDAH[@]}" pull --quiet "oci-archive:$DRAKIT_ARCHIVE")"
    "${BUILDAH[@]}" tag "$id" "$base" >&2
  fi
  log "building $IMAGE from $base (buildah)"
  "${BUILDAH[@]}" build --quiet --isolation chroot --pull-never --layers=false \
    --build-arg DRAKIT_IMAGE="$base" -f "$ctx/Containerfile" -t "$IMAGE" "$ctx" >&2
  "${BUILDAH[@]}" push --quiet "$IMAGE" "oci-archive:$ARCHIVE.tmp:$IMAGE" >&2
  mv -f "$ARCHIVE.tmp" "$ARCHIVE"
  # Only the archives are needed from here on; the vfs copies are large.
  "${BUILDAH[@]}" rmi "$IMAGE" "$base" >/dev/null 2>&1 || true
  ls -1t "$IMAGES/$NAME"-dev-*.oci.tar 2>/dev/null | tail -n +4 | xargs -r rm -f
}

build
echo "$ARCHIVE"
