"""kube-scheduler v1.37.2 and drakit's allocator agree on ``matchAttribute`` over the standard
``resource.kubernetes.io/pcieRoot`` attribute, for devices whose attributes drakit read from a
tree laid out like sysfs and published.

Four GPUs: one alone on root ``pci0000:00`` (the first a greedy search tries), two on
``pci0000:3a``, one alone on ``pci0000:80``. A claim for two GPUs on one root can only have
the pair; the real scheduler allocates it and binds the pod, and drakit's allocator, given the
same slices (read back from the apiserver), class, claim and Node, answers the same.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from publisher_support import DRIVER, Pool, StaticBackend, make_node

from drakit.allocator.model import Device
from drakit.allocator.scenario import run_scenario
from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)
from drakit.localcluster import LocalCluster
from drakit.node_plugin.publisher import Publisher
from drakit.plugin import pci_device_attributes

# Also in the differential tier (`pytest -m differential`): it compares drakit's allocator with
# kube-scheduler itself, where tests/differential compares it with the Go allocator library.
pytestmark = [pytest.mark.integration, pytest.mark.differential]

CLASS_NAME = "pcie-test.drakit.dev"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
GPUS = {  # name: (bus ID, path under devices/)
    "gpu-0": ("0000:01:00.0", "pci0000:00/0000:00:01.0/0000:01:00.0"),
    "gpu-1": ("0000:3b:00.0", "pci0000:3a/0000:3a:00.0/0000:3b:00.0"),
    "gpu-2": ("0000:3c:00.0", "pci0000:3a/0000:3a:02.0/0000:3c:00.0"),
    "gpu-3": ("0000:81:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0"),
}


def sysfs_with_gpus(root: Path) -> None:
    """``devices/<path>`` and the ``bus/pci/devices/<bdf>`` links to them, as the kernel has."""
    bus = root / "bus/pci/devices"
    bus.mkdir(parents=True)
    for bus_id, path in GPUS.values():
        (root / "devices" / path).mkdir(parents=True)
        (root / "devices" / path / "numa_node").write_text("0\n")
        (bus / bus_id).symlink_to(os.path.relpath(root / "devices" / path, bus))


def gpus_from_sysfs(root: Path) -> tuple[Device, ...]:
    return tuple(
        Device.from_dict(
            {
                "name": name,
                "attributes": {
                    key: {value.kind: value.value}
                    for key, value in pci_device_attributes(bus_id, sysfs_root=str(root)).items()
                },
            }
        )
        for name, (bus_id, _) in GPUS.items()
    )


@pytest.fixture
def pcie_setup(cluster_with_scheduler: LocalCluster) -> Iterator[tuple[Any, str, str]]:
    """(api, node, namespace) with a DeviceClass for the driver; all removed afterwards."""
    api = load_client(cluster_with_scheduler.kubeconfig, qps=1000, burst=1000)
    classes = Resource(api, DEVICE_CLASSES)
    with contextlib.suppress(NotFound):
        classes.delete(CLASS_NAME)
    classes.create(
        {
            "metadata": {"name": CLASS_NAME},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    node = f"pcie-{uuid.uuid4().hex[:8]}"
    make_node(api, node)
    nodes = Resource(api, NODES)
    obj = nodes.get(node)
    obj["spec"]["taints"] = []  # no kubelet will report Ready: drop the not-ready taint
    nodes.update(obj)
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    Resource(api, NAMESPACES).create({"metadata": {"name": namespace}})
    yield api, node, namespace
    Resource(api, NAMESPACES).delete(namespace)
    with contextlib.suppress(NotFound):
        nodes.delete(node)
    with contextlib.suppress(NotFound):
        classes.delete(CLASS_NAME)


def two_on_one_root(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "pair", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": CLASS_NAME, "count": 2}}
                ],
                "constraints": [{"matchAttribute": PCIE_ROOT}],
            }
        },
    }


def test_scheduler_and_drakit_allocator_keep_two_gpus_on_one_pcie_root(
    pcie_setup: tuple[Any, str, str], tmp_path: Path, eventually: Any
) -> None:
    api, node, namespace = pcie_setup
    sysfs_with_gpus(tmp_path)
    publisher = Publisher(
        api,
        DRIVER,
        node,
        StaticBackend([Pool(node, gpus_from_sysfs(tmp_path))]),
        detect_cluster=True,
    )
    publisher.start()
    try:
        claim = two_on_one_root(namespace)
        Resource(api, RESOURCE_CLAIMS).create(claim)
        Resource(api, PODS).create(
            {
                "metadata": {"name": "workload", "namespace": namespace},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "pair"}],
                },
            }
        )
        eventually(
            lambda: Resource(api, PODS).get("workload", namespace)["spec"].get("nodeName"),
            what="kube-scheduler to bind the pod",
        )
        stored = Resource(api, RESOURCE_CLAIMS).get("pair", namespace)
        by_scheduler = sorted(
            r["device"] for r in stored["status"]["allocation"]["devices"]["results"]
        )
        slices = [
            s
            for s in Resource(api, RESOURCE_SLICES).list().items
            if s["spec"]["driver"] == DRIVER and s["spec"].get("nodeName") == node
        ]
        answer = run_scenario(
            {
                "slices": slices,
                "classes": [Resource(api, DEVICE_CLASSES).get(CLASS_NAME)],
                "claims": [claim],
                "node": Resource(api, NODES).get(node),
            }
        )
    finally:
        publisher.stop()
    assert by_scheduler == ["gpu-1", "gpu-2"]
    assert answer["outcome"] == "allocated", answer
    (allocation,) = answer["allocations"]
    by_drakit = sorted(r["device"] for r in allocation["allocation"]["devices"]["results"])
    assert by_drakit == by_scheduler
