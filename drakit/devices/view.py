"""From a snapshot and the user's filters to the rows and pool summaries to print.

Filters narrow what is shown, never how it is counted: a device held by a claim in another
namespace is still allocated. ``--class`` keeps the devices the class's CEL selectors match,
evaluated by the allocator's own CEL engine (the same code that allocates), so the view and
an allocation agree on what a class contains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from drakit.allocator.cel import CELError, compile_selector, device_context
from drakit.allocator.model import Device, DeviceClass, ResourceSlice
from drakit.allocator.usage import UsageView, build_usage
from drakit.devices.source import Snapshot

__all__ = ["FilterError", "Filters", "Rendered", "device_view"]


class FilterError(ValueError):
    """A filter cannot be applied (for example: the DeviceClass does not exist)."""


@dataclass(frozen=True)
class Filters:
    node: str | None = None
    driver: str | None = None
    device_class: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Rendered:
    """The filtered view and the notes to print with it (hidden claims, skipped objects)."""

    view: UsageView
    notes: tuple[str, ...]


def device_view(snapshot: Snapshot, filters: Filters) -> Rendered:
    """Apply ``filters`` to ``snapshot``; raises FilterError for an unknown class."""
    notes = list(snapshot.problems)
    slices = snapshot.slices
    if filters.driver:
        slices = [s for s in slices if s.driver == filters.driver]
    if filters.device_class:
        device_class = snapshot.classes.get(filters.device_class)
        if device_class is None:
            raise FilterError(f"DeviceClass {filters.device_class!r} not found")
        slices = [_only_matching(s, device_class, notes) for s in slices]
    view = build_usage(slices, snapshot.claims, all_claims_visible=snapshot.scope.complete)
    devices = view.devices
    pools = view.pools
    if filters.node:
        devices = tuple(u for u in devices if u.node == filters.node)
        pools = tuple(p for p in pools if p.node == filters.node)
    if filters.namespace:
        devices = tuple(
            u for u in devices if any(h.namespace == filters.namespace for h in u.holders)
        )
    if snapshot.scope.hidden:
        notes.append(snapshot.scope.hidden)
    return Rendered(UsageView(devices, pools), tuple(notes))


def _only_matching(s: ResourceSlice, device_class: DeviceClass, notes: list[str]) -> ResourceSlice:
    kept = tuple(d for d in s.devices if _class_matches(device_class, s, d, notes))
    return replace(s, spec=replace(s.spec, devices=kept))


def _class_matches(
    device_class: DeviceClass, s: ResourceSlice, d: Device, notes: list[str]
) -> bool:
    context = device_context(s.driver, d.attributes, d.capacity, d.multi_allocatable)
    for i, selector in enumerate(device_class.spec.selectors):
        if selector.cel is None:
            continue
        try:
            if not compile_selector(selector.cel.expression).matches(context):
                return False
        except CELError as err:
            # The allocator treats this as an error for the whole allocation; here the
            # device is left out and the reason shown, so the rest of the view stays useful.
            notes.append(
                f"DeviceClass {device_class.name}: spec.selectors[{i}] on device "
                f"{s.driver}/{s.pool.name}/{d.name}: {err}"
            )
            return False
    return True
