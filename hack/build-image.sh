#!/usr/bin/env bash
# Builds drakit's image from deploy/Dockerfile without a Docker daemon and
# prints the path of an OCI archive that `ctr images import` loads.
#
#   hack/build-image.sh            # prints <cache>/images/drakit-<tag>.oci.tar
#   IMAGE_TAG=x hack/build-image.sh
#
# - The builder (hack/lib/buildah.sh): rootful buildah, vfs storage, chroot
#   isolation, a Python base image made from Debian packages; the Dockerfile
#   is used unchanged. A user with a registry builds with
#   `docker build -f deploy/Dockerfile .` as usual.
# - Both images are cached under $DRAKIT_CACHE_DIR/images (default
#   ~/.cache/drakit): the base by its package list, drakit's by the content of
#   every file the Dockerfile copies. The tag is dev-<content hash>, so a
#   changed source gives a new tag and an unchanged one costs nothing.
# - An earlier release's image is hack/build-release.sh's (from its tag).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/buildah.sh
source "$ROOT/hack/lib/buildah.sh"
buildah_setup build-image
buildah_lock

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

build_python_base
if [[ ! -s "$ARCHIVE" ]]; then
  build_oci_archive "$ROOT" "$ROOT/deploy/Dockerfile" "$IMAGE" "$ARCHIVE"
  # Keep the three newest archives: every source change makes a new one.
  ls -1t "$IMAGES"/drakit-dev-*.oci.tar 2>/dev/null | tail -n +4 | xargs -r rm -f
fi
echo "$ARCHIVE"
