"""The example driver as ``drakit node-plugin`` runs it, driven by the kubelet's real DRA
manager (the kubelet harness) against the real kube-apiserver: it registers, publishes its
GPUs, and prepares a claim with opaque config into CDI specs whose environment is what
upstream's e2e suite reads; with gpuDeviceStatus the claim's status.devices carries the
GPU's uuid, model and driverVersion."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from example_paths import ROOT, subprocess_env
from harness.cdi import assert_cdi_ids_resolve
from harness.kubelet import KubeletHarness
from kubernetes import client

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

DRIVER = "gpu.example-harness.example.com"
WAIT = 60.0
GPU_DEVICE = re.compile(r'(?m)^declare -x GPU_DEVICE_[A-Z0-9_]+="(gpu-.+)"$')


@pytest.fixture
def node(cluster: LocalCluster) -> Iterator[str]:
    core = client.CoreV1Api(cluster.api_client())
    name = f"example-{uuid.uuid4().hex[:8]}"
    core.create_node({"metadata": {"name": name}})
    yield name
    core.delete_node(name)


@pytest.fixture
def root() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes: a short folder under /tmp.
    path = Path(tempfile.mkdtemp(prefix="exd-", dir="/tmp"))
    for sub in ("reg", "plugins", "cdi", "kubelet"):
        (path / sub).mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def harness(
    kubelet_harness_binary: Path, cluster: LocalCluster, node: str, root: Path
) -> Iterator[KubeletHarness]:
    with KubeletHarness(
        kubelet_harness_binary,
        cluster.kubeconfig,
        node,
        root / "reg",
        root / "kubelet",
        feature_gates=cluster.feature_gates,
    ) as h:
        yield h


@pytest.fixture
def plugin(
    cluster: LocalCluster, node: str, root: Path, harness: KubeletHarness
) -> Iterator[subprocess.Popen[bytes]]:
    """``drakit node-plugin`` with the example driver: 2 GPUs, device status on."""
    config = root / "config.json"
    config.write_text(json.dumps({"profile": "gpu", "numDevices": 2, "deviceStatus": True}))
    log = (root / "plugin.log").open("wb")
    argv = [
        str(ROOT / ".venv" / "bin" / "drakit"),
        "node-plugin",
        f"--driver-name={DRIVER}",
        f"--node-name={node}",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--kubelet-registrar-dir={root / 'reg'}",
        f"--kubelet-plugins-dir={root / 'plugins'}",
        f"--cdi-root={root / 'cdi'}",
        "--backend=example_driver.driver:ExampleDriver",
        f"--backend-config={config}",
        "--cpu-home=off",
        "--log-format=text",
    ]
    proc = subprocess.Popen(argv, env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        harness.wait_for("registered", driver=DRIVER, timeout=WAIT)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        print((root / "plugin.log").read_text())


def published_devices(cluster: LocalCluster, node: str) -> dict[str, Any]:
    resource = client.ResourceV1Api(cluster.api_client())
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        slices = resource.list_resource_slice(
            field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
        )
        devices = {d.name: d for s in slices.items for d in s.spec.devices or []}
        if devices:
            return devices
        time.sleep(0.2)
    raise AssertionError(f"no ResourceSlice of {DRIVER} for node {node} within {WAIT:g}s")


GPU_CONFIG = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 10}},
}


def create_prepared_pod(
    cluster: LocalCluster, namespace: str, node: str, *, with_config: bool = True
) -> str:
    """A claim for one GPU (with GpuConfig), a pod on ``node`` using it, and the allocation
    and reservation kube-scheduler would write (gpu-1 of the node's pool). Returns the
    claim's UID."""
    resource = client.ResourceV1Api(cluster.api_client())
    opaque = {"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": GPU_CONFIG}}
    configs = [opaque] if with_config else []
    claim = resource.create_namespaced_resource_claim(
        namespace,
        {
            "metadata": {"name": "one-gpu"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}],
                    "config": configs,
                }
            },
        },
    )
    pod = client.CoreV1Api(cluster.api_client()).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "pod0"},
            "spec": {
                "nodeName": node,
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "one-gpu"}],
                "containers": [
                    {
                        "name": "ctr0",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
            },
        },
    )
    result = {"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-1"}
    resource.patch_namespaced_resource_claim_status(
        "one-gpu",
        namespace,
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [result],
                        "config": [{**c, "source": "FromClaim"} for c in configs],
                    }
                },
                "reservedFor": [{"resource": "pods", "name": "pod0", "uid": pod.metadata.uid}],
            }
        },
    )
    return str(claim.metadata.uid)


def container_env(cdi_root: Path, ids: list[str]) -> list[str]:
    """The env a runtime would give a container with these CDI devices."""
    env: list[str] = []
    for path in sorted(cdi_root.glob("*.json")):
        spec = json.loads(path.read_text())
        env += spec.get("containerEdits", {}).get("env", [])
        for device in spec["devices"]:
            if f"{spec['kind']}={device['name']}" in ids:
                env += device["containerEdits"].get("env", [])
    return env


@pytest.mark.usefixtures("plugin")
def test_plugin_publishes_gpus_and_prepares_a_configured_claim_for_the_kubelet(
    cluster: LocalCluster, namespace: str, node: str, root: Path, harness: KubeletHarness
) -> None:
    devices = published_devices(cluster, node)
    assert sorted(devices) == ["gpu-0", "gpu-1"]

    create_prepared_pod(cluster, namespace, node)
    prepared = harness.wait_for("prepared", pod=f"{namespace}/pod0", timeout=WAIT)
    ids = prepared["containers"]["ctr0"]
    assert_cdi_ids_resolve(ids, root / "cdi")
    env = dict(e.split("=", 1) for e in container_env(root / "cdi", ids))
    export = "".join(f'declare -x {k}="{v}"\n' for k, v in sorted(env.items()))
    assert GPU_DEVICE.findall(export) == ["gpu-1"]
    assert env["GPU_DEVICE_1_SHARING_STRATEGY"] == "SpacePartitioning"
    assert env["GPU_DEVICE_1_PARTITION_COUNT"] == "10"
    assert env["DRA_ADMIN_ACCESS"] == "false"


def test_prepared_gpu_is_reported_in_the_claim_status(
    cluster: LocalCluster, namespace: str, node: str, plugin: subprocess.Popen[bytes]
) -> None:
    uuid_1 = published_devices(cluster, node)["gpu-1"].attributes["uuid"].string
    create_prepared_pod(cluster, namespace, node, with_config=False)
    resource = client.ResourceV1Api(cluster.api_client())
    deadline = time.monotonic() + WAIT
    while not (
        claim := resource.read_namespaced_resource_claim("one-gpu", namespace)
    ).status.devices:
        assert time.monotonic() < deadline, "no status.devices written"
        time.sleep(0.2)
    (status,) = claim.status.devices
    assert (status.driver, status.pool, status.device) == (DRIVER, node, "gpu-1")
    assert status.data == {
        "uuid": {"string": uuid_1},
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.0.0"},
    }
