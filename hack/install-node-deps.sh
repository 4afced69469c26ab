#!/usr/bin/env bash
# Installs the Debian packages the real-node tier needs, when they are
# missing: buildah and mmdebstrap (the image build), libseccomp-dev and
# pkg-config (runc with seccomp), busybox-static (the test containers' image).
# Needs root and apt; does nothing when everything is there.
set -euo pipefail
PACKAGES=(buildah mmdebstrap libseccomp-dev pkg-config busybox-static)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "install-node-deps: missing ${missing[*]}; install them as root with apt-get" >&2
  exit 3
fi
echo "install-node-deps: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
