#!/usr/bin/env bash
# Start or stop a real node (containerd, runc, the kubelet) for a local
# control plane. Needs root.
#   hack/local-cluster.sh up CDIR --with-scheduler --with-controller-manager --real-nodes
#   hack/local-node.sh up DIR --cluster-dir CDIR [--image ARCHIVE]...
#   hack/local-node.sh down DIR
# `down` restores the machine (processes, mounts, cgroups, sysctls, /etc/hosts).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
if [[ ! -x "$PY" ]]; then
  make -C "$ROOT" venv >/dev/null
fi
if [[ "${1:-}" == up ]]; then
  "$ROOT/hack/build-binaries.sh" node >/dev/null
fi
cd "$ROOT"
exec "$PY" -m drakit local-node "$@"
