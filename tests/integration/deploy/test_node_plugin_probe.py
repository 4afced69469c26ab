"""The DaemonSet's liveness probe, run against a real `drakit node-plugin` process.

The plugin gets exactly the environment the chart gives its container (host
folders moved into a temporary directory through the chart's own values),
and the probe command is taken from the rendered DaemonSet, so what is
tested is what a kubelet would run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deploy_support import Helm, one

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

DRIVER = "probe.drakit.test"
POD_UID = "3f1c2a9e-7b3d-4c55-9a0e-2d4f6b8a1c3e"


def _container(helm: Helm, root: Path) -> dict[str, Any]:
    values = {
        "driverName": DRIVER,
        "kubeletDir": str(root / "kubelet"),
        "cdiRoot": str(root / "cdi"),
        "nodePlugin.metrics.enabled": "false",
    }
    ds = one(helm.render(values=values), "DaemonSet")
    container: dict[str, Any] = ds["spec"]["template"]["spec"]["containers"][0]
    return container


def _environment(container: dict[str, Any], cluster: LocalCluster) -> dict[str, str]:
    """The container's environment, with the downward API filled in as the kubelet would."""
    downward = {"spec.nodeName": "probe-node", "metadata.uid": POD_UID}
    env = {k: v for k, v in os.environ.items() if k != "POD_UID"}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = downward[var["valueFrom"]["fieldRef"]["fieldPath"]]
    env["KUBECONFIG"] = cluster.kubeconfig  # stands in for the in-cluster service account
    return env


def _probe(container: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = list(container["livenessProbe"]["exec"]["command"])
    assert command[0] == "python"
    command[0] = sys.executable  # the image's python is the one drakit is installed into
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=30, check=False)


def _wait_until_serving(
    process: subprocess.Popen[str], container: dict[str, Any], env: dict[str, str]
) -> None:
    deadline = time.monotonic() + 60
    while _probe(container, env).returncode != 0:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        if time.monotonic() > deadline:
            pytest.fail("the node plugin never became healthy")
        time.sleep(0.2)


def test_liveness_probe_passes_while_the_plugin_serves_and_fails_after_it_stops(
    helm: Helm, cluster: LocalCluster, short_root: Path
) -> None:
    container = _container(helm, short_root)
    env = _environment(container, cluster)
    assert container["command"] == ["drakit", "node-plugin"]
    process = subprocess.Popen(
        [sys.executable, "-m", "drakit.cli", "node-plugin"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_until_serving(process, container, env)
        healthy = _probe(container, env)
        assert healthy.returncode == 0, healthy.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    stopped = _probe(container, env)
    assert stopped.returncode == 1
    assert stopped.stderr.startswith("drakit node plugin probe: UNAVAILABLE")
    assert "Traceback" not in stopped.stderr


def test_liveness_probe_fails_when_no_plugin_ever_ran(
    helm: Helm, cluster: LocalCluster, short_root: Path
) -> None:
    container = _container(helm, short_root)
    result = _probe(container, _environment(container, cluster))
    assert result.returncode == 1
    assert "drakit node plugin probe: UNAVAILABLE" in result.stderr
