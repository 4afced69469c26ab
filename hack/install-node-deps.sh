#!/usr/bin/env bash
# Installs the Debian packages the real-node tier needs, when they are
# missing: buildah and mmdebstrap (the image build), libseccomp-dev and
# pkg-config (runc with seccomp), busybox-static (the test containers' image),
# nftables (`nft`: `local-node up --nodes N` deletes at `down` the host's
# netfilter tables that its kube-proxy and rules created, which iptables cannot).
# Needs root and apt; does nothing when everything is there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-packages.sh"
ensure_debian_packages install-node-deps buildah mmdebstrap libseccomp-dev pkg-config busybox-static nftables
