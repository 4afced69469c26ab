"""The NoExecute budget: how many devices may hold a NoExecute taint at once.

Two limits: at most ``per_node`` devices on one node, and at most ``percent`` of the driver's
published devices cluster-wide (rounded down, but at least one when the percentage is above 0,
so that a small cluster can evict at all). A device past either limit gets NoSchedule instead.
How the devices and the holders are counted, and how little one node can change the count,
is :mod:`.census`'s part.

Race tolerance: every node plugin decides alone, from the same data (the driver's
ResourceSlices, where each NoExecute taint carries its ``timeAdded``). All of them rank the
taints the same way: oldest ``timeAdded`` first, then node, pool and device name; devices that
want NoExecute but hold none yet come last. Walking that ranking, a taint is admitted while
both limits have room; the per-node limit applies to every node's holders, so no node takes
more than ``per_node`` places of the cluster-wide budget, whatever it publishes. Two nodes
that add a taint at the same moment may briefly exceed the cluster-wide limit; on their next
evaluation both see both taints, agree that the younger one is past the budget, and its node
demotes it to NoSchedule. The overshoot is bounded by the number of nodes deciding within one
evaluation interval (plus the delay of their watch caches), and it ends there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from drakit.node_plugin.health.hysteresis import DeviceKey

__all__ = ["ClusterTaints", "Holder", "cluster_cap", "grant"]

_NOT_YET = "\uffff"  # ranks after every RFC 3339 time


@dataclass(frozen=True)
class Holder:
    """A device that holds this driver's NoExecute health taint: node, device, timeAdded."""

    node: str
    key: DeviceKey
    time_added: str = ""


@dataclass(frozen=True)
class ClusterTaints:
    """What the driver's ResourceSlices say: the devices the cluster-wide percentage is taken
    of (counted as :mod:`.census` says), and the NoExecute holders of all nodes."""

    total_devices: int
    holders: tuple[Holder, ...] = ()


def cluster_cap(total_devices: int, percent: float) -> int:
    """Most devices that may hold NoExecute cluster-wide (see the module docstring)."""
    if percent <= 0:
        return 0
    return max(1, math.floor(total_devices * percent / 100))


def grant(
    node: str,
    wanted: Sequence[DeviceKey],
    cluster: ClusterTaints,
    *,
    per_node: int,
    percent: float,
) -> set[DeviceKey]:
    """The devices of ``wanted`` (this node's devices whose policy says NoExecute, oldest
    unhealthy first) that may hold NoExecute now."""
    wanted_set = set(wanted)
    held = {h.key: h.time_added for h in cluster.holders if h.node == node}
    ranked: list[tuple[str, int, str, DeviceKey]] = [
        (h.time_added or _NOT_YET, 0, h.node, h.key) for h in cluster.holders if h.node != node
    ]
    for order, key in enumerate(wanted):
        ranked.append((held.get(key) or _NOT_YET, order, node, key))
    ranked.sort()
    cap = cluster_cap(cluster.total_devices, percent)
    per_node_count: dict[str, int] = {}
    admitted_total = 0
    granted: set[DeviceKey] = set()
    for _time, _order, holder_node, key in ranked:
        if admitted_total >= cap or per_node_count.get(holder_node, 0) >= per_node:
            continue
        admitted_total += 1
        per_node_count[holder_node] = per_node_count.get(holder_node, 0) + 1
        if holder_node == node and key in wanted_set:
            granted.add(key)
    return granted
