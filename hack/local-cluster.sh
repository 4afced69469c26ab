#!/usr/bin/env bash
# Start or stop a local control plane for development.
#   hack/local-cluster.sh up DIR [--with-scheduler] [--with-controller-manager]
#                                [--kube-version v1.36.3]
#   hack/local-cluster.sh down DIR
# `up` writes DIR/kubeconfig and keeps running in the background until `down`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
if [[ ! -x "$PY" ]]; then
  make -C "$ROOT" venv >/dev/null
fi
# The default version's binaries are built here; another --kube-version's
# are built by the launcher itself (it resolves v1.36 to the pinned patch).
if [[ " $* " != *" --kube-version "* ]]; then
  "$ROOT/hack/build-binaries.sh" kube etcd >/dev/null
fi
exec "$PY" -m drakit.localcluster "$@"
