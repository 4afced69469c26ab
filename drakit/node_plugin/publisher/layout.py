"""Splitting one pool's devices and counter sets into slices (pure, no I/O).

The API caps a slice at 128 devices, or 64 when any device in it has taints, consumes
counters or has list-type attributes, and at 8 counter sets. A slice carries devices or
counter sets, never both. The Go resourceslice controller leaves splitting to the driver;
drakit does it here.

The layout is *sticky*: given what is published now, every device stays in the slice it is
in, removed devices leave a gap, and new or overflowing devices go into the first slice with
room (else a new slice at the end). A change to one device therefore touches one slice, not
every slice after it. Stickiness is given up (for a fresh, packed layout) only when it would
waste slices: when it needs more than one slice more than the fresh layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drakit.allocator.model import CounterSet, Device
from drakit.allocator.validation import (
    MAX_COUNTER_SETS,
    MAX_DEVICES,
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
)
from drakit.node_plugin.publisher.counters import counter_problems

__all__ = [
    "InvalidPoolError",
    "SliceContent",
    "check_pool",
    "fresh_layout",
    "plan_layout",
]


@dataclass(frozen=True, slots=True)
class SliceContent:
    """What one slice carries: devices or counter sets (at most one kind is non-empty)."""

    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()

    @property
    def holds_counters(self) -> bool:
        return bool(self.shared_counters)


class InvalidPoolError(ValueError):
    """The backend described a pool the API (or the allocator) cannot accept."""

    def __init__(self, pool: str, reasons: Sequence[str]) -> None:
        self.pool = pool
        self.reasons = tuple(reasons)
        super().__init__(f"pool {pool!r}: " + "; ".join(self.reasons))


def device_limit(devices: Iterable[Device]) -> int:
    """The most devices a slice holding ``devices`` may carry."""
    return _limit(any(d.uses_advanced_features() for d in devices))


def _limit(advanced: bool) -> int:
    return MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced else MAX_DEVICES


def check_pool(pool: str, devices: Sequence[Device], counter_sets: Sequence[CounterSet]) -> None:
    """Pool-wide rules the apiserver cannot check per slice (the Go controller's
    ``validatePool``): unique device and counter-set names, and every consumed counter
    exists; and the counters as the backend built them (:mod:`.counters`). Raises
    InvalidPoolError listing every problem."""
    reasons: list[str] = []
    seen: set[str] = set()
    for d in devices:
        if d.name in seen:
            reasons.append(f"duplicate device {d.name!r}")
        seen.add(d.name)
    reasons.extend(counter_problems(devices, counter_sets))
    if reasons:
        raise InvalidPoolError(pool, reasons)


def fresh_layout(
    devices: Sequence[Device], counter_sets: Sequence[CounterSet]
) -> tuple[SliceContent, ...]:
    """The packed layout: counter-set slices first, then devices in order, each slice filled
    up to its limit. A pool without devices or counters gets one empty slice (the pool then
    still shows that the driver is alive)."""
    slices = [
        SliceContent(shared_counters=tuple(counter_sets[i : i + MAX_COUNTER_SETS]))
        for i in range(0, len(counter_sets), MAX_COUNTER_SETS)
    ]
    current: list[Device] = []
    advanced = False  # whether ``current`` holds a device with advanced features
    for device in devices:
        device_advanced = device.uses_advanced_features()
        if len(current) >= _limit(advanced or device_advanced):
            slices.append(SliceContent(devices=tuple(current)))
            current, advanced = [], False
        current.append(device)
        advanced = advanced or device_advanced
    if current or not slices:
        slices.append(SliceContent(devices=tuple(current)))
    return tuple(slices)


def plan_layout(
    devices: Sequence[Device],
    counter_sets: Sequence[CounterSet],
    published: Sequence[SliceContent | None],
) -> tuple[SliceContent, ...]:
    """The layout to publish, staying as close to ``published`` as the limits allow.

    ``published[i]`` is what slice ``i`` carries now (None: no usable slice at that index).
    Devices and counter sets are identified by name; their content comes from ``devices`` /
    ``counter_sets``. Deterministic: the same inputs give the same layout.
    """
    fresh = fresh_layout(devices, counter_sets)
    if not any(published):
        return fresh
    sticky = _sticky_layout(devices, counter_sets, published)
    return sticky if len(sticky) <= len(fresh) + 1 else fresh


def _sticky_layout(
    devices: Sequence[Device],
    counter_sets: Sequence[CounterSet],
    published: Sequence[SliceContent | None],
) -> tuple[SliceContent, ...]:
    by_device = {d.name: d for d in devices}
    by_set = {cs.name: cs for cs in counter_sets}
    device_slots: list[list[Device] | None] = []
    set_slots: list[list[CounterSet] | None] = []
    placed: set[str] = set()
    placed_sets: set[str] = set()
    for content in published:
        kept_devices: list[Device] = []
        kept_sets: list[CounterSet] = []
        if content is not None:
            for d in content.devices:
                if d.name in by_device and d.name not in placed:
                    kept_devices.append(by_device[d.name])
                    placed.add(d.name)
            for cs in content.shared_counters:
                if cs.name in by_set and cs.name not in placed_sets:
                    kept_sets.append(by_set[cs.name])
                    placed_sets.add(cs.name)
        if content is not None and content.holds_counters:
            device_slots.append(None)
            set_slots.append(kept_sets[:MAX_COUNTER_SETS])
            placed_sets.difference_update(cs.name for cs in kept_sets[MAX_COUNTER_SETS:])
        else:
            # Tainting a device can lower this slice's limit: the overflow moves elsewhere.
            limit = device_limit(kept_devices)
            placed.difference_update(d.name for d in kept_devices[limit:])
            device_slots.append(kept_devices[:limit])
            set_slots.append(None)
    for cs in counter_sets:
        if cs.name not in placed_sets:
            _place_counter_set(cs, set_slots, device_slots)
    advanced = [slot is not None and device_limit(slot) < MAX_DEVICES for slot in device_slots]
    first_open = 0  # slots before it are full for any device
    for d in devices:
        if d.name in placed:
            continue
        d_advanced = d.uses_advanced_features()
        for i in range(first_open, len(device_slots)):
            slot = device_slots[i]
            if slot is None:
                first_open += i == first_open
                continue
            if len(slot) < _limit(advanced[i] or d_advanced):
                slot.append(d)
                advanced[i] = advanced[i] or d_advanced
                break
            if (
                i == first_open
                and len(slot) >= MAX_DEVICES_WITH_ADVANCED_FEATURES
                and (advanced[i] or len(slot) >= MAX_DEVICES)
            ):
                first_open += 1
        else:
            device_slots.append([d])
            set_slots.append(None)
            advanced.append(d_advanced)
    return _trim(device_slots, set_slots)


def _place_counter_set(
    cs: CounterSet,
    set_slots: list[list[CounterSet] | None],
    device_slots: list[list[Device] | None],
) -> None:
    for slot in set_slots:
        if slot is not None and len(slot) < MAX_COUNTER_SETS:
            slot.append(cs)
            return
    # An empty device slot can turn into a counter-set slot.
    for i, dslot in enumerate(device_slots):
        if dslot is not None and not dslot:
            device_slots[i] = None
            set_slots[i] = [cs]
            return
    set_slots.append([cs])
    device_slots.append(None)


def _trim(
    device_slots: list[list[Device] | None], set_slots: list[list[CounterSet] | None]
) -> tuple[SliceContent, ...]:
    contents = [
        SliceContent(shared_counters=tuple(s))
        if s is not None
        else SliceContent(devices=tuple(d or ()))
        for d, s in zip(device_slots, set_slots, strict=True)
    ]
    # Empty slices at the end are dropped; one empty slice stays for an empty pool.
    while len(contents) > 1 and not contents[-1].devices and not contents[-1].shared_counters:
        contents.pop()
    return tuple(contents)
