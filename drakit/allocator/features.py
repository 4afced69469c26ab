"""Feature switches of the allocator (the DRA feature gates that change allocation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Features"]


@dataclass(frozen=True, slots=True)
class Features:
    """Which DRA features are on. Defaults match Kubernetes 1.37 with the allocator's
    "experimental" channel: every beta/GA allocation feature plus list-type attributes on,
    the remaining alpha features off."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_binding_conditions: bool = True
    consumable_capacity: bool = True
    list_type_attributes: bool = True
    compatibility_groups: bool = False
    derived_attributes: bool = False
    fractional_capacity_range: bool = False
    optional_node_operations: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Features:
        """From camelCase keys (``adminAccess``, ...); unknown keys raise ValueError."""
        names = {_camel(f.name): f.name for f in fields(cls)}
        kwargs: dict[str, bool] = {}
        for key, value in data.items():
            if key not in names:
                raise ValueError(f"unknown feature {key!r} (known: {', '.join(sorted(names))})")
            if not isinstance(value, bool):
                raise ValueError(f"feature {key!r} must be true or false")
            kwargs[names[key]] = value
        return cls(**kwargs)

    def to_dict(self) -> dict[str, bool]:
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
