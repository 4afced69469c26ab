"""What the pods placed on each node take, kept up to date from pod events.

A pod counts on a node from the moment drakit decides to bind it there (*assumed*) or the
pod informer shows it bound, until it reaches phase Succeeded/Failed or is deleted. Only a
``PodInfo`` per placed pod is kept (requests, host ports, labels, affinity terms), with per
node totals (summed requests, pod count, host ports) updated incrementally, so checking a
node is a constant-time lookup. Unbound pods are not kept.

Thread-safe: the informer's dispatcher and the scheduling workers call it concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from drakit.controller.podfit.podinfo import PodInfo
from drakit.controller.podfit.ports import HostPort
from drakit.controller.podfit.requests import Requests
from drakit.controller.podfit.resources import Used

__all__ = ["NodeUsage", "UsageChange"]


@dataclass(frozen=True)
class _Entry:
    info: PodInfo
    node: str
    fingerprint: tuple[Any, ...]
    assumed: bool


@dataclass(frozen=True)
class UsageChange:
    """What an informer event changed: pods were added to a node (may satisfy another pod's
    affinity) and/or removed from one (frees room, ports and anti-affinity domains)."""

    added: bool = False
    removed: bool = False


class _NodeTotals:
    __slots__ = (
        "_used",
        "ephemeral",
        "members",
        "memory",
        "milli_cpu",
        "pods",
        "ports",
        "scalar",
    )

    def __init__(self) -> None:
        self.milli_cpu = self.memory = self.ephemeral = self.pods = 0
        self.scalar: dict[str, int] = {}
        self.ports: dict[HostPort, int] = {}
        self.members: dict[str, PodInfo] = {}
        self._used: Used | None = None

    def apply(self, info: PodInfo, sign: int) -> None:
        self._used = None
        r = info.requests
        self.milli_cpu += sign * r.milli_cpu
        self.memory += sign * r.memory
        self.ephemeral += sign * r.ephemeral_storage
        self.pods += sign
        for name, amount in r.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * amount
        for port in info.ports:
            left = self.ports.get(port, 0) + sign
            if left > 0:
                self.ports[port] = left
            else:
                self.ports.pop(port, None)
        if sign > 0:
            self.members[info.uid] = info
        else:
            self.members.pop(info.uid, None)

    def used(self) -> Used:
        """The totals as a (cached, immutable) ``Used``."""
        if self._used is None:
            scalar = {k: v for k, v in self.scalar.items() if v}
            requests = Requests(self.milli_cpu, self.memory, self.ephemeral, scalar)
            self._used = Used(requests, self.pods)
        return self._used


def _fingerprint(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """The parts of a bound pod ``PodInfo`` reads: an update that keeps them is skipped
    without decoding the pod again."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return (
        spec.get("nodeName"),
        metadata.get("labels"),
        bool(metadata.get("deletionTimestamp")),
        spec.get("containers"),
        spec.get("initContainers"),
        spec.get("overhead"),
        spec.get("resources"),
        spec.get("affinity"),
    )


class NodeUsage:
    """Placed pods and per-node totals (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._nodes: dict[str, _NodeTotals] = {}
        self._with_anti_affinity: set[str] = set()

    # -- updates ---------------------------------------------------------------------------

    def observe(self, pod: Mapping[str, Any]) -> UsageChange:
        """An informer add/update of ``pod``."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return UsageChange(removed=self._remove(uid))
        if not node:
            return UsageChange()  # pending (an assumed entry stays until the bind shows)
        fingerprint = _fingerprint(pod)
        with self._lock:
            old = self._entries.get(uid)
            if old is not None and not old.assumed and old.fingerprint == fingerprint:
                # Keep the new copy's parts: the informer dropped the old ones, and holding
                # on to them would keep a second copy of every placed pod's spec alive.
                self._entries[uid] = replace(old, fingerprint=fingerprint)
                return UsageChange()
        try:
            info = PodInfo.of(pod)
        except ValueError:
            # The apiserver validated the pod: only a corrupt object gets here. Count it
            # with no requests rather than not at all (it still takes a pod slot).
            metadata = pod.get("metadata") or {}
            info = PodInfo(uid, str(metadata.get("namespace")), str(metadata.get("name")))
        with self._lock:
            removed = self._remove_locked(uid)
            self._add_locked(_Entry(info, str(node), fingerprint, assumed=False))
        return UsageChange(added=True, removed=removed)

    def forget(self, pod: Mapping[str, Any]) -> UsageChange:
        """An informer delete of ``pod``."""
        return UsageChange(removed=self._remove(str((pod.get("metadata") or {}).get("uid"))))

    def assume(self, info: PodInfo, node: str) -> None:
        """Count ``info`` on ``node`` now, before the binding is seen."""
        with self._lock:
            self._remove_locked(info.uid)
            self._add_locked(_Entry(info, node, (), assumed=True))

    def forget_assumed(self, uid: str) -> None:
        """Undo ``assume`` (the binding failed); an entry the informer confirmed stays."""
        with self._lock:
            entry = self._entries.get(uid)
            if entry is not None and entry.assumed:
                self._remove_locked(uid)

    # -- reads -----------------------------------------------------------------------------

    def used(self, node: str) -> Used:
        with self._lock:
            totals = self._nodes.get(node)
            return totals.used() if totals is not None else Used()

    def ports(self, node: str) -> tuple[HostPort, ...]:
        with self._lock:
            totals = self._nodes.get(node)
            return tuple(totals.ports) if totals is not None else ()

    def pods_on(self, node: str) -> list[PodInfo]:
        with self._lock:
            totals = self._nodes.get(node)
            return list(totals.members.values()) if totals is not None else []

    def placed(self) -> list[tuple[PodInfo, str]]:
        """Every placed pod with its node."""
        with self._lock:
            return [(e.info, e.node) for e in self._entries.values()]

    def placed_with_anti_affinity(self) -> list[tuple[PodInfo, str]]:
        with self._lock:
            return [
                (self._entries[uid].info, self._entries[uid].node)
                for uid in self._with_anti_affinity
            ]

    def node_of(self, uid: str) -> str | None:
        with self._lock:
            entry = self._entries.get(uid)
            return entry.node if entry is not None else None

    # -- internals -------------------------------------------------------------------------

    def _remove(self, uid: str) -> bool:
        with self._lock:
            return self._remove_locked(uid)

    def _remove_locked(self, uid: str) -> bool:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return False
        totals = self._nodes[entry.node]
        totals.apply(entry.info, -1)
        if not totals.members:
            del self._nodes[entry.node]
        self._with_anti_affinity.discard(uid)
        return True

    def _add_locked(self, entry: _Entry) -> None:
        uid = entry.info.uid
        self._entries[uid] = entry
        self._nodes.setdefault(entry.node, _NodeTotals()).apply(entry.info, 1)
        if entry.info.anti_affinity:
            self._with_anti_affinity.add(uid)
