"""NodeResourcesFit: the pod's requests must fit into what the node has left.

"Left" is the node's ``status.allocatable`` minus the requests of the pods bound to it. The
pod count is checked for every pod (a pod requesting nothing still needs a pod slot); the
other resources only when the pod requests them. A scalar resource (an extended resource,
hugepages-*) the node does not list has nothing left. The reasons are kube-scheduler's
wording ("Insufficient cpu", "Too many pods").

An extended resource the node does not list but a DeviceClass names (``extendedResourceName``,
or ``deviceclass.resource.kubernetes.io/<class>``) would be served by DRA in kube-scheduler;
drakit does not implement that and says so instead of counting the node as too small.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.quantity import QuantityError, parse_quantity
from drakit.controller.podfit.requests import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    Requests,
    is_scalar_resource,
)

__all__ = [
    "REASON_TOO_MANY_PODS",
    "Allocatable",
    "Used",
    "allocatable_of",
    "dra_extended_reason",
    "insufficient_resources",
]

REASON_TOO_MANY_PODS = "Too many pods"


def dra_extended_reason(name: str) -> str:
    return (
        f"node(s) would serve extended resource {name} through DRA "
        "(DRA extended resources are not implemented by drakit's scheduler)"
    )


@dataclass(frozen=True)
class Allocatable:
    """A node's ``status.allocatable`` in kube-scheduler's units."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> Allocatable:
        """Parse a Node's allocatable; an unparsable quantity counts as zero (the apiserver
        validates them, so only a corrupt object has one)."""
        listed = (node.get("status") or {}).get("allocatable") or {}
        values: dict[str, int] = {}
        for name, text in listed.items():
            try:
                quantity = parse_quantity(text)
            except QuantityError:
                continue
            values[name] = quantity.milli_value() if name == CPU else quantity.as_int_ceil()
        return cls(
            milli_cpu=values.get(CPU, 0),
            memory=values.get(MEMORY, 0),
            ephemeral_storage=values.get(EPHEMERAL_STORAGE, 0),
            pods=values.get("pods", 0),
            scalar={k: v for k, v in values.items() if is_scalar_resource(k)},
        )


_PARSED: dict[tuple[str, str], Allocatable] = {}
_PARSED_LIMIT = 20_000


def allocatable_of(node: Mapping[str, Any]) -> Allocatable:
    """``Allocatable.of(node)``, remembered per node name and resourceVersion: parsing the
    quantities costs more than the whole fit check, and a node changes rarely."""
    metadata = node.get("metadata") or {}
    version = metadata.get("resourceVersion")
    if not version:
        return Allocatable.of(node)
    key = (str(metadata.get("name")), str(version))
    found = _PARSED.get(key)
    if found is None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()  # old versions of nodes: simply start over
        found = _PARSED[key] = Allocatable.of(node)
    return found


@dataclass(frozen=True)
class Used:
    """What the pods bound to a node take: their summed requests and their number."""

    requests: Requests = field(default_factory=Requests)
    pods: int = 0


def insufficient_resources(
    request: Requests,
    allocatable: Allocatable,
    used: Used,
    dra_extended: Collection[str] = (),
) -> list[str]:
    """Why ``request`` does not fit (empty when it fits). ``dra_extended`` names the
    extended resources a DeviceClass maps."""
    reasons: list[str] = []
    if used.pods + 1 > allocatable.pods:
        reasons.append(REASON_TOO_MANY_PODS)
    if request.is_zero:
        return reasons
    taken = used.requests
    if request.milli_cpu > 0 and request.milli_cpu > allocatable.milli_cpu - taken.milli_cpu:
        reasons.append("Insufficient cpu")
    if request.memory > 0 and request.memory > allocatable.memory - taken.memory:
        reasons.append("Insufficient memory")
    if request.ephemeral_storage > 0 and (
        request.ephemeral_storage > allocatable.ephemeral_storage - taken.ephemeral_storage
    ):
        reasons.append("Insufficient ephemeral-storage")
    for name in sorted(request.scalar):
        amount = request.scalar[name]
        have = allocatable.scalar.get(name, 0)
        if have <= 0 and name in dra_extended:
            reasons.append(dra_extended_reason(name))
        elif amount > have - taken.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons
