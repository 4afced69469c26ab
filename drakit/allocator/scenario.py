"""Scenario entry point shared with the Go oracle (``hack/oracle``, see its README).

:func:`run_scenario` takes the oracle's JSON input (slices, classes, claims to allocate in
order, already allocated claims, the node, feature switches) and returns the oracle's output
shape::

    {"outcome": "allocated", "allocations": [{"claim": "ns/name", "allocation": {...}}]}
    {"outcome": "unschedulable"}                       # does not fit this node
    {"outcome": "unschedulable", "error": "invalid resource pools were encountered"}
    {"outcome": "error", "error": "..."}               # fatal, or "invalid scenario: ..."

Claims get the API server's defaults before allocation (as the oracle does); other
top-level keys (a case name, an expected outcome) are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from drakit.allocator.allocate import (
    AllocationCancelledError,
    AllocationError,
    Allocator,
    NodeUnsuitableError,
)
from drakit.allocator.allocated import AllocatedState
from drakit.allocator.features import Features
from drakit.allocator.inventory import Inventory
from drakit.allocator.model import (
    DeviceClass,
    ModelError,
    Node,
    ObjectMeta,
    ResourceClaim,
    ResourceSlice,
)
from drakit.allocator.model import with_api_defaults as _defaults

__all__ = ["ScenarioError", "parse_scenario", "run_scenario"]


class ScenarioError(ValueError):
    """The scenario itself is malformed."""


def _objects(scenario: Mapping[str, Any], key: str, cls: Any) -> list[Any]:
    items = scenario.get(key) or []
    if not isinstance(items, list):
        raise ScenarioError(f"{key}: must be a list")
    out = []
    for i, item in enumerate(items):
        try:
            obj = cls.from_dict(item)
        except ModelError as exc:
            raise ScenarioError(f"{key}[{i}]: {exc}") from None
        unknown = _unknown_field(obj, "")
        if unknown:
            # the oracle decodes strictly, as the API server does
            raise ScenarioError(f"{key}[{i}]: unknown field {unknown!r}")
        out.append(obj)
    return out


def _unknown_field(obj: Any, path: str) -> str | None:
    """The path of the first field the v1 model does not know (metadata is free-form)."""
    if isinstance(obj, ObjectMeta) or not dataclasses.is_dataclass(obj):
        return None
    extra = getattr(obj, "extra", None)
    if extra:
        return f"{path}.{next(iter(extra))}".lstrip(".")
    for f in dataclasses.fields(obj):
        if f.name == "extra":
            continue
        value = getattr(obj, f.name)
        key = f.metadata.get("json", f.name)
        items = (
            value.items()
            if isinstance(value, Mapping)
            else (enumerate(value) if isinstance(value, tuple) else [(None, value)])
        )
        for k, v in items:
            sub = f"{path}.{key}" if k is None else f"{path}.{key}[{k}]"
            found = _unknown_field(v, sub)
            if found:
                return found
    return None


def parse_scenario(
    scenario: Mapping[str, Any],
) -> tuple[
    list[ResourceSlice], list[DeviceClass], list[ResourceClaim], list[ResourceClaim], Node, Features
]:
    """Decode a scenario dict; raises ScenarioError naming the bad part."""
    if not isinstance(scenario, Mapping):
        raise ScenarioError("the scenario must be a JSON object")
    slices = _objects(scenario, "slices", ResourceSlice)
    classes = _objects(scenario, "classes", DeviceClass)
    claims = [_defaults(c) for c in _objects(scenario, "claims", ResourceClaim)]
    allocated = _objects(scenario, "allocated", ResourceClaim)
    for i, c in enumerate(allocated):
        if c.status.allocation is None:
            raise ScenarioError(f"allocated[{i}]: status.allocation is required")
    if "node" not in scenario or not isinstance(scenario["node"], Mapping):
        raise ScenarioError("node: required")
    try:
        node = Node.from_dict(scenario["node"])
    except ModelError as exc:
        raise ScenarioError(f"node: {exc}") from None
    if not node.name:
        raise ScenarioError("node.metadata.name: required")
    try:
        features = Features.from_dict(scenario.get("features") or {})
    except ValueError as exc:
        raise ScenarioError(f"features: {exc}") from None
    return slices, classes, claims, allocated, node, features


def run_scenario(
    scenario: Mapping[str, Any],
    *,
    timeout: float | None = 10.0,
    share_id: Callable[[], str] | None = None,
) -> dict[str, Any]:
    """Run one scenario; never raises for bad input (outcome ``error`` instead)."""
    try:
        slices, classes, claims, allocated, node, features = parse_scenario(scenario)
    except ScenarioError as exc:
        return {"outcome": "error", "error": f"invalid scenario: {exc}"}
    state = AllocatedState(allocated, consumable_capacity=features.consumable_capacity)
    allocator = Allocator(Inventory(slices, features), classes, state, share_id=share_id)
    try:
        results = allocator.allocate(node, claims, timeout=timeout)
    except NodeUnsuitableError as exc:
        return {"outcome": "unschedulable", "error": str(exc)}
    except AllocationCancelledError:
        return {"outcome": "unschedulable"}
    except AllocationError as exc:
        return {"outcome": "error", "error": str(exc)}
    if results is None:
        return {"outcome": "unschedulable"}
    return {
        "outcome": "allocated",
        "allocations": [
            {"claim": c.key, "allocation": r.to_dict()}
            for c, r in zip(claims, results, strict=True)
        ],
    }
