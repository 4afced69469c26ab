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
from pathlib import Path
from typing import Any

import pytest
from deploy_support import Helm, one
from helpers.waiting import eventually

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
    def healthy() -> bool:
        if _probe(container, env).returncode == 0:
            return True
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        return False

    eventually(healthy, "the node plugin's liveness probe to pass", 60)


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
        process.communicate(timeout=30)  # also closes the stderr pipe
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


# Inside a private mount namespace: the whole file system read-only (as the
# chart's readOnlyRootFilesystem), except the folder holding the plugin's host
# folders (the chart's hostPath mounts) and TMPDIR in it (the chart's /tmp
# emptyDir: the Python client writes a kubeconfig's embedded certificates to
# temporary files; in a pod, the in-cluster configuration needs none).
READ_ONLY_ROOT = """
set -e
mount --make-rprivate /
mount --rbind / /
mount -o remount,bind,ro /
mount --bind "$WRITABLE" "$WRITABLE"
mount -o remount,bind,rw "$WRITABLE"
exec "$@"
"""


def _allocated_claim(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    from drakit.kubeapi.client import load_client  # noqa: PLC0415
    from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource  # noqa: PLC0415

    claims = Resource(load_client(cluster.kubeconfig), RESOURCE_CLAIMS)
    claim = claims.create(
        {
            "metadata": {"name": "ro-root", "namespace": namespace},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
            },
        }
    )
    result = {"request": "gpu", "driver": DRIVER, "pool": "probe-node", "device": "gpu-0"}
    claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    return claims.update_status(claim)


def test_node_plugin_prepares_with_a_read_only_root_filesystem(
    helm: Helm, cluster: LocalCluster, short_root: Path, namespace: str
) -> None:
    import grpc  # noqa: PLC0415

    from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1  # noqa: PLC0415
    from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc  # noqa: PLC0415
    from drakit.node_plugin.sockets import socket_paths  # noqa: PLC0415

    container = _container(helm, short_root)
    (short_root / "tmp").mkdir()
    env = {
        **_environment(container, cluster),
        "WRITABLE": str(short_root),
        "TMPDIR": str(short_root / "tmp"),
    }
    claim = _allocated_claim(cluster, namespace)
    process = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY_ROOT, "sh",
         sys.executable, "-m", "drakit.cli", "node-plugin"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_until_serving(process, container, env)
        paths = socket_paths(
            short_root / "kubelet" / "plugins_registry",
            short_root / "kubelet" / "plugins" / DRIVER,
            DRIVER,
            POD_UID,
        )
        meta = claim["metadata"]
        request = v1.NodePrepareResourcesRequest(
            claims=[v1.Claim(namespace=namespace, uid=meta["uid"], name=meta["name"])]
        )
        with grpc.insecure_channel(f"unix:{paths.dra}") as channel:
            response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=30)
        assert response.claims[meta["uid"]].error == ""
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert "Read-only file system" not in stderr
    assert [p.name for p in (short_root / "cdi").iterdir()] == [
        f"k8s.{DRIVER}-claim_{meta['uid']}.json"
    ]
    assert (short_root / "kubelet" / "plugins" / DRIVER / "checkpoint.json").is_file()
