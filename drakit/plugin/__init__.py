"""The public API for driver authors: everything a device backend needs, from one package.

A backend is a class with ``name``, ``config_model``, ``discover``,
``prepare(claim, context)`` and ``unprepare(claim, state, context)`` (:class:`Backend`; the
context is a :class:`RequestContext`, the claim of ``unprepare`` a :class:`ClaimRef`); start
from :class:`BackendBase`. Add ``health`` to report device health (:class:`HealthReporter`).
A backend logs with :func:`get_logger` (or a call's ``context.log``), fields as keywords.
Run it with ``drakit node-plugin --backend mypkg.mod:MyBackend``, or from your own program
with :class:`KubeletPlugin`; docs/writing-a-driver.md has a complete driver in one file.

The names are defined in this package's modules, one per concept (``backend``, ``claims``,
``context``, ``edits``, ``prepared``, ``health``, ``devices``, ``pci``, ``settings``,
``plainconfig``, ``metrics``, ``binding``, ``options``, ``running``, ``logs``), and the node
plugin and the controller are built on them: this package imports nothing of either (the
model types of ``devices`` are the allocator's, which is pure). Import them from
``drakit.plugin``: the module a name is defined in may change. A name's module is imported
when the name is first read, so a program loads only the parts of the API it uses.
``plainconfig`` and ``metrics`` are public as modules (``from drakit.plugin import
plainconfig as plain``; a backend's own metrics: :class:`MetricsReporter` and the metric
types of ``drakit.plugin.metrics``).
Everything not listed in ``__all__`` is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drakit.plugin import metrics, plainconfig
    from drakit.plugin.backend import (
        Backend,
        BackendBase,
        ChangeListeners,
        LazyConfigModel,
        PoolDescription,
    )
    from drakit.plugin.binding import (
        BindingCheck,
        BindingClaim,
        BindingDevice,
        BindingVerdict,
        ConditionResult,
    )
    from drakit.plugin.claims import ClaimRef, ClaimToPrepare, DeviceToPrepare
    from drakit.plugin.context import BackendContext, RequestContext
    from drakit.plugin.devices import (
        Counter,
        CounterSet,
        Device,
        DeviceAttribute,
        DeviceCapacity,
        DeviceCounterConsumption,
        NodeAllocatableResourceMapping,
        Quantity,
    )
    from drakit.plugin.edits import ContainerEdits, DeviceNodeEdit, MountEdit
    from drakit.plugin.errors import (
        BackendConfigError,
        BackendError,
        BackgroundError,
        ErrorHandler,
        PluginStartError,
        log_background_error,
    )
    from drakit.plugin.health import DeviceHealth, HealthReporter, HealthStatus
    from drakit.plugin.logs import StructuredLogger, get_logger
    from drakit.plugin.metrics import MetricsReporter
    from drakit.plugin.models import EmptyConfig
    from drakit.plugin.options import PluginOptions, PluginOptionsError
    from drakit.plugin.pci import (
        NUMA_NODE_ATTRIBUTE,
        PCI_BUS_ID_ATTRIBUTE,
        PCIE_ROOT_ATTRIBUTE,
        pci_bus_id_of_device_node,
        pci_device_attributes,
    )
    from drakit.plugin.prepared import BackendPrepared, DeviceMetadata, DeviceStatus, NetworkData
    from drakit.plugin.running import KubeletPlugin, RegistrationStatus
    from drakit.plugin.settings import validate_settings

#: Where each public name is defined: the module is imported when the name is first read, so
#: a program (the node plugin among them) loads only the parts of the API it uses: the
#: binding check, the PCI attributes or the embedding options cost nothing until used, and
#: ``EmptyConfig`` (a pydantic model) loads pydantic only then.
_DEFINED_IN: dict[str, str] = {
    "Backend": "backend",
    "BackendBase": "backend",
    "BackendConfigError": "errors",
    "BackendContext": "context",
    "BackendError": "errors",
    "BackendPrepared": "prepared",
    "BackgroundError": "errors",
    "BindingCheck": "binding",
    "BindingClaim": "binding",
    "BindingDevice": "binding",
    "BindingVerdict": "binding",
    "ChangeListeners": "backend",
    "ClaimRef": "claims",
    "ClaimToPrepare": "claims",
    "ConditionResult": "binding",
    "ContainerEdits": "edits",
    "Counter": "devices",
    "CounterSet": "devices",
    "Device": "devices",
    "DeviceAttribute": "devices",
    "DeviceCapacity": "devices",
    "DeviceCounterConsumption": "devices",
    "DeviceHealth": "health",
    "DeviceMetadata": "prepared",
    "DeviceNodeEdit": "edits",
    "DeviceStatus": "prepared",
    "DeviceToPrepare": "claims",
    "EmptyConfig": "models",
    "ErrorHandler": "errors",
    "HealthReporter": "health",
    "HealthStatus": "health",
    "KubeletPlugin": "running",
    "LazyConfigModel": "backend",
    "MetricsReporter": "metrics",
    "MountEdit": "edits",
    "NUMA_NODE_ATTRIBUTE": "pci",
    "NetworkData": "prepared",
    "NodeAllocatableResourceMapping": "devices",
    "PCIE_ROOT_ATTRIBUTE": "pci",
    "PCI_BUS_ID_ATTRIBUTE": "pci",
    "PluginOptions": "options",
    "PluginOptionsError": "options",
    "PluginStartError": "errors",
    "PoolDescription": "backend",
    "Quantity": "devices",
    "RegistrationStatus": "running",
    "RequestContext": "context",
    "StructuredLogger": "logs",
    "get_logger": "logs",
    "log_background_error": "errors",
    "pci_bus_id_of_device_node": "pci",
    "pci_device_attributes": "pci",
    "metrics": "metrics",
    "plainconfig": "plainconfig",
    "validate_settings": "settings",
}


# Defined for the interpreter only: a type checker sees the imports above, and a module
# ``__getattr__`` would make it accept any name (a typo in a driver would type-check).
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A public name, imported from the module that defines it on first use."""
        module = _DEFINED_IN.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        defining = importlib.import_module(f"{__name__}.{module}")
        value = defining if name == module else getattr(defining, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "NUMA_NODE_ATTRIBUTE",
    "PCIE_ROOT_ATTRIBUTE",
    "PCI_BUS_ID_ATTRIBUTE",
    "Backend",
    "BackendBase",
    "BackendConfigError",
    "BackendContext",
    "BackendError",
    "BackendPrepared",
    "BackgroundError",
    "BindingCheck",
    "BindingClaim",
    "BindingDevice",
    "BindingVerdict",
    "ChangeListeners",
    "ClaimRef",
    "ClaimToPrepare",
    "ConditionResult",
    "ContainerEdits",
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceCounterConsumption",
    "DeviceHealth",
    "DeviceMetadata",
    "DeviceNodeEdit",
    "DeviceStatus",
    "DeviceToPrepare",
    "EmptyConfig",
    "ErrorHandler",
    "HealthReporter",
    "HealthStatus",
    "KubeletPlugin",
    "LazyConfigModel",
    "MetricsReporter",
    "MountEdit",
    "NetworkData",
    "NodeAllocatableResourceMapping",
    "PluginOptions",
    "PluginOptionsError",
    "PluginStartError",
    "PoolDescription",
    "Quantity",
    "RegistrationStatus",
    "RequestContext",
    "StructuredLogger",
    "get_logger",
    "log_background_error",
    "metrics",
    "pci_bus_id_of_device_node",
    "pci_device_attributes",
    "plainconfig",
    "validate_settings",
]
