"""Node-allocatable mappings written as the cluster's field (1.37, 1.36, gate off)."""

from __future__ import annotations

from drakit.allocator.model import Device, DeviceCapacity, NodeAllocatableResourceMapping
from drakit.allocator.quantity import Quantity
from drakit.kubeapi.clusterversion import (
    NODE_ALLOCATABLE_MAPPINGS,
    NODE_ALLOCATABLE_RESOURCES,
    ClusterInfo,
    SliceFields,
    slice_fields,
)
from drakit.node_plugin.publisher.versionfields import trim_pool


def _fields(node_allocatable: str) -> SliceFields:
    return SliceFields(
        counters=True,
        consumable_capacity=True,
        binding_conditions=True,
        taints=True,
        node_allocatable=node_allocatable,
    )


def _device() -> Device:
    return Device(
        name="cpu-0",
        capacity={"x.example.com/cpu": DeviceCapacity(value=Quantity(8))},
        node_allocatable_resource_mappings={
            "cpu": NodeAllocatableResourceMapping(
                capacity_key="x.example.com/cpu", allocation_multiplier=Quantity(2)
            ),
            "memory": NodeAllocatableResourceMapping(allocation_multiplier=Quantity.parse("2Gi")),
            "hugepages-2Mi": NodeAllocatableResourceMapping(),
        },
    )


def test_on_1_37_mappings_become_node_allocatable_resources() -> None:
    (device,) = trim_pool((_device(),), _fields(NODE_ALLOCATABLE_RESOURCES)).devices
    assert device.to_dict()["nodeAllocatableResources"] == {
        "cpu": {"mapping": {"capacityKey": "x.example.com/cpu", "capacityMultiplier": "2"}},
        "memory": {"mapping": {"deviceMultiplier": "2Gi"}},
        "hugepages-2Mi": {"mapping": {"deviceMultiplier": "1"}},
    }
    assert "nodeAllocatableResourceMappings" not in device.to_dict()


def test_an_unknown_cluster_gets_the_newest_shape() -> None:
    (device,) = trim_pool((_device(),), None).devices
    assert "cpu" in device.to_dict()["nodeAllocatableResources"]


def test_overhead_the_backend_wrote_itself_is_kept_beside_the_mapping() -> None:
    raw = Device.from_dict(
        {"name": "g", "nodeAllocatableResources": {"memory": {"overhead": {"perPod": "1Gi"}}}}
    )
    with_mapping = Device(
        name="g",
        node_allocatable_resources=raw.node_allocatable_resources,
        node_allocatable_resource_mappings={"memory": NodeAllocatableResourceMapping()},
    )
    (device,) = trim_pool((with_mapping,), _fields(NODE_ALLOCATABLE_RESOURCES)).devices
    assert device.to_dict()["nodeAllocatableResources"] == {
        "memory": {"overhead": {"perPod": "1Gi"}, "mapping": {"deviceMultiplier": "1"}}
    }


def test_on_1_36_mappings_are_written_with_the_apiservers_default_multiplier() -> None:
    (device,) = trim_pool((_device(),), _fields(NODE_ALLOCATABLE_MAPPINGS)).devices
    assert device.to_dict()["nodeAllocatableResourceMappings"] == {
        "cpu": {"capacityKey": "x.example.com/cpu", "allocationMultiplier": "2"},
        "memory": {"allocationMultiplier": "2Gi"},
        "hugepages-2Mi": {"allocationMultiplier": "1"},
    }


def test_with_the_gate_off_both_fields_are_left_out_and_the_device_kept() -> None:
    trimmed = trim_pool((_device(),), _fields(""))
    (device,) = trimmed.devices
    assert not trimmed.withheld
    out = device.to_dict()
    assert "nodeAllocatableResources" not in out
    assert "nodeAllocatableResourceMappings" not in out
    assert out["capacity"] == {"x.example.com/cpu": {"value": "8"}}


def test_the_field_follows_the_clusters_minor_and_gate() -> None:
    on = {"DRANodeAllocatableResources": True}
    assert slice_fields(ClusterInfo("v1.37.2", 37, gates=on)).node_allocatable == (
        NODE_ALLOCATABLE_RESOURCES
    )
    assert slice_fields(ClusterInfo("v1.36.3", 36, gates=on)).node_allocatable == (
        NODE_ALLOCATABLE_MAPPINGS
    )
    off = {"DRANodeAllocatableResources": False}
    assert slice_fields(ClusterInfo("v1.37.2", 37, gates=off)).node_allocatable == ""
    assert slice_fields(ClusterInfo("v1.35.4", 35)).node_allocatable == ""


def test_mappings_are_sent_when_the_gates_cannot_be_read() -> None:
    """A plugin refused /metrics (gates None) still publishes them in the minor's field: the
    apiserver keeps them when its gate is on and drops them when it is off."""
    assert slice_fields(ClusterInfo("v1.37.2", 37)).node_allocatable == NODE_ALLOCATABLE_RESOURCES
    assert slice_fields(ClusterInfo("v1.36.3", 36)).node_allocatable == NODE_ALLOCATABLE_MAPPINGS
    assert slice_fields(ClusterInfo("v1.35.4", 35)).node_allocatable == ""
