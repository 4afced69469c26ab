"""Subprocess entry point: prepare one claim in a plugin SIGKILLed inside an output's write.

The outputs are the standard ones with two added before the CDI spec: a marker file (it
writes) and one that kills the process. When the process dies the claim is recorded
``PrepareStarted``, the backend prepared it, the device metadata files and the marker are
written and the CDI spec is not.

Usage: python crash_in_output.py ROOT KUBECONFIG NAMESPACE NAME UID
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script by the crash test (pytest's pythonpath does not reach it): the sibling
# helpers are imported from this folder.
sys.path.insert(0, str(Path(__file__).parent))

from claims import call, claims_resource, make_config
from conftest import EXAMPLE_CONFIG
from traced_outputs import Calls, MarkerOutput, TracedBackend, outputs_with

from drakit.kubeapi.lightclient import load_light_client
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin import ClaimRef


def main() -> None:
    root, kubeconfig, namespace, name, uid = sys.argv[1:6]
    config = make_config(Path(root))
    calls: Calls = []
    killer = MarkerOutput(config, calls, title="killer", kill=True)
    outputs = outputs_with(config, calls, MarkerOutput(config, calls), killer)
    # The light client: the full one leaves the kubeconfig's key behind on a SIGKILL.
    api = load_light_client(kubeconfig)
    core = PrepareCore(
        config, PluginMetrics(), TracedBackend(calls, EXAMPLE_CONFIG), claims_resource(api),
        boot_id=lambda: "boot-1", outputs=outputs,
    )  # fmt: skip
    core.start()
    core.prepare([ClaimRef(namespace, uid, name)], call(config))


if __name__ == "__main__":
    main()
