#!/usr/bin/env bash
# Builds an earlier release of drakit from its tag: its source, chart and image.
#
#   hack/build-release.sh v0.1.0              # source, chart and image
#   hack/build-release.sh --no-image v0.1.0   # source and chart only (no root needed)
#
# prints one `key=path` line each:
#
#   source=<cache>/releases/v0.1.0/src                     the tag's tree (a git worktree)
#   chart=<cache>/releases/v0.1.0/src/deploy/helm/drakit   the tag's Helm chart
#   image=<cache>/images/drakit-release-<hash>.oci.tar     the tag's image (not with --no-image)
#   image_tag=release-<hash>                               its tag in localhost/drakit
#
# - The tree is a detached git worktree of the tag's commit under
#   $DRAKIT_CACHE_DIR/releases/<tag>/src (default ~/.cache/drakit), outside the checkout.
#   It is reused while it is at that commit with no tracked file changed; otherwise it is
#   made again (a moved tag, an edited file, a worktree whose repository is gone).
# - The image is built from the tag's own deploy/Dockerfile and tree (an earlier release
#   copies other folders than today's), with the builder of hack/build-image.sh
#   (hack/lib/buildah.sh). It is cached the same way, by content: the hash of the git
#   objects of every path the Dockerfile COPYs, plus the Dockerfile and .dockerignore.
#   Two tags with the same image content share one build; archives of releases are few
#   and are kept.
# - The tags come from $DRAKIT_RELEASE_REPO (default: this checkout's repository).
# - Exit code 3: a missing tool, root for the image, or a tag the repository lacks (a
#   clone without tags: `git fetch --tags`); one line on stderr says which.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="${DRAKIT_RELEASE_REPO:-$ROOT}"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"

log() { echo "build-release: $*" >&2; }

WITH_IMAGE=1
if [[ "${1:-}" == "--no-image" ]]; then WITH_IMAGE=0; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: hack/build-release.sh [--no-image] TAG" >&2
  exit 2
fi
TAG="$1"
# A release tag names a folder of the cache: vMAJOR.MINOR.PATCH with an optional suffix.
if [[ ! "$TAG" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([.+-][0-9A-Za-z.+-]*)?$ ]]; then
  log "tag $TAG is not a release tag (vMAJOR.MINOR.PATCH[-suffix])"
  exit 2
fi
if ! COMMIT="$(git -C "$REPO" rev-parse --verify --quiet "refs/tags/$TAG^{commit}")"; then
  log "the repository $REPO has no tag $TAG (a clone without tags? git fetch --tags)"
  exit 3
fi

RELEASES="$CACHE/releases"
SRC="$RELEASES/$TAG/src"
mkdir -p "$RELEASES/$TAG"
exec 8>"$RELEASES/$TAG/.lock"
flock 8

worktree_is_current() {
  [[ -e "$SRC/.git" ]] || return 1
  [[ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null)" == "$COMMIT" ]] || return 1
  # Tracked files as the tag has them (untracked ones, such as a .venv, stay out of the
  # image: the Dockerfile copies named paths of the tag only).
  [[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]]
}

if ! worktree_is_current; then
  log "checking out $TAG ($COMMIT) into $SRC"
  rm -rf "$SRC"
  git -C "$REPO" worktree prune
  git -C "$REPO" worktree add --quiet --detach --force "$SRC" "$COMMIT" >&2
fi
echo "source=$SRC"
echo "chart=$SRC/deploy/helm/drakit"
[[ $WITH_IMAGE -eq 1 ]] || exit 0

# The paths every COPY of the tag's Dockerfile reads from the build context (COPY --from
# reads another stage: not the context).
copied_paths() {
  git -C "$REPO" show "$COMMIT:deploy/Dockerfile" | awk '
    toupper($1) == "COPY" {
      from = 0; n = 0
      for (i = 2; i <= NF; i++) {
        if ($i ~ /^--from=/) from = 1
        else if ($i !~ /^--/) args[++n] = $i
      }
      if (!from) for (i = 1; i < n; i++) print args[i]
    }'
}
content_hash() {
  local paths
  mapfile -t paths < <(copied_paths)
  git -C "$REPO" ls-tree -r --full-tree "$COMMIT" -- deploy/Dockerfile .dockerignore "${paths[@]}" \
    | sha256sum | cut -c1-12
}
IMAGE_TAG="release-$(content_hash)"
IMAGE="localhost/drakit:$IMAGE_TAG"

# shellcheck source=hack/lib/buildah.sh
source "$ROOT/hack/lib/buildah.sh"
buildah_setup build-release
ARCHIVE="$IMAGES/drakit-$IMAGE_TAG.oci.tar"
if [[ ! -s "$ARCHIVE" ]]; then
  buildah_lock
  build_python_base
  build_oci_archive "$SRC" "$SRC/deploy/Dockerfile" "$IMAGE" "$ARCHIVE"
fi
echo "image=$ARCHIVE"
echo "image_tag=$IMAGE_TAG"
