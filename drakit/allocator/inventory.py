"""The device inventory: ResourceSlices prepared once and reused for every node and claim.

:class:`Inventory` turns slices into light records (:class:`SliceEntry`,
:class:`DeviceEntry`) with everything the hot path needs precomputed: device IDs as
tuples, blocking taints, counter consumption and capacities in integer nano-units, and a
per-device cache of selector results that survives across allocation calls (a selector's
result depends only on the device and the expression). :meth:`Inventory.pools_for_node`
gathers the pools visible from one node (cached per node name and labels).

Pool gathering follows Kubernetes 1.37 (experimental channel):

* candidate slices: those with ``nodeName`` equal to the node, plus every slice without
  ``nodeName``; slices are relevant by nodeName / allNodes / nodeSelector, or, with
  ``perDeviceNodeSelection``, when any device matches the node;
* per (driver, pool) only the highest generation counts; a pool is complete when it has
  ``resourceSliceCount`` slices at that generation (looking at *all* slices of the pool when
  some do not target this node; a higher generation anywhere makes the pool obsolete);
* a pool is *invalid* when device names repeat, counter-set names repeat, or a device
  consumes an unknown counter set or counter;
* pools are ordered by (driver, pool); pools with binding conditions come last.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from drakit.allocator.cel import DeviceVariables
from drakit.allocator.features import Features
from drakit.allocator.model import (
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    Device,
    DeviceCapacity,
    DeviceID,
    DeviceTaint,
    Node,
    NodeSelector,
    ResourceSlice,
)
from drakit.allocator.nodeselector import NodeSelectorError, node_selector_matches
from drakit.allocator.quantity import NANO, nanos

__all__ = ["NANO", "DeviceEntry", "Inventory", "Pool", "SliceEntry", "nanos"]

_BLOCKING_EFFECTS = (TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE)
# DeviceID from a (driver, pool, device) tuple without the NamedTuple's Python-level
# __new__ (as its own _make does): one per device whenever slices change
_new_device_id = functools.partial(tuple.__new__, DeviceID)


class DeviceEntry:
    """One device of one slice, prepared for allocation. Treat as read-only."""

    __slots__ = (
        "_context",
        "binding_conditions",
        "binding_failure_conditions",
        "binds_to_node",
        "blocking_taints",
        "capacity",
        "counters",
        "device",
        "id",
        "multi",
        "plain_selection",
        "pool_id",
        "result_cache",
        "selector_cache",
        "slice",
        "uses_compat_groups",
        "whole_capacity",
    )

    def __init__(
        self, device: Device, slice_entry: SliceEntry, interned: dict[Any, Any] | None = None
    ) -> None:
        self.device = device
        self.slice = slice_entry
        self.id = _new_device_id((slice_entry.driver, slice_entry.pool, device.name))
        self.pool_id = slice_entry.pool_id
        self.multi = bool(device.allow_multiple_allocations)
        # explicit loops rather than generator expressions: this runs once per device of
        # every slice whenever slices change (the cold pass), and most devices have no
        # taints and no counters
        taints = device.taints
        self.blocking_taints: tuple[DeviceTaint, ...] = (
            tuple(t for t in taints if t.effect in _BLOCKING_EFFECTS) if taints else ()
        )
        consumption = device.consumes_counters
        counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
        uses_compat_groups = False
        if consumption:
            sets = []
            for cc in consumption:
                amounts = []
                for name, c in cc.counters.items():
                    amounts.append((name, c.value.nanos()))
                sets.append((cc.counter_set, tuple(amounts)))
                if cc.compatibility_groups:
                    uses_compat_groups = True
            counters = tuple(sets)
            # devices of one kind consume alike: one shared tuple keeps the heap small
            if interned is not None:
                counters = interned.setdefault(counters, counters)
        self.counters = counters
        self.uses_compat_groups = uses_compat_groups
        capacity = device.capacity
        self.capacity: Mapping[str, DeviceCapacity] = capacity
        #: Whether a request without capacity requests takes every capacity whole, so that
        #: it fits whenever nothing of the device is in use (see ``fits_capacity``).
        whole = True
        for cap in capacity.values():
            # nanos() is kept by the (shared) quantity; its sign is the value's sign
            if cap.request_policy is not None or cap.value.nanos() < 0:
                whole = False
                break
        self.whole_capacity = whole
        self.binding_conditions = device.binding_conditions
        self.binding_failure_conditions = device.binding_failure_conditions
        self.binds_to_node = bool(device.binds_to_node)
        #: Selectable exactly when its cached selector answer is True: no binding
        #: conditions, no per-device node selection.
        self.plain_selection = not self.binding_conditions and not slice_entry.per_device
        # expression -> result, or the CEL error to raise again (results never change)
        self.selector_cache: dict[tuple[tuple[str, ...], tuple[str, ...]], bool | Exception] = {}
        # request signature -> the (immutable) allocation result naming this device; owned
        # by the allocator (see allocator.allocate), results never change; made on first use
        self.result_cache: dict[Any, Any] | None = None
        self._context: Any = None

    @property
    def context(self) -> Any:
        """The CEL evaluation context (``device`` variable), built on first use."""
        ctx = self._context
        if ctx is None:
            d = self.device
            # converted on demand: most selectors read a few fields (see DeviceVariables)
            ctx = DeviceVariables(
                self.slice.driver, d.attributes, d.capacity, bool(d.allow_multiple_allocations)
            )
            self._context = ctx
        return ctx

    def __repr__(self) -> str:
        return f"DeviceEntry({self.id})"


class SliceEntry:
    """One ResourceSlice, prepared. Treat as read-only."""

    __slots__ = (
        "all_nodes",
        "count",
        "devices",
        "driver",
        "generation",
        "name",
        "node_name",
        "node_selector",
        "per_device",
        "pool",
        "pool_id",
        "shared_counters",
        "skip_node_operations",
        "slice",
        "uses_compat_groups",
    )

    def __init__(self, s: ResourceSlice, interned: dict[Any, Any] | None = None) -> None:
        spec = s.spec
        self.slice = s
        self.name = s.metadata.name
        self.driver = spec.driver
        self.pool = spec.pool.name
        self.pool_id = (self.driver, self.pool)
        self.generation = spec.pool.generation
        self.count = spec.pool.resource_slice_count
        self.node_name = spec.node_name or ""
        self.node_selector: NodeSelector | None = spec.node_selector
        self.all_nodes = bool(spec.all_nodes)
        self.per_device = bool(spec.per_device_node_selection)
        self.shared_counters: dict[str, dict[str, int]] = {}
        self.skip_node_operations = spec.skip_node_operations
        self.devices: tuple[DeviceEntry, ...] = tuple(
            DeviceEntry(d, self, interned) for d in spec.devices
        )
        self.uses_compat_groups = any(d.uses_compat_groups for d in self.devices)

    @property
    def has_counter_sets(self) -> bool:
        return bool(self.slice.spec.shared_counters)

    def __repr__(self) -> str:
        return f"SliceEntry({self.name!r}, {self.driver}/{self.pool})"


class Pool:
    """The slices of one (driver, pool) as seen from one node."""

    __slots__ = (
        "available_cache",
        "candidates",
        "counter_devices",
        "counter_sets",
        "driver",
        "has_binding_conditions",
        "id",
        "incomplete",
        "invalid",
        "invalid_reason",
        "name",
        "not_targeting",
        "targeting",
    )

    def __init__(self, driver: str, name: str) -> None:
        self.driver = driver
        self.name = name
        self.id = (driver, name)
        self.incomplete = False
        self.invalid = False
        self.invalid_reason = ""
        self.targeting: tuple[SliceEntry, ...] = ()
        self.not_targeting: tuple[SliceEntry, ...] = ()
        self.counter_sets: dict[str, dict[str, int]] = {}
        self.has_binding_conditions = False
        self.candidates: tuple[DeviceEntry, ...] = ()
        #: Devices of the pool (targeting this node or not) that consume counters.
        self.counter_devices: tuple[DeviceEntry, ...] = ()
        #: (allocated-state pool stamp, counters left): owned by the allocator
        self.available_cache: tuple[int, dict[str, dict[str, int]]] | None = None

    def __repr__(self) -> str:
        state = "incomplete" if self.incomplete else "invalid" if self.invalid else "ok"
        return f"Pool({self.driver}/{self.name}, {state})"


class NodePools:
    """The pools visible from one node, and the flat candidate order across them."""

    __slots__ = ("by_id", "candidates", "pools")

    def __init__(self, pools: list[Pool]) -> None:
        self.pools = pools
        #: (driver, pool) -> pool; the first one wins, as a search over ``pools`` would
        self.by_id: dict[tuple[str, str], Pool] = {}
        for p in pools:
            self.by_id.setdefault(p.id, p)
        # pool order -> slice order -> device order, usable pools only
        candidates: list[DeviceEntry] = []
        for p in pools:
            if not (p.incomplete or p.invalid):
                candidates.extend(p.candidates)
        self.candidates: tuple[DeviceEntry, ...] = tuple(candidates)


_by_name = operator.attrgetter("name")
_by_id = operator.attrgetter("id")

# Bound of the per-node caches (a cluster's nodes; cleared when exceeded).
_MAX_NODES = 10000


class Inventory:
    """All ResourceSlices, prepared once. Thread-safe for reading; build a new one when
    slices change (it is cheap compared with allocation, and devices keep no mutable state
    other than caches of pure results)."""

    def __init__(self, slices: Iterable[ResourceSlice], features: Features | None = None) -> None:
        self.features = features or Features()
        interned: dict[Any, Any] = {}  # equal immutable values shared between devices
        self.slices: tuple[SliceEntry, ...] = tuple(SliceEntry(s, interned) for s in slices)
        self._on_node: dict[str, list[SliceEntry]] = {}
        self._shared: list[SliceEntry] = []
        self._by_pool: dict[tuple[str, str], list[SliceEntry]] = {}
        for s in self.slices:
            if s.node_name:
                self._on_node.setdefault(s.node_name, []).append(s)
            else:
                self._shared.append(s)
            self._by_pool.setdefault((s.driver, s.pool), []).append(s)
        self._node_cache: dict[tuple[str, frozenset[tuple[str, str]]], NodePools] = {}
        # the same Node object (immutable) asks again and again: by identity, it is kept
        # alive by its entry, so its id cannot be reused meanwhile
        self._by_node_object: dict[int, tuple[Node, NodePools]] = {}
        self._lock = threading.Lock()

    def pools_for_node(self, node: Node) -> NodePools:
        """The pools visible from ``node`` (cached). Raises NodeSelectorError."""
        seen = self._by_node_object.get(id(node))
        if seen is not None and seen[0] is node:
            return seen[1]
        key = (node.name, frozenset(node.labels.items()))
        result = self._node_cache.get(key)
        if result is None:
            result = NodePools(self._gather(node))
        with self._lock:
            if len(self._node_cache) > _MAX_NODES:
                self._node_cache.clear()
            if len(self._by_node_object) > _MAX_NODES:
                self._by_node_object.clear()
            self._node_cache[key] = result
            self._by_node_object[id(node)] = (node, result)
        return result

    def device_matches_node(self, d: DeviceEntry, node: Node) -> bool:
        """Per-device node selection (perDeviceNodeSelection slices)."""
        dev = d.device
        return _node_matches(node, dev.node_name or "", bool(dev.all_nodes), dev.node_selector)

    # -- gathering ------------------------------------------------------------------------
    def _gather(self, node: Node) -> list[Pool]:
        features = self.features
        grouped: dict[tuple[str, str], list[SliceEntry]] = {}
        for s in [*self._on_node.get(node.name, ()), *self._shared]:
            if not features.partitionable_devices and (s.per_device or s.has_counter_sets):
                continue
            if not features.compatibility_groups and s.uses_compat_groups:
                continue
            if s.node_name or s.all_nodes or s.node_selector is not None:
                try:
                    relevant = _node_matches(node, s.node_name, s.all_nodes, s.node_selector)
                except NodeSelectorError as exc:
                    raise NodeSelectorError(
                        f"failed to perform node selection for slice {s.name}: {exc}"
                    ) from None
            elif s.per_device:
                relevant = False
                for d in s.devices:
                    dev = d.device
                    try:
                        match = _node_matches(
                            node, dev.node_name or "", bool(dev.all_nodes), dev.node_selector
                        )
                    except NodeSelectorError as exc:
                        raise NodeSelectorError(
                            f"failed to perform node selection for device {dev.name} in slice "
                            f"{s.name}: {exc}"
                        ) from None
                    if match:
                        relevant = True
                        break
            else:
                continue
            if relevant:
                _add_slice(grouped, s)
        pools: list[Pool] = []
        late: list[Pool] = []
        for pool_id, slices in grouped.items():
            pool = self._complete_pool(pool_id, slices)
            if pool is None:
                continue
            (late if pool.has_binding_conditions else pools).append(pool)
        pools.sort(key=_by_id)
        late.sort(key=_by_id)
        return pools + late

    def _complete_pool(self, pool_id: tuple[str, str], slices: list[SliceEntry]) -> Pool | None:
        first = slices[0]
        if len(slices) == first.count:
            return self._build_pool(pool_id, slices, None)
        all_for_pool: list[SliceEntry] = []
        for s in self._by_pool.get(pool_id, ()):
            if s.generation > first.generation:
                return None  # obsolete: a newer generation is being published
            if s.generation == first.generation:
                all_for_pool.append(s)
        if not self.features.compatibility_groups:
            all_for_pool = [s for s in all_for_pool if not s.uses_compat_groups]
        if len(all_for_pool) != first.count:
            pool = Pool(*pool_id)
            pool.incomplete = True
            return pool
        return self._build_pool(pool_id, slices, all_for_pool)

    def _build_pool(
        self,
        pool_id: tuple[str, str],
        slices: list[SliceEntry],
        all_for_pool: Sequence[SliceEntry] | None,
    ) -> Pool:
        features = self.features
        ordered = sorted(slices, key=_by_name) if len(slices) > 1 else slices
        device_slices: list[SliceEntry] = []
        counter_slices: list[SliceEntry] = []
        not_targeting: list[SliceEntry] = []
        for s in ordered:
            if features.partitionable_devices and s.has_counter_sets:
                counter_slices.append(s)
            else:
                device_slices.append(s)
        if all_for_pool is not None and len(slices) < len(all_for_pool):
            targeting_names = {id(s) for s in slices}
            for s in all_for_pool:
                if id(s) in targeting_names:
                    continue
                if features.partitionable_devices and s.has_counter_sets:
                    counter_slices.append(s)
                else:
                    not_targeting.append(s)
        pool = Pool(*pool_id)
        problem = _duplicate_device(device_slices)
        if problem is None and features.partitionable_devices:
            problem = _collect_counter_sets(pool, counter_slices)
            if problem is None:
                problem = _check_consumption(pool, device_slices) or _check_consumption(
                    pool, not_targeting
                )
        if problem is not None:
            pool.invalid = True
            pool.invalid_reason = problem
            return pool
        pool.targeting = tuple(device_slices)
        pool.not_targeting = tuple(not_targeting)
        # loops, not generators: once per pool of every node after slices change
        candidates: list[DeviceEntry] = []
        for s in device_slices:
            candidates.extend(s.devices)
        pool.candidates = tuple(candidates)
        counter_devices = [d for d in candidates if d.counters]
        for s in not_targeting:
            for d in s.devices:
                if d.counters:
                    counter_devices.append(d)
        pool.counter_devices = tuple(counter_devices)
        for d in candidates:
            if d.binding_conditions:
                pool.has_binding_conditions = True
                break
        return pool


def _add_slice(grouped: dict[tuple[str, str], list[SliceEntry]], s: SliceEntry) -> None:
    key = (s.driver, s.pool)
    existing = grouped.get(key)
    if existing is None or s.generation > existing[0].generation:
        grouped[key] = [s]
    elif s.generation == existing[0].generation:
        existing.append(s)


def _duplicate_device(slices: Sequence[SliceEntry]) -> str | None:
    seen: set[str] = set()
    for s in slices:
        for d in s.devices:
            if d.device.name in seen:
                return f"duplicate device name {d.device.name}"
            seen.add(d.device.name)
    return None


def _collect_counter_sets(pool: Pool, slices: Sequence[SliceEntry]) -> str | None:
    for s in slices:
        for cs in s.slice.spec.shared_counters:
            if cs.name in pool.counter_sets:
                return f"duplicate counter set name {cs.name}"
            pool.counter_sets[cs.name] = {n: nanos(c.value) for n, c in cs.counters.items()}
    return None


def _check_consumption(pool: Pool, slices: Sequence[SliceEntry]) -> str | None:
    for s in slices:
        for d in s.devices:
            for set_name, counters in d.counters:
                known = pool.counter_sets.get(set_name)
                if known is None:
                    return f"counter set {set_name} not found"
                for name, _ in counters:
                    if name not in known:
                        return f"counter {name} not found in counter set {set_name}"
    return None


def _node_matches(
    node: Node, node_name: str, all_nodes: bool, selector: NodeSelector | None
) -> bool:
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node.name, node.labels)
    return False
