"""The types a backend describes its devices with, in the shape of a ResourceSlice.

They are the allocator's own model types (what drakit's scheduler-side code reads back),
re-exported here: a backend builds them, the publisher writes them as ResourceSlices. The
definitions live in :mod:`drakit.allocator.model` (pure: no I/O, no drakit import), which
``drakit.plugin`` may import; the public names are those of :mod:`drakit.plugin`.
"""

from __future__ import annotations

from drakit.allocator.model import (
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceCounterConsumption,
    NodeAllocatableResourceMapping,
)
from drakit.allocator.quantity import Quantity

__all__ = [
    "Counter",
    "CounterSet",
    "Device",
    "DeviceAttribute",
    "DeviceCapacity",
    "DeviceCounterConsumption",
    "NodeAllocatableResourceMapping",
    "Quantity",
]
