"""What the driver's ResourceSlices say to the NoExecute budget, and how little one node can
change that.

The budget needs two things from the cluster: how many devices the driver publishes (the
denominator of the cluster-wide percentage) and which devices hold its NoExecute health taint.
Every node plugin reads both from its own watch cache of the driver's slices
(:mod:`.clusterview`), which keeps only the :func:`summarize` d form of each slice. The
:func:`census` of those summaries:

* **owner node.** A slice belongs to the node in ``spec.nodeName``; a slice with per-device
  node selection to the node in its ``resource.drakit.dev/node`` label; any other slice (not
  written by a node plugin) to the empty node ``""``. drakit's chart installs a
  ValidatingAdmissionPolicy under which a node plugin can write only slices that belong, by
  exactly these rules, to the node its token is bound to. So a compromised node can publish
  whatever it likes, but only as itself.
* **current generations only.** Pools are grouped per owner node and pool name, and only the
  slices of the highest ``spec.pool.generation`` of each group count (devices and holders).
  Slices that a pool's generation left behind while they are being deleted do not count
  twice, and one node cannot make another node's pool look stale by publishing a pool of the
  same name with a higher generation.
* **bounded contribution.** Each node's device count (the devices of its current
  generations) counts at most as much as the *median* node's: the denominator is
  ``sum(min(count(n), median))`` over the nodes that publish at least one device, with the
  lower median for an even number of nodes. Whatever one node publishes, the denominator is
  at most what it would be if that node had as many devices as the largest other node, so
  at most the other nodes' devices plus the largest of them: a node that publishes a million
  devices counts as one more large node. As long as fewer than half the nodes lie, the median
  is an honest node's count. The price: in a cluster whose nodes carry different numbers of
  devices the denominator is below the true total (never above it), so the budget errs
  towards fewer evictions.
* **holders.** Every NoExecute health taint in a current generation is a holder of its owner
  node. The budget admits at most ``per_node`` holders of any one node (:mod:`.budget`), so a
  node that fakes holders with an old ``timeAdded`` takes at most ``per_node`` places of the
  cluster-wide budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.objects import KubeObject
from drakit.node_plugin.health.budget import ClusterTaints, Holder

__all__ = ["SUMMARY", "Census", "census", "summarize"]

#: Field of a summarized slice that holds the summary (metadata stays for the informer).
SUMMARY = "healthSummary"


@dataclass(frozen=True)
class Census(ClusterTaints):
    """:class:`ClusterTaints` with what was counted, for logs: devices published in current
    generations (uncapped), the nodes that publish them, and the per-node cap applied."""

    published_devices: int = 0
    nodes: int = 0
    per_node_cap: int = 0


def summarize(obj: KubeObject, *, taint_key: str, node_label: str) -> KubeObject:
    """The part of a ResourceSlice that the budget reads: owner node, pool, generation, number
    of devices and NoExecute holders of ``taint_key`` with their ``timeAdded``. Keeps the name and
    resourceVersion in ``metadata`` (an informer's bookkeeping); everything else is dropped,
    so that a plugin's cache of every slice of the driver stays small."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pool = spec.get("pool") or {}
    devices = [d for d in spec.get("devices") or () if isinstance(d, dict)]
    holders = [
        [str(d.get("name", "")), str(t.get("timeAdded") or "")]
        for d in devices
        for t in d.get("taints") or ()
        if isinstance(t, dict) and t.get("key") == taint_key and t.get("effect") == "NoExecute"
    ]
    return {
        "metadata": {
            "name": meta.get("name", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        SUMMARY: {
            "node": _owner_node(spec, meta, node_label),
            "pool": str(pool.get("name", "")),
            "generation": _int(pool.get("generation")),
            "devices": len(devices),
            "holders": holders,
        },
    }


def census(slices: Iterable[KubeObject]) -> Census:
    """Count the summarized ``slices`` as the module docstring says."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for obj in slices:
        summary = obj.get(SUMMARY)
        if isinstance(summary, dict):
            groups.setdefault((summary["node"], summary["pool"]), []).append(summary)
    devices: dict[str, int] = {}
    holders: dict[tuple[str, str, str], str] = {}
    for (node, pool), members in groups.items():
        current = max(m["generation"] for m in members)
        for m in members:
            if m["generation"] != current:
                continue
            devices[node] = devices.get(node, 0) + m["devices"]
            for name, time_added in m["holders"]:
                key = (node, pool, name)
                # One device with two taints (a duplicate): the oldest time stands for both.
                holders[key] = _older(holders.get(key, ""), time_added)
    counts = [count for count in devices.values() if count > 0]
    cap = statistics.median_low(counts) if counts else 0
    return Census(
        total_devices=sum(min(c, cap) for c in counts),
        holders=tuple(
            Holder(node, (pool, name), time_added)
            for (node, pool, name), time_added in sorted(holders.items())
        ),
        published_devices=sum(counts),
        nodes=len(counts),
        per_node_cap=cap,
    )


def _owner_node(spec: dict[str, Any], meta: dict[str, Any], node_label: str) -> str:
    node = spec.get("nodeName")
    if node:
        return str(node)
    if spec.get("perDeviceNodeSelection"):
        return str((meta.get("labels") or {}).get(node_label, ""))
    return ""


def _older(a: str, b: str) -> str:
    """The older of two RFC 3339 times; an empty time (not stamped yet) is the newest."""
    if not a or not b:
        return a or b
    return min(a, b)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
