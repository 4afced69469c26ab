"""Node-allocatable mappings of a backend's devices reach the published slices (real apiserver).

Kubernetes 1.37 has them as ``nodeAllocatableResources`` behind the alpha gate
DRANodeAllocatableResources, and admits them only for a node that declares the feature
(``status.declaredFeatures``); this module runs its own control plane with the gate on.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from publisher_support import DRIVER, Pool, StaticBackend, make_node, node_slices, settle

from drakit.allocator.model import Device, DeviceCapacity, NodeAllocatableResourceMapping
from drakit.allocator.quantity import Quantity
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster
from drakit.localcluster.cluster import ClusterConfig
from drakit.localcluster.kubeversions import default_feature_gates, minor_of
from drakit.node_plugin.publisher import Publisher

pytestmark = pytest.mark.integration

CPU_KEY = f"{DRIVER}/cpu"


@pytest.fixture(scope="module")
def gated_api(kube_version: str) -> Iterator[Any]:
    if minor_of(kube_version) < 37:
        pytest.skip("nodeAllocatableResources is the 1.37 field")
    gates = ",".join(
        filter(None, (default_feature_gates(kube_version), "DRANodeAllocatableResources=true"))
    )
    with LocalCluster(ClusterConfig(kube_version=kube_version, feature_gates=gates)) as cluster:
        yield load_client(cluster.kubeconfig, qps=0)


def _cpu_device(name: str) -> Device:
    return Device(
        name=name,
        capacity={CPU_KEY: DeviceCapacity(value=Quantity(4))},
        allow_multiple_allocations=True,
        node_allocatable_resource_mappings={
            "cpu": NodeAllocatableResourceMapping(capacity_key=CPU_KEY),
            "memory": NodeAllocatableResourceMapping(allocation_multiplier=Quantity.parse("1Gi")),
        },
    )


def _publish(
    api: Any, node_name: str, devices: tuple[Device, ...]
) -> Iterator[tuple[Publisher, list[Any]]]:
    publisher = Publisher(
        api,
        DRIVER,
        node_name,
        StaticBackend([Pool(node_name, devices)]),
        detect_cluster=True,
    )
    publisher.start()
    try:
        slices = Resource(api, RESOURCE_SLICES)
        settle(publisher, slices, node_name)
        yield publisher, node_slices(slices, node_name)
    finally:
        publisher.stop()


def test_mappings_are_published_as_node_allocatable_resources_on_1_37(gated_api: Any) -> None:
    node_name = f"node-{uuid.uuid4().hex[:8]}"
    node = make_node(gated_api, node_name)
    node["status"]["declaredFeatures"] = ["DRANodeAllocatableResources"]
    Resource(gated_api, NODES).update_status(node)

    devices_in = (_cpu_device("cpu-0"), _cpu_device("cpu-1"))
    for publisher, items in _publish(gated_api, node_name, devices_in):
        devices = [d for s in items for d in s["spec"].get("devices") or ()]
        assert [d["name"] for d in devices] == ["cpu-0", "cpu-1"]
        for device in devices:
            assert device["nodeAllocatableResources"] == {
                "cpu": {"mapping": {"capacityKey": CPU_KEY, "capacityMultiplier": "1"}},
                "memory": {"mapping": {"deviceMultiplier": "1Gi"}},
            }
            assert "nodeAllocatableResourceMappings" not in device
        assert publisher.metrics.dropped_fields_total.get() == 0


def test_mappings_are_published_as_given_on_1_36() -> None:
    gates = ",".join(
        filter(None, (default_feature_gates("v1.36.3"), "DRANodeAllocatableResources=true"))
    )
    with LocalCluster(ClusterConfig(kube_version="v1.36.3", feature_gates=gates)) as cluster:
        api = load_client(cluster.kubeconfig, qps=0)
        node_name = f"node-{uuid.uuid4().hex[:8]}"
        make_node(api, node_name)
        for publisher, items in _publish(api, node_name, (_cpu_device("cpu-0"),)):
            (device,) = [d for s in items for d in s["spec"].get("devices") or ()]
            assert device["nodeAllocatableResourceMappings"] == {
                "cpu": {"capacityKey": CPU_KEY, "allocationMultiplier": "1"},
                "memory": {"allocationMultiplier": "1Gi"},
            }
            # The apiserver's default multiplier is written out: nothing reads as dropped.
            assert publisher.metrics.dropped_fields_total.get() == 0


def test_without_the_gate_the_devices_are_published_without_mappings(api: Any) -> None:
    # The session's control plane runs with DRANodeAllocatableResources off (its default).
    node_name = f"node-{uuid.uuid4().hex[:8]}"
    make_node(api, node_name)
    for publisher, items in _publish(api, node_name, (_cpu_device("cpu-0"),)):
        (device,) = [d for s in items for d in s["spec"].get("devices") or ()]
        assert device["name"] == "cpu-0"
        assert "nodeAllocatableResources" not in device
        assert device["capacity"] == {CPU_KEY: {"value": "4"}}
        # Left out, not sent and dropped by the apiserver (which the publisher would
        # count and report as a lost field).
        assert publisher.metrics.dropped_fields_total.get() == 0
