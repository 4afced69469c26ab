"""What the publisher writes on a cluster whose Kubernetes lacks an optional slice feature.

An apiserver whose feature gate is off silently drops the gate's ResourceSlice fields
(``drakit.kubeapi.clusterversion.SliceFields`` says which it keeps). Instead of writing them and
noticing the loss afterwards, the publisher decides per field, once, from the cluster it meets:

- counters (DRAPartitionableDevices): a device that consumes counters overlaps with others;
  without counters the scheduler could hand out both, so such devices are withheld; so
  are devices that name their own node (per-device node selection, same gate);
- binding conditions (DRADeviceBindingConditions): a device that must wait for its
  conditions would be used before it is ready, so it is withheld;
- device taints (DRADeviceTaints): a NoSchedule/NoExecute-tainted device (e.g. drakit's
  own unhealthy taint) would be scheduled as if healthy, so it is withheld; other taint
  effects are dropped;
- consumable capacity (DRAConsumableCapacity): ``allowMultipleAllocations`` and capacity
  request policies are left out; the device is then allocated exclusively, which is safe;
- node-allocatable mappings (DRANodeAllocatableResources, alpha): a backend states them in
  one shape (``Device.node_allocatable_resource_mappings``); they are written as the field
  the cluster has: 1.37's ``nodeAllocatableResources`` (``mapping.capacityKey`` with
  ``capacityMultiplier``, default 1, or ``mapping.deviceMultiplier``; also when the cluster
  is unknown, 1.37 being drakit's newest minor) or 1.36's ``nodeAllocatableResourceMappings``
  (``allocationMultiplier`` default 1 written out); with the gate off both are left out
  (the apiserver would drop them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from drakit.allocator._codec import EMPTY, FrozenDict, freeze
from drakit.allocator.model import Device, DeviceCapacity, NodeAllocatableResourceMapping
from drakit.allocator.quantity import Quantity
from drakit.kubeapi.clusterversion import (
    NODE_ALLOCATABLE_MAPPINGS,
    SliceFields,
)

__all__ = ["Trimmed", "as_node_allocatable_resources", "trim_pool"]


@dataclass
class Trimmed:
    """The devices to publish, and why others were withheld (device name -> reason)."""

    devices: tuple[Device, ...]
    withheld: dict[str, str] = field(default_factory=dict)
    #: False when the pool's shared counter sets must be left out.
    counters: bool = True


def _withhold_reason(device: Device, fields: SliceFields) -> str | None:
    if device.consumes_counters and not fields.counters:
        return "consumes shared counters, which this cluster does not support"
    per_device_node = device.node_name or device.node_selector or device.all_nodes is not None
    if per_device_node and not fields.counters:
        # perDeviceNodeSelection is part of DRAPartitionableDevices; without it the
        # apiserver drops the field and rejects the slice as naming no node.
        return "names its own node, which this cluster does not support"
    if (device.binding_conditions or device.binds_to_node) and not fields.binding_conditions:
        return "has binding conditions, which this cluster does not support"
    if not fields.taints and any(t.effect in ("NoSchedule", "NoExecute") for t in device.taints):
        return "is tainted, and this cluster does not support device taints"
    return None


def _without_unsupported(device: Device, fields: SliceFields) -> Device:
    changes: dict[str, object] = {}
    if fields.node_allocatable == NODE_ALLOCATABLE_MAPPINGS:
        device = _with_default_multiplier(device)
    else:
        device = as_node_allocatable_resources(device)
    if not fields.node_allocatable:
        if device.node_allocatable_resources is not None:
            changes["node_allocatable_resources"] = None
        if device.node_allocatable_resource_mappings:
            changes["node_allocatable_resource_mappings"] = EMPTY
    if not fields.taints and device.taints:
        changes["taints"] = ()
    if not fields.consumable_capacity:
        if device.allow_multiple_allocations is not None:
            changes["allow_multiple_allocations"] = None
        if any(c.request_policy is not None for c in device.capacity.values()):
            changes["capacity"] = {name: _plain_capacity(c) for name, c in device.capacity.items()}
    return replace(device, **changes) if changes else device  # type: ignore[arg-type]


def _plain_capacity(capacity: DeviceCapacity) -> DeviceCapacity:
    return replace(capacity, request_policy=None)


def _mapping_137(mapping: NodeAllocatableResourceMapping) -> dict[str, Any]:
    multiplier = str(mapping.allocation_multiplier or 1)
    if mapping.capacity_key:
        return {"capacityKey": mapping.capacity_key, "capacityMultiplier": multiplier}
    return {"deviceMultiplier": multiplier}


def _with_default_multiplier(device: Device) -> Device:
    """1.36 stores an absent ``allocationMultiplier`` as 1: written so, the stored slice
    matches what was sent (no field counted as dropped, no update loop)."""
    mappings = device.node_allocatable_resource_mappings
    if all(m.allocation_multiplier is not None for m in mappings.values()):
        return device
    one = Quantity(1)
    return replace(
        device,
        node_allocatable_resource_mappings=FrozenDict(
            {
                k: replace(m, allocation_multiplier=m.allocation_multiplier or one)
                for k, m in mappings.items()
            }
        ),
    )


def as_node_allocatable_resources(device: Device) -> Device:
    """``device`` with its typed mappings moved into 1.37's ``nodeAllocatableResources``
    (entries the backend wrote there itself keep their ``overhead``)."""
    if not device.node_allocatable_resource_mappings:
        return device
    raw = device.node_allocatable_resources
    merged: dict[str, Any] = {str(k): dict(v) for k, v in raw.items()} if raw else {}
    for name, mapping in device.node_allocatable_resource_mappings.items():
        merged[name] = merged.get(name, {}) | {"mapping": _mapping_137(mapping)}
    return replace(
        device, node_allocatable_resources=freeze(merged), node_allocatable_resource_mappings=EMPTY
    )


def trim_pool(devices: tuple[Device, ...], fields: SliceFields | None) -> Trimmed:
    """The devices of one pool as this cluster can hold them (None: every field kept, in
    the newest supported minor's shape)."""
    if fields is None:
        return Trimmed(tuple(as_node_allocatable_resources(d) for d in devices))
    kept: list[Device] = []
    withheld: dict[str, str] = {}
    for device in devices:
        reason = _withhold_reason(device, fields)
        if reason is None:
            kept.append(_without_unsupported(device, fields))
        else:
            withheld[device.name] = reason
    return Trimmed(tuple(kept), withheld, counters=fields.counters)
