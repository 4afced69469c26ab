# shellcheck shell=bash
# Sourced by hack/build-image.sh and hack/build-release.sh: drakit's image builder.
#
# - The builder is buildah (Debian package), rootful, vfs storage, chroot isolation: no
#   daemon, no mounts left behind on the host.
# - A Dockerfile is used unchanged; only its PYTHON_IMAGE build argument points at a Python
#   base image made here from Debian packages with mmdebstrap (there is no registry to pull
#   python:3.11-slim from).
# - Everything lives under $DRAKIT_CACHE_DIR (default ~/.cache/drakit): the OCI archives in
#   images/, buildah's store in buildah/. The caller holds images/.build.lock (buildah_lock)
#   while it builds: one store, one builder at a time.
# - The build reaches PyPI (pip inside the build); the host's CA bundle is mounted read-only
#   into the build for machines behind a TLS proxy.
#
# Functions (each logs to stderr, prints nothing on stdout):
#   buildah_setup WHO        checks tools and root (exit 3 with one line otherwise), sets BUILDAH
#   buildah_lock             takes the builder's lock on fd 9 (released when the script exits)
#   build_python_base        makes (or reuses) the base image, sets BASE_IMAGE
#   build_oci_archive CONTEXT DOCKERFILE IMAGE ARCHIVE
#                            builds IMAGE from DOCKERFILE with CONTEXT, writes ARCHIVE
#                            atomically (nothing to do when ARCHIVE exists)

DRAKIT_CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
IMAGES="$DRAKIT_CACHE/images"
STORE="$DRAKIT_CACHE/buildah"
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,python-is-python3,ca-certificates
BASE_KEY="$(echo "$SUITE $BASE_PACKAGES" | sha256sum | cut -c1-12)"
BASE_IMAGE="localhost/drakit-python-base:$SUITE-$BASE_KEY"
BUILDAH_WHO=build-image

buildah_log() { echo "$BUILDAH_WHO: $*" >&2; }

buildah_setup() {
  BUILDAH_WHO="$1"
  local tool
  for tool in buildah mmdebstrap; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      buildah_log "$tool is not installed: apt-get install buildah mmdebstrap (Debian/Ubuntu)"
      exit 3
    fi
  done
  if [[ $EUID -ne 0 ]]; then
    buildah_log "needs root (rootful buildah with chroot isolation)"
    exit 3
  fi
  mkdir -p "$IMAGES" "$STORE"
  BUILDAH=(buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs)
  # buildah's network backend otherwise makes /etc/cni/net.d (and a cni.lock in it) on the
  # host for every command, even an inspect: keep its CNI configuration in the cache.
  mkdir -p "$STORE/cni"
  printf '[network]\nnetwork_config_dir = "%s"\n' "$STORE/cni" > "$STORE/containers.conf"
  export CONTAINERS_CONF="$STORE/containers.conf"
}

buildah_lock() {
  mkdir -p "$IMAGES"
  exec 9>"$IMAGES/.build.lock"
  flock 9
}

build_python_base() {
  if "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then return; fi
  local tar="$IMAGES/python-base-$SUITE-$BASE_KEY.tar"
  if [[ ! -s "$tar" ]]; then
    buildah_log "making the Python base image from Debian $SUITE packages (mmdebstrap)"
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

build_oci_archive() {
  local context="$1" dockerfile="$2" image="$3" archive="$4"
  if [[ -s "$archive" ]]; then return; fi
  buildah_log "building $image from $dockerfile (buildah)"
  local ca=()
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] &&
    ca=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  "${BUILDAH[@]}" build --quiet --isolation chroot --pull-never --layers=false \
    --build-arg PYTHON_IMAGE="$BASE_IMAGE" "${ca[@]}" \
    -f "$dockerfile" -t "$image" "$context" >&2
  "${BUILDAH[@]}" push --quiet "$image" "oci-archive:$archive.tmp:$image" >&2
  mv -f "$archive.tmp" "$archive"
  # Only the archive is needed from here on; the vfs copies are large.
  "${BUILDAH[@]}" rmi "$image" >/dev/null 2>&1 || true
}
