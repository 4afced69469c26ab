"""What one driver's ResourceSlices say to the NoExecute budget (pure: JSON in, a view out).

Node plugins never put NoExecute on a device. A device whose health policy says NoExecute
carries two taints in its slice: the health taint ``<driver>/unhealthy`` with effect
NoSchedule, and the *request* ``<driver>/noexecute-request`` with effect ``None`` (the API's
"purely informational" effect: it neither blocks scheduling nor evicts). The request's value
is the health reason; its ``timeAdded``, stamped by the apiserver and kept by the plugin while
the device stays unhealthy, is the time the device first asked. The controller reads the
requests from its watch of every ResourceSlice and decides (:mod:`.decision`).

:func:`view_of` counts a driver's slices:

* **owner node.** A slice's device belongs to the node in ``spec.nodeName``; with per-device
  node selection to the device's own ``nodeName``, else to the node in the slice's
  ``resource.drakit.dev/node`` label (drakit's publisher sets it); anything else to the
  empty node ``""``, which counts as one node. drakit's chart lets a node plugin write only
  the slices of its own node (a ValidatingAdmissionPolicy), so a node can request NoExecute
  only for devices it publishes.
* **current generations only.** Slices are grouped by owner node and pool; only the highest
  ``spec.pool.generation`` of each group counts, so slices a new generation left behind do not
  count twice, and one node cannot make another node's pool look stale.
* **one owner per pool.** A DeviceTaintRule selects devices by driver, pool and device name,
  not by node. A pool whose current slices come from more than one owner node is
  *conflicted*: its requests are never granted, since a rule for it would also taint the
  other node's device of that name.
* **bounded contribution.** The denominator of the cluster-wide percentage is
  ``sum(min(count(n), second))`` over the nodes that publish devices, where ``second`` is the
  second-largest node count: a node that publishes a million devices counts as much as the
  largest other node. Unlike a median, this sum never grows when a node is missing from the
  view (each term and the bound can only grow as nodes are added), so a partial view (slices
  wiped while a plugin restarts, a watch that has not delivered every slice yet) can only
  lower the cap. A median bound did not have that property: the budget's property test found
  a new leader, one node's slices missing, granting past the cap of the whole cluster.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.model import TAINT_EFFECT_NONE
from drakit.allocator.usage import NOEXECUTE_REQUEST_TAINT_SUFFIX

__all__ = [
    "NODE_LABEL",
    "Census",
    "DeviceRef",
    "DriverView",
    "Request",
    "SliceSummary",
    "bounded_total",
    "parse_time",
    "request_key",
    "summarize",
    "view_of",
]

#: The label drakit's publisher puts on slices with per-device node selection.
NODE_LABEL = "resource.drakit.dev/node"

#: (pool, device): a device of one driver, as a DeviceTaintRule's selector names it.
DeviceRef = tuple[str, str]


def request_key(driver: str) -> str:
    """The taint key of ``driver``'s NoExecute request (``<driver>/noexecute-request``)."""
    return f"{driver}{NOEXECUTE_REQUEST_TAINT_SUFFIX}"


@dataclass(frozen=True)
class Request:
    """A device that asks for NoExecute: where it is, since when (seconds since the epoch,
    from the request's ``timeAdded``; None when not stamped, which ranks last) and why."""

    device: DeviceRef
    node: str
    since: float | None
    reason: str = ""

    def rank(self) -> tuple[bool, float, str, str]:
        """Oldest request first, then pool and device name: the same order on every run."""
        return (self.since is None, self.since or 0.0, *self.device)


@dataclass(frozen=True)
class DriverView:
    """The budget's reading of one driver's slices (see the module docstring)."""

    #: Devices of the current generations per owner node.
    devices_per_node: Mapping[str, int] = field(default_factory=dict)
    #: Every device of a current generation.
    present: frozenset[DeviceRef] = frozenset()
    #: The requests of present devices, conflicted pools excluded.
    requests: Mapping[DeviceRef, Request] = field(default_factory=dict)
    #: Pools published by more than one owner node.
    conflicted_pools: frozenset[str] = frozenset()


def parse_time(value: Any) -> float | None:
    """An RFC 3339 ``timeAdded`` as seconds since the epoch; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_time(value)


@functools.lru_cache(maxsize=4096)
def _parse_time(value: str) -> float | None:
    # A device's request keeps its timeAdded while it stays unhealthy, and every republished
    # slice repeats it: the same few strings are parsed over and over.
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


@dataclass(frozen=True)
class SliceSummary:
    """What :func:`view_of` reads of one slice of the driver."""

    owner: str
    pool: str
    generation: int
    #: Devices per node (a device's own ``nodeName``, else the slice's owner).
    devices_per_node: Mapping[str, int]
    present: frozenset[DeviceRef]
    requests: tuple[Request, ...]


def summarize(obj: Mapping[str, Any], driver: str) -> SliceSummary | None:
    """The summary of one slice; None when it is not ``driver``'s."""
    spec = obj.get("spec") or {}
    if spec.get("driver") != driver:
        return None
    pool_spec = spec.get("pool") or {}
    owner = _slice_node(obj)
    pool = str(pool_spec.get("name", ""))
    counts: dict[str, int] = {}
    present: set[DeviceRef] = set()
    requests: list[Request] = []
    key = request_key(driver)
    for device in spec.get("devices") or ():
        if not isinstance(device, dict) or not device.get("name"):
            continue
        node = str(device.get("nodeName") or owner)
        ref = (pool, str(device["name"]))
        counts[node] = counts.get(node, 0) + 1
        present.add(ref)
        if device.get("taints"):
            request = _request(device, key, ref, node)
            if request is not None:
                requests.append(request)
    return SliceSummary(
        owner, pool, _int(pool_spec.get("generation")), counts, frozenset(present), tuple(requests)
    )


@dataclass
class _Part:
    """What one group (owner node, pool) adds to the view: its current generation's devices
    per node, devices and requests."""

    counts: dict[str, int]
    present: frozenset[DeviceRef]
    requests: list[Request]


class Census:
    """The view of one driver's slices, kept up to date from one listing to the next. Each
    listing is compared with the previous one by object identity (a set operation, not a
    Python loop over the slices): only the slices that are new objects are read, and only
    their (owner node, pool) groups are counted again; a listing of the same objects gets
    the previous view itself. A new object with the name and resourceVersion of one that
    left the listing (a relist) keeps that one's reading. The view is the one
    :func:`view_of` computes from scratch (the unit tests compare them).

    A listing's objects must not be changed in place (an informer's store replaces an
    object on every event): a changed object must be a new object. The census holds the
    objects of the last listing, so an identity is never reused while it counts. Not
    thread-safe.

    A controller reconciles after every watch event, and most events change one slice of
    thousands: reading every device of every slice on each reconcile was the budget's main
    cost."""

    def __init__(self, driver: str) -> None:
        self.driver = driver
        #: The last listing by id(), and what each of its objects said.
        self._objects: dict[int, Mapping[str, Any]] = {}
        self._entries: dict[int, tuple[tuple[str, str], SliceSummary | None]] = {}
        self._groups: dict[tuple[str, str], dict[int, SliceSummary]] = {}
        self._parts: dict[tuple[str, str], _Part] = {}
        self._counts: dict[str, int] = {}
        self._requests: dict[DeviceRef, list[Request]] = {}
        self._owners: dict[str, dict[str, int]] = {}
        self._conflicted: set[str] = set()
        #: The request that ranks first per device (of _requests).
        self._first: dict[DeviceRef, Request] = {}
        self._view: DriverView | None = None

    def view(self, slices: Iterable[Mapping[str, Any]]) -> DriverView:
        """The view of the driver's slices among ``slices`` (the whole listing)."""
        listing = list(slices)
        objects = dict(zip(map(id, listing), listing, strict=True))
        if self._view is not None and objects.keys() == self._objects.keys():
            return self._view
        dirty: set[tuple[str, str]] = set()
        recycled: dict[tuple[str, str], SliceSummary | None] = {}
        for ident in self._objects.keys() - objects.keys():
            version, summary = self._entries.pop(ident)
            if version[1]:
                recycled[version] = summary
            self._leave(ident, summary, dirty)
        for ident in objects.keys() - self._objects.keys():
            obj = objects[ident]
            meta = obj.get("metadata") or {}
            version = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
            summary = recycled[version] if version in recycled else summarize(obj, self.driver)
            self._entries[ident] = (version, summary)
            if summary is not None:
                self._groups.setdefault((summary.owner, summary.pool), {})[ident] = summary
                dirty.add((summary.owner, summary.pool))
        self._objects = objects
        for group in dirty:
            self._recount(group)
        self._view = self._build()
        return self._view

    def _leave(self, ident: int, summary: SliceSummary | None, dirty: set[tuple[str, str]]) -> None:
        if summary is None:
            return
        group = (summary.owner, summary.pool)
        members = self._groups.get(group, {})
        members.pop(ident, None)
        if not members:
            self._groups.pop(group, None)
        dirty.add(group)

    def _recount(self, group: tuple[str, str]) -> None:
        """Replace what ``group`` adds to the totals with what its members say now."""
        old = self._parts.pop(group, None)
        if old is not None:
            self._add(group[1], old, -1)
        members = self._groups.get(group)
        if not members:
            return
        current = max(m.generation for m in members.values())
        latest = [m for m in members.values() if m.generation == current]
        part = _Part({}, latest[0].present.union(*(m.present for m in latest[1:])), [])
        for member in latest:
            for node, count in member.devices_per_node.items():
                part.counts[node] = part.counts.get(node, 0) + count
            part.requests.extend(member.requests)
        self._parts[group] = part
        self._add(group[1], part, 1)

    def _add(self, pool: str, part: _Part, sign: int) -> None:
        owners = self._owners.setdefault(pool, {})
        for node, count in part.counts.items():
            _bump(self._counts, node, sign * count)
            _bump(owners, node, sign)
        if not owners:
            del self._owners[pool]
        if len(owners) > 1:
            self._conflicted.add(pool)
        else:
            self._conflicted.discard(pool)
        for request in part.requests:
            ref = request.device
            same = self._requests.setdefault(ref, [])
            if sign > 0:
                same.append(request)
            else:
                same.remove(request)
            if same:
                self._first[ref] = min(same, key=_first) if len(same) > 1 else same[0]
            else:
                del self._requests[ref], self._first[ref]

    def _build(self) -> DriverView:
        conflicted = frozenset(self._conflicted)
        requests = self._first
        if conflicted:
            requests = {ref: r for ref, r in requests.items() if ref[0] not in conflicted}
        return DriverView(
            devices_per_node=dict(self._counts),
            present=frozenset().union(*(part.present for part in self._parts.values())),
            requests=dict(requests),
            conflicted_pools=conflicted,
        )


def view_of(
    slices: Iterable[Mapping[str, Any]], driver: str, census: Census | None = None
) -> DriverView:
    """Count the slices of ``driver`` among ``slices`` as the module docstring says;
    ``census`` (the driver's) carries the counts over from the previous listing."""
    if census is None:
        census = Census(driver)
    elif census.driver != driver:
        raise ValueError(f"the census of {census.driver!r} cannot count {driver!r}'s slices")
    return census.view(slices)


def bounded_total(devices_per_node: Mapping[str, int]) -> int:
    """The denominator of the cluster-wide percentage: each node counts at most as the
    second-largest node (see the module docstring); monotone in the nodes counted."""
    counts = sorted((count for count in devices_per_node.values() if count > 0), reverse=True)
    if len(counts) < 2:
        return sum(counts)
    bound = counts[1]
    return sum(min(count, bound) for count in counts)


def _slice_node(obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    if spec.get("perDeviceNodeSelection"):
        return str(((obj.get("metadata") or {}).get("labels") or {}).get(NODE_LABEL, ""))
    return ""


def _request(device: Mapping[str, Any], key: str, ref: DeviceRef, node: str) -> Request | None:
    for taint in device.get("taints") or ():
        if (
            isinstance(taint, Mapping)
            and taint.get("key") == key
            and taint.get("effect") == TAINT_EFFECT_NONE
        ):
            return Request(
                ref, node, parse_time(taint.get("timeAdded")), str(taint.get("value") or "")
            )
    return None


def _first(request: Request) -> tuple[tuple[bool, float, str, str], str, str]:
    """Of the requests for one device (a duplicate), the one that ranks first wins; equal
    ranks are told apart by node and reason, so the winner does not depend on the order of
    the listing."""
    return (request.rank(), request.node, request.reason)


def _bump(counts: dict[Any, int], key: Any, by: int) -> None:
    value = counts.get(key, 0) + by
    if value:
        counts[key] = value
    else:
        counts.pop(key, None)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
