"""The NoExecute budget's decision: which requests get a DeviceTaintRule (pure, no API calls).

Two limits apply together: at most ``per_node`` devices of one node hold NoExecute, and at
most ``percent`` of the driver's devices cluster-wide (:func:`cluster_cap`). One decider,
the leader-elected controller, makes every decision, so there is no race between deciders.

:meth:`Decider.decide` takes what the driver's slices say (:class:`~.census.DriverView`) and
every grant that may be in effect: the DeviceTaintRules the controller's watch shows (those
of an earlier leader included) plus the rules it has asked to create and not seen yet.
It returns a :class:`Plan`:

* **grants only within the limits.** A request is granted only while the grants that may be
  in effect, counted pessimistically (a rule being deleted counts until the watch shows it
  gone, a create whose outcome is unknown counts as done), are below both limits. So the
  cap holds at every moment, not just eventually.
* **ranking.** Waiting requests are granted oldest first (the request's ``timeAdded``), then
  by pool and device name: every controller, after any restart, ranks them the same way.
* **no flapping.** A grant is never taken away while its device still asks for it: a newer
  or older request elsewhere waits for a place to free. The limits bound new grants; when the
  cap itself falls (devices left the cluster), grants in effect stay until their devices
  recover, and nothing new is granted until the count is below the cap again.
* **release.** A grant whose device is published without a request (it recovered) is
  deleted, and its place passes to the next request once the watch shows the rule gone.
  A grant whose device is not published at all (a node plugin restarting, the kubelet having
  wiped the node's slices) is kept for ``forget_after`` seconds, so a restart changes no
  effect; then it is deleted.
* **a partial view only lowers the cap.** The cap is taken of the devices the controller's
  watch shows (:func:`~.census.bounded_total`, which never grows when a node is missing):
  slices wiped by a restart, or not listed yet, can delay a grant but never allow one more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from drakit.controller.noexecute.census import DeviceRef, DriverView, Request, bounded_total

__all__ = ["Budget", "Decider", "Grant", "Plan", "cluster_cap"]


def cluster_cap(total_devices: int, percent: float) -> int:
    """Most devices that may hold NoExecute cluster-wide: ``percent`` of ``total_devices``
    rounded down, but at least one when the percentage is above 0 (so a small cluster can
    evict at all); 0 turns NoExecute off."""
    if percent <= 0 or total_devices <= 0:
        return 0
    return max(1, math.floor(total_devices * percent / 100))


@dataclass(frozen=True)
class Budget:
    """The limits of one driver's NoExecute budget and how long absences are bridged."""

    per_node: int = 1
    percent: float = 10.0
    #: Seconds a grant outlives the disappearance of its device from the slices.
    forget_after: float = 600.0

    def __post_init__(self) -> None:
        if self.per_node < 0:
            raise ValueError("the per-node NoExecute budget must not be negative")
        if not 0 <= self.percent <= 100:
            raise ValueError("the cluster-wide NoExecute budget must be a percentage in [0, 100]")
        if self.forget_after < 0:
            raise ValueError("forget_after must not be negative")


@dataclass(frozen=True)
class Grant:
    """A DeviceTaintRule that may be in effect: the device, its node (recorded in the rule,
    so it counts for that node even while the device is not published) and its request's
    time (for logs)."""

    device: DeviceRef
    node: str
    since: float | None = None


@dataclass(frozen=True)
class Plan:
    """One decision: rules to create and to delete, requests left waiting, and the counts
    it was made with (cap: cluster-wide limit; held: grants that may be in effect)."""

    create: tuple[Request, ...] = ()
    delete: tuple[DeviceRef, ...] = ()
    waiting: tuple[Request, ...] = ()
    cap: int = 0
    held: int = 0


@dataclass
class Decider:
    """Decides for one driver; keeps only when each granted device was last published (in
    memory: a new leader starts without it, and so keeps absent grants longer, never
    shorter)."""

    budget: Budget
    _absent_since: dict[DeviceRef, float] = field(default_factory=dict)

    def decide(
        self,
        view: DriverView,
        grants: Mapping[DeviceRef, Grant],
        now: float,
        *,
        deleting: frozenset[DeviceRef] = frozenset(),
    ) -> Plan:
        """The plan for ``view`` given ``grants`` (every rule that may be in effect, those in
        ``deleting`` included: they count until they are gone) at monotonic time ``now``."""
        cap = cluster_cap(bounded_total(view.devices_per_node), self.budget.percent)
        delete = self._releases(view, grants, now, deleting)
        held = len(grants)
        per_node: dict[str, int] = {}
        for grant in grants.values():
            per_node[grant.node] = per_node.get(grant.node, 0) + 1
        create: list[Request] = []
        waiting: list[Request] = []
        for request in sorted(
            (r for ref, r in view.requests.items() if ref not in grants), key=Request.rank
        ):
            if held < cap and per_node.get(request.node, 0) < self.budget.per_node:
                create.append(request)
                held += 1
                per_node[request.node] = per_node.get(request.node, 0) + 1
            else:
                waiting.append(request)
        return Plan(tuple(create), tuple(delete), tuple(waiting), cap, held)

    def _releases(
        self,
        view: DriverView,
        grants: Mapping[DeviceRef, Grant],
        now: float,
        deleting: frozenset[DeviceRef],
    ) -> list[DeviceRef]:
        """Grants whose device recovered, or has not been published for ``forget_after``."""
        release: list[DeviceRef] = []
        for ref in sorted(grants):
            if ref in view.requests or ref[0] in view.conflicted_pools:
                # Still asked for; or in a pool that another node also publishes, whose
                # device's own request cannot be told apart: kept either way.
                self._absent_since.pop(ref, None)
                continue
            if ref in view.present:
                self._absent_since.pop(ref, None)
                if ref not in deleting:
                    release.append(ref)
                continue
            since = self._absent_since.setdefault(ref, now)
            if now - since >= self.budget.forget_after and ref not in deleting:
                release.append(ref)
        for ref in list(self._absent_since):
            if ref not in grants:
                del self._absent_since[ref]
        return release
