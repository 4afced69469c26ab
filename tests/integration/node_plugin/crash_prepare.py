"""Subprocess entry point: prepare one claim with a backend that SIGKILLs the process.

Usage: python crash_prepare.py ROOT KUBECONFIG NAMESPACE NAME UID
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script by the crash test (pytest's pythonpath does not reach it): the sibling
# helpers and the crash backend are imported from this folder.
sys.path.insert(0, str(Path(__file__).parent))

from claims import DRIVER, NODE, call, claims_resource, make_config

from drakit.kubeapi.lightclient import load_light_client
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin import ClaimRef


def main() -> None:
    root, kubeconfig, namespace, name, uid = sys.argv[1:6]
    config = make_config(Path(root))
    backend = load_backend("crash_backend:KillInPrepareBackend", driver_name=DRIVER, node_name=NODE)
    # The plugin's own client. The full client would also leave the kubeconfig's key and
    # certificates behind in the temp folder: it deletes its copies at exit, and this
    # process ends by SIGKILL.
    api = load_light_client(kubeconfig)
    core = PrepareCore(
        config, PluginMetrics(), backend, claims_resource(api), boot_id=lambda: "boot-1"
    )
    core.start()
    core.prepare([ClaimRef(namespace, uid, name)], call(config))


if __name__ == "__main__":
    main()
