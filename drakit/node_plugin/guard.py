"""The double-use guard: never prepare a device another claim on this node holds.

The scheduler should never hand one device to two claims, but force-deleted
pods, lost nodes and stale claims make it happen; the guard refuses such a
claim with a per-claim error instead of giving two pods one GPU.

It counts exactly as the scheduler does, with the allocator's own
bookkeeping (:class:`drakit.allocator.allocated.AllocatedState`) built from the
claims this node has prepared (or started preparing):

* a device held by another claim is refused, unless it allows multiple
  allocations and every holder (including this claim) took a share
  (``shareID``) and the device's capacity is not exceeded;
* admin-access results never conflict;
* partitionable devices: the counters consumed by all held devices of a
  shared counter set, plus this claim's, must fit the set.

A device the backend does not describe is refused too: preparing it would fail
anyway, and the guard could not check it.

Each refusal has two texts: ``public`` for the claim's error and Event (its
owner sees it, so it never names another claim) and ``detail`` for the
plugin's log (it names the holders, for the node's operator).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drakit.allocator.allocated import AllocatedState
from drakit.allocator.model import Device, DeviceID, DeviceRequestAllocationResult, ResourceClaim
from drakit.allocator.quantity import Quantity, nanos
from drakit.node_plugin.checkpoint import ClaimEntry
from drakit.plugin.backend import PoolDescription
from drakit.plugin.claims import ClaimRef


def claim_from_results(
    uid: str, namespace: str, name: str, results: Iterable[Mapping[str, Any]]
) -> ResourceClaim:
    """A minimal allocated ResourceClaim carrying only ``results`` (for the bookkeeping)."""
    return ResourceClaim.from_dict(
        {
            "metadata": {"uid": uid, "namespace": namespace, "name": name},
            "spec": {"devices": {}},
            "status": {"allocation": {"devices": {"results": [dict(r) for r in results]}}},
        }
    )


class Inventory:
    """The backend's devices and counter sets, indexed for the guard."""

    def __init__(self, driver: str, pools: Sequence[PoolDescription]) -> None:
        self.devices: dict[DeviceID, Device] = {}
        self.counter_sets: dict[tuple[str, str], dict[str, Quantity]] = {}
        for pool in pools:
            for device in pool.devices:
                self.devices[DeviceID(driver, pool.name, device.name)] = device
            for counter_set in pool.shared_counters:
                self.counter_sets[(pool.name, counter_set.name)] = {
                    name: counter.value for name, counter in counter_set.counters.items()
                }

    def capacities(self) -> dict[DeviceID, dict[str, Quantity]]:
        return {
            dev: {name: cap.value for name, cap in device.capacity.items()}
            for dev, device in self.devices.items()
            if device.capacity
        }


@dataclass(frozen=True)
class GuardConflict:
    """One reason a claim cannot be prepared: ``public`` for the claim, ``detail`` for logs."""

    public: str
    detail: str


def _same(text: str) -> GuardConflict:
    return GuardConflict(public=text, detail=text)


def find_conflicts(
    driver: str,
    claim: ClaimRef,
    results: Sequence[DeviceRequestAllocationResult],
    held_by_others: Sequence[ClaimEntry],
    inventory: Inventory,
) -> list[GuardConflict]:
    """Why ``claim`` (its ``results`` of ``driver``) cannot be prepared now; empty = safe."""
    problems = [
        _same(f"request {r.request}: device {r.pool}/{r.device} is not a device of this node")
        for r in results
        if not r.admin_access and DeviceID(driver, r.pool, r.device) not in inventory.devices
    ]
    if problems:
        return problems
    if not may_conflict(driver, results, held_by_others, inventory):
        return []
    as_claim = claim_from_results(
        claim.uid, claim.namespace, claim.name, [r.to_dict() for r in results]
    )
    return bookkept_conflicts(driver, as_claim, held_by_others, inventory)


def may_conflict(
    driver: str,
    results: Sequence[DeviceRequestAllocationResult],
    held_by_others: Sequence[ClaimEntry],
    inventory: Inventory,
) -> bool:
    """False only when :func:`bookkept_conflicts` must find nothing: no device of
    ``results`` is held by another claim, none consumes capacity (which can be exceeded
    by the claim alone) and none consumes counters of a shared counter set.

    The common case on a node, checked without decoding every prepared claim into the
    allocator's bookkeeping: that made each prepare O(claims prepared on the node).
    """
    wanted = [r for r in results if not r.admin_access]
    if not wanted:
        return False
    for r in wanted:
        if r.consumed_capacity:
            return True
        device = inventory.devices.get(DeviceID(driver, r.pool, r.device))
        if device is not None and device.consumes_counters:
            return True
    held = {
        (h.get("driver"), h.get("pool"), h.get("device"))
        for entry in held_by_others
        for h in entry.results
        if not h.get("adminAccess")
    }
    return any((driver, r.pool, r.device) in held for r in wanted)


def bookkept_conflicts(
    driver: str, claim: ResourceClaim, held_by_others: Sequence[ClaimEntry], inventory: Inventory
) -> list[GuardConflict]:
    """The conflicts the allocator's bookkeeping finds for ``claim`` (an allocated claim
    whose devices ``inventory`` knows)."""
    state = AllocatedState(
        claim_from_results(e.uid, e.namespace, e.name, e.results) for e in held_by_others
    )
    problems = [
        GuardConflict(
            public=f"request {c.request}: device {c.device}: {c.reason} "
            "(held by another claim on this node)",
            detail=str(c),
        )
        for c in state.conflicts(claim, inventory.capacities())
    ]
    if problems:
        return problems
    held = [DeviceRequestAllocationResult.from_dict(r) for e in held_by_others for r in e.results]
    allocation = claim.status.allocation
    wanted = list(allocation.devices.results) if allocation else []
    return [_same(p) for p in _counter_conflicts(driver, held, wanted, inventory)]


def _counter_conflicts(
    driver: str,
    held: Sequence[DeviceRequestAllocationResult],
    wanted: Sequence[DeviceRequestAllocationResult],
    inventory: Inventory,
) -> list[str]:
    """Counters of shared counter sets consumed by all held devices plus the wanted ones."""
    held_devices = {DeviceID(driver, r.pool, r.device) for r in held if not r.admin_access}
    new_devices = {DeviceID(driver, r.pool, r.device) for r in wanted if not r.admin_access}
    new_devices -= held_devices  # a shared device consumes its counters once
    if not any(inventory.devices[d].consumes_counters for d in new_devices):
        return []
    used: dict[tuple[str, str, str], int] = {}
    for dev in held_devices | new_devices:
        device = inventory.devices.get(dev)
        for consumption in device.consumes_counters if device else ():
            for name, counter in consumption.counters.items():
                key = (dev.pool, consumption.counter_set, name)
                used[key] = used.get(key, 0) + nanos(counter.value)
    problems = []
    for (pool, counter_set, name), amount in sorted(used.items()):
        total = inventory.counter_sets.get((pool, counter_set), {}).get(name)
        if total is not None and amount > nanos(total):
            problems.append(
                f"counter {name} of counter set {pool}/{counter_set} would be exceeded "
                f"(devices of this claim overlap devices prepared for other claims)"
            )
    return problems
