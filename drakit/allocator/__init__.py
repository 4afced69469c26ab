"""Structured-parameters allocator for resource.k8s.io/v1: pure, no I/O, no Kubernetes client.

Public surface (import from here; submodules hold the details):

* model (:mod:`drakit.allocator.model`): immutable v1 types with ``from_dict``/``to_dict``
  (``ResourceSlice``, ``Device``, ``DeviceAttribute``, ``DeviceCapacity``, ``CounterSet``,
  ``Counter``, ``DeviceTaint``, ``ResourcePool``, ``DeviceClass``, ``ResourceClaim``,
  ``AllocationResult``, ``DeviceRequestAllocationResult``, ``DeviceID``, ``Node``).
* quantities (:mod:`drakit.allocator.quantity`): exact ``Quantity``.
* validation (:mod:`drakit.allocator.validation`): the API's limits; ``ValidationError``.
* conversion (:mod:`drakit.allocator.convert`): v1beta1/v1beta2 dicts to v1 dicts.
* allocation (:mod:`drakit.allocator.allocate`): ``Inventory`` (slices, prepared once),
  ``Allocator(inventory, classes, allocated_state).allocate(node, claims)``.
* allocated state (:mod:`drakit.allocator.allocated`): ``AllocatedState`` with ``add``,
  ``remove`` and ``conflicts`` (the node plugin's double-use guard).
* explanations (:mod:`drakit.allocator.explain`) and the oracle contract
  (:mod:`drakit.allocator.scenario`).
"""

import importlib
from typing import TYPE_CHECKING, Any

from drakit.allocator.allocated import AllocatedState, Conflict
from drakit.allocator.convert import to_v1
from drakit.allocator.features import Features
from drakit.allocator.model import (
    AllocationResult,
    AttributeValue,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    DeviceCounterConsumption,
    DeviceID,
    DeviceRequestAllocationResult,
    DeviceTaint,
    ModelError,
    Node,
    NodeSelector,
    ObjectMeta,
    ResourceClaim,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
    with_api_defaults,
)
from drakit.allocator.quantity import Quantity, QuantityError, parse_quantity
from drakit.allocator.validation import (
    FieldError,
    ValidationError,
    check_device_class,
    check_resource_claim,
    check_resource_slice,
    validate_device,
    validate_device_class,
    validate_resource_claim,
    validate_resource_slice,
)

__all__ = [
    "AllocatedState",
    "AllocationCancelledError",
    "AllocationError",
    "AllocationResult",
    "AllocationTimeoutError",
    "Allocator",
    "AttributeValue",
    "CapacityRequestPolicy",
    "CapacityRequestPolicyRange",
    "Conflict",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceCounterConsumption",
    "DeviceID",
    "DeviceRequestAllocationResult",
    "DeviceTaint",
    "Features",
    "FieldError",
    "Inventory",
    "ModelError",
    "Node",
    "NodeSelector",
    "NodeUnsuitableError",
    "ObjectMeta",
    "Quantity",
    "QuantityError",
    "ResourceClaim",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "ValidationError",
    "check_device_class",
    "check_resource_claim",
    "check_resource_slice",
    "parse_quantity",
    "to_v1",
    "validate_device",
    "validate_device_class",
    "validate_resource_claim",
    "validate_resource_slice",
    "with_api_defaults",
]

if TYPE_CHECKING:
    from drakit.allocator.allocate import (
        AllocationCancelledError,
        AllocationError,
        AllocationTimeoutError,
        Allocator,
        NodeUnsuitableError,
    )
    from drakit.allocator.inventory import Inventory

# Allocation loads the CEL engine (tens of MiB); the node plugin only needs the model,
# validation and allocated state, so these names are imported on first use.
_LAZY = {
    "AllocationCancelledError": "drakit.allocator.allocate",
    "AllocationError": "drakit.allocator.allocate",
    "AllocationTimeoutError": "drakit.allocator.allocate",
    "Allocator": "drakit.allocator.allocate",
    "NodeUnsuitableError": "drakit.allocator.allocate",
    "Inventory": "drakit.allocator.inventory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'allocator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
