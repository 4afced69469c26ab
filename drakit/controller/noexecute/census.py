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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.model import TAINT_EFFECT_NONE
from drakit.allocator.usage import NOEXECUTE_REQUEST_TAINT_SUFFIX

__all__ = [
    "NODE_LABEL",
    "DeviceRef",
    "DriverView",
    "Request",
    "SliceSummary",
    "SummaryCache",
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


class SummaryCache:
    """Summaries of the slices last seen, by name and resourceVersion: a reconcile reads
    again only the slices that changed since the last one. Not thread-safe."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, SliceSummary | None]] = {}

    def summaries(self, slices: Iterable[Mapping[str, Any]], driver: str) -> list[SliceSummary]:
        """The summaries of ``driver``'s slices among ``slices``; forgets the others."""
        entries: dict[str, tuple[str, SliceSummary | None]] = {}
        out: list[SliceSummary] = []
        for obj in slices:
            meta = obj.get("metadata") or {}
            name, version = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
            cached = self._entries.get(name)
            if cached is not None and version and cached[0] == version:
                summary = cached[1]
            else:
                summary = summarize(obj, driver)
            entries[name] = (version, summary)
            if summary is not None:
                out.append(summary)
        self._entries = entries
        return out


def view_of(
    slices: Iterable[Mapping[str, Any]], driver: str, cache: SummaryCache | None = None
) -> DriverView:
    """Count the slices of ``driver`` among ``slices`` as the module docstring says."""
    summaries = (cache or SummaryCache()).summaries(slices, driver)
    groups: dict[tuple[str, str], list[SliceSummary]] = {}
    for summary in summaries:
        groups.setdefault((summary.owner, summary.pool), []).append(summary)
    counts: dict[str, int] = {}
    owners: dict[str, set[str]] = {}
    present: set[DeviceRef] = set()
    requests: dict[DeviceRef, Request] = {}
    for (_owner, pool), members in groups.items():
        current = max(m.generation for m in members)
        for member in members:
            if member.generation != current:
                continue
            for node, count in member.devices_per_node.items():
                counts[node] = counts.get(node, 0) + count
                owners.setdefault(pool, set()).add(node)
            present |= member.present
            for request in member.requests:
                requests[request.device] = _older(requests.get(request.device), request)
    conflicted = frozenset(pool for pool, nodes in owners.items() if len(nodes) > 1)
    return DriverView(
        devices_per_node=counts,
        present=frozenset(present),
        requests={ref: r for ref, r in requests.items() if ref[0] not in conflicted},
        conflicted_pools=conflicted,
    )


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


def _older(a: Request | None, b: Request) -> Request:
    """Of two requests for one device (a duplicate), the one that ranks first."""
    return b if a is None or b.rank() < a.rank() else a


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
