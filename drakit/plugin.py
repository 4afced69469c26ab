"""The public API for driver authors: everything a device backend needs, from one module.

A backend is a class with ``name``, ``config_model``, ``discover``,
``prepare(claim, context)`` and ``unprepare(claim, state, context)`` (:class:`Backend`; the
context is a :class:`RequestContext`, the claim of ``unprepare`` a :class:`ClaimRef`); start
from :class:`BackendBase`. Add ``health`` to report
device health (:class:`HealthReporter`), ``metrics`` and ``claim_finished`` to serve metrics
of its own on the plugin's endpoint (:class:`MetricsReporter`, with :class:`Registry`,
:class:`Counter`, :class:`Gauge` and :class:`Histogram`). Run it with
``drakit node-plugin --backend mypkg.mod:MyBackend``; docs/writing-a-driver.md has a
complete driver in one file.

Everything not listed in ``__all__`` is internal and may change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drakit.allocator.model import (
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    NodeAllocatableResourceMapping,
)
from drakit.allocator.quantity import Quantity
from drakit.controller.bindingcheck import (
    BindingCheck,
    BindingClaim,
    BindingDevice,
    BindingVerdict,
    ConditionResult,
)
from drakit.node_plugin.backends import base
from drakit.node_plugin.backends.registry import validate_settings
from drakit.node_plugin.backends.standard_attributes import (
    SYSFS_ROOT,
    pci_attributes,
    pci_bus_id_of_device_node,
)
from drakit.node_plugin.driver import ClaimRef, DeviceHealth, HealthStatus
from drakit.telemetry.metrics import Counter, Gauge, Histogram, Registry

# The backend interface, by name (node_plugin.backends.base is internal: it may move).
Backend = base.Backend
BackendBase = base.BackendBase
BackendConfigError = base.BackendConfigError
BackendContext = base.BackendContext
BackendError = base.BackendError
BackendPrepared = base.BackendPrepared
ClaimToPrepare = base.ClaimToPrepare
ContainerEdits = base.ContainerEdits
DeviceMetadata = base.DeviceMetadata
DeviceNodeEdit = base.DeviceNodeEdit
DeviceStatus = base.DeviceStatus
DeviceToPrepare = base.DeviceToPrepare
HealthReporter = base.HealthReporter
LazyConfigModel = base.LazyConfigModel
MetricsReporter = base.MetricsReporter
MountEdit = base.MountEdit
NetworkData = base.NetworkData
PoolDescription = base.PoolDescription
RequestContext = base.RequestContext


def pci_device_attributes(
    pci_bus_id: str, *, sysfs_root: str = SYSFS_ROOT
) -> dict[str, DeviceAttribute]:
    """Kubernetes' standard attributes of a PCI device, from sysfs, for ``Device.attributes``.

    ``resource.kubernetes.io/pciBusID`` always, ``…/pcieRoot`` and ``…/numaNode`` when
    sysfs has them (a ``numa_node`` of -1 gives none), in upstream's formats. ValueError
    for a bus ID not in extended BDF form (``0000:3b:00.0``). Find the bus ID of a device
    node with :func:`pci_bus_id_of_device_node`.
    """
    return pci_attributes(pci_bus_id, sysfs_root)


if TYPE_CHECKING:
    from drakit.node_plugin.backends.models import EmptyConfig
else:

    def __getattr__(name: str) -> Any:
        """``EmptyConfig`` (a pydantic model) is imported on first use."""
        if name == "EmptyConfig":
            return base.EmptyConfig
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Backend",
    "BackendBase",
    "BackendConfigError",
    "BackendContext",
    "BackendError",
    "BackendPrepared",
    "BindingCheck",
    "BindingClaim",
    "BindingDevice",
    "BindingVerdict",
    "ClaimRef",
    "ClaimToPrepare",
    "ConditionResult",
    "ContainerEdits",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceHealth",
    "DeviceMetadata",
    "DeviceNodeEdit",
    "DeviceStatus",
    "DeviceToPrepare",
    "EmptyConfig",
    "Gauge",
    "HealthReporter",
    "HealthStatus",
    "Histogram",
    "LazyConfigModel",
    "MetricsReporter",
    "MountEdit",
    "NetworkData",
    "NodeAllocatableResourceMapping",
    "PoolDescription",
    "Quantity",
    "Registry",
    "RequestContext",
    "pci_bus_id_of_device_node",
    "pci_device_attributes",
    "validate_settings",
]
