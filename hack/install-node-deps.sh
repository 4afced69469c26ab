#!/usr/bin/env bash
# Installs the Debian packages the real-node tier needs, when they are
# missing: buildah and mmdebstrap (the image build), libseccomp-dev and
# pkg-config (runc with seccomp), busybox-static (the test containers' image),
# iptables (kube-proxy and the portmap CNI plugin, inside the nodes' own network
# namespaces of `local-node up --nodes N`).
# Needs root and apt; does nothing when everything is there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian-packages.sh"
ensure_debian_packages install-node-deps buildah mmdebstrap libseccomp-dev pkg-config busybox-static iptables
