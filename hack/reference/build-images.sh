#!/usr/bin/env bash
# Builds the two images the reference suite needs on a node without a registry
# and prints "NAME ARCHIVE" lines (OCI archives for `ctr images import`):
#
#   docker.io/library/ubuntu:22.04  the demo manifests' workload image. Its pods only
#       run `bash -c "export; ...; env | grep GPU_ | sort; trap ...; sleep 9999 & wait"`,
#       so a stand-in made of Debian's bash-static and busybox-static (env, grep, sort,
#       sleep) does the same job; there is no registry to pull the real one from.
#   registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0  upstream's Go driver
#       (the name and tag its chart uses by default), from the static binaries
#       `hack/build-binaries.sh reference` built from the pinned module.
#
#   hack/reference/build-images.sh BIN_DIR
#
# Same builder as hack/build-image.sh: rootful buildah, vfs storage under
# $DRAKIT_CACHE_DIR/buildah, no daemon. Archives are cached under
# $DRAKIT_CACHE_DIR/images/reference, named by the content that went in.
set -euo pipefail
BIN_DIR="${1:?usage: build-images.sh BIN_DIR (the folder of hack/build-binaries.sh reference)}"
CACHE="${DRAKIT_CACHE_DIR:-$HOME/.cache/drakit}"
OUT="$CACHE/images/reference"
STORE="$CACHE/buildah"
mkdir -p "$OUT" "$STORE/cni"
exec 9>"$OUT/.build.lock"
flock 9

log() { echo "reference-images: $*" >&2; }
for tool in buildah apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is not installed (apt-get install buildah)"; exit 3; }
done
[[ $EUID -eq 0 ]] || { log "needs root (rootful buildah)"; exit 3; }

BUILDAH=(buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs)
# Keep buildah's CNI configuration in the cache, not in the host's /etc/cni/net.d.
printf '[network]\nnetwork_config_dir = "%s"\n' "$STORE/cni" >"$STORE/containers.conf"
export CONTAINERS_CONF="$STORE/containers.conf"

UBUNTU_NAME=docker.io/library/ubuntu:22.04
GO_NAME=registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0

# commit_rootfs DIR NAME ARCHIVE: an image of exactly DIR's files, saved as an OCI archive.
commit_rootfs() {
  local dir="$1" name="$2" archive="$3" ctr
  ctr="$("${BUILDAH[@]}" from --quiet scratch)"
  tar -C "$dir" -cf "$dir.tar" .
  "${BUILDAH[@]}" add --quiet "$ctr" "$dir.tar" / >&2
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr" >&2
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$name" >/dev/null  # prints the image ID
  "${BUILDAH[@]}" push --quiet "$name" "oci-archive:$archive.tmp:$name" >&2
  "${BUILDAH[@]}" rmi "$name" >/dev/null 2>&1 || true
  mv -f "$archive.tmp" "$archive"
  rm -rf "$dir" "$dir.tar"
}

build_ubuntu_standin() {
  local work="$OUT/ubuntu-standin.d" debs="$OUT/debs" key archive
  mkdir -p "$debs"
  # The versions apt offers name the archive: a Debian point release rebuilds it.
  key="$(apt-cache policy bash-static busybox-static | grep Candidate | sha256sum | cut -c1-12)"
  archive="$OUT/ubuntu-standin-$key.oci.tar"
  if [[ ! -s $archive ]]; then
    log "making the $UBUNTU_NAME stand-in from Debian's bash-static and busybox-static"
    rm -rf "$work" "$debs"/*.deb && mkdir -p "$work"/{bin,tmp,etc}
    # apt downloads as its _apt user where it may write (a warning otherwise).
    chown _apt "$debs" 2>/dev/null || true
    (cd "$debs" && apt-get download bash-static busybox-static >&2)
    local deb
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$work"; done
    ln -sf bash-static "$work/bin/bash"
    ln -sf bash-static "$work/bin/sh"
    # busybox's applets (sleep, env, grep, sort, ...) as links next to it.
    local applet
    for applet in $("$work/bin/busybox" --list); do
      [[ -e $work/bin/$applet ]] || ln -s busybox "$work/bin/$applet"
    done
    chmod 1777 "$work/tmp"
    printf 'root:x:0:0:root:/root:/bin/bash\n' >"$work/etc/passwd"
    printf 'root:x:0:\n' >"$work/etc/group"
    rm -rf "$work/usr/share"
    commit_rootfs "$work" "$UBUNTU_NAME" "$archive"
  fi
  echo "$UBUNTU_NAME $archive"
}

build_go_driver() {
  local work="$OUT/go-driver.d" key archive b
  local bins=(dra-example-kubeletplugin dra-example-controller dra-example-webhook)
  key="$(cd "$BIN_DIR" && sha256sum "${bins[@]}" | sha256sum | cut -c1-12)"
  archive="$OUT/dra-example-driver-v0.4.0-$key.oci.tar"
  if [[ ! -s $archive ]]; then
    log "making $GO_NAME from the pinned module's binaries"
    rm -rf "$work" && mkdir -p "$work"/{usr/bin,tmp}
    chmod 1777 "$work/tmp"
    for b in "${bins[@]}"; do install -m 0755 "$BIN_DIR/$b" "$work/usr/bin/$b"; done
    commit_rootfs "$work" "$GO_NAME" "$archive"
    # Older builds of the same image are of no use.
    ls -1t "$OUT"/dra-example-driver-v0.4.0-*.oci.tar | tail -n +2 | xargs -r rm -f
  fi
  echo "$GO_NAME $archive"
}

build_ubuntu_standin
if [[ ${REFERENCE_GO_IMAGE:-1} == 1 ]]; then build_go_driver; fi
