"""Allocated state: which devices, shares and capacity existing allocations hold.

Built from allocated ResourceClaims the way the kube-scheduler builds it:

* results with ``adminAccess: true`` are ignored (admin access never blocks anyone);
* a result with a ``shareID`` (a multi-allocatable device) records a *shared device ID*
  ``(driver, pool, device, shareID)`` and adds its ``consumedCapacity`` to the device's
  aggregate (when consumable capacity is on);
* every other result marks its device as *dedicated*.

The allocator reads it; the node plugin's double-use guard uses :meth:`conflicts` to refuse
preparing a claim whose devices another claim already holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from drakit.allocator.model import (
    AllocationResult,
    DeviceID,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from drakit.allocator.quantity import NANO, Quantity, nanos

__all__ = ["AllocatedState", "Conflict", "SharedDeviceID"]

_K = TypeVar("_K")

# Process-wide source of pool stamps (see AllocatedState.pool_stamp): unique across all
# states and their copies. next() on a count is atomic in CPython.
_STAMPS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class SharedDeviceID:
    driver: str
    pool: str
    device: str
    share_id: str

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class Conflict:
    """Why a claim's result cannot be added: the device and the claims already holding it."""

    request: str
    device: DeviceID
    reason: str
    holders: tuple[str, ...]

    def __str__(self) -> str:
        holders = ", ".join(self.holders) or "another claim"
        return f"request {self.request}: device {self.device}: {self.reason} (held by {holders})"


def _conflict(
    r: DeviceRequestAllocationResult, reason: str, holders: Iterable[str], names: dict[str, str]
) -> Conflict:
    """A conflict of result ``r`` with ``holders`` (claim keys, shown by name where known)."""
    return Conflict(r.request, r.device_id, reason, tuple(sorted(names.get(h, h) for h in holders)))


class AllocatedState:
    """Mutable bookkeeping of allocated devices, keyed by claim UID.

    ``add``/``remove`` are idempotent per claim UID (adding a claim again replaces its
    previous contribution). Not thread-safe: guard it with the caller's lock.

    The values of the maps (holder sets, capacity aggregates) are never changed in place,
    only replaced, so :meth:`copy` shares them: a snapshot costs one shallow copy per map,
    not one new set per allocated device (a scheduler takes one per pod).
    """

    def __init__(
        self, claims: Iterable[ResourceClaim] = (), *, consumable_capacity: bool = True
    ) -> None:
        self._consumable = consumable_capacity
        self._by_claim: dict[str, tuple[str, AllocationResult]] = {}
        self.dedicated: dict[DeviceID, frozenset[str]] = {}
        self.shared: dict[SharedDeviceID, frozenset[str]] = {}
        self.shared_devices: dict[DeviceID, int] = {}
        self.capacity: dict[DeviceID, dict[str, int]] = {}
        self._pool_stamps: dict[tuple[str, str], int] = {}
        for claim in claims:
            self.add(claim)

    def copy(self) -> AllocatedState:
        """An independent copy (a snapshot to allocate against without holding a lock)."""
        new = AllocatedState.__new__(AllocatedState)
        new._consumable = self._consumable
        new._by_claim = dict(self._by_claim)
        new.dedicated = dict(self.dedicated)
        new.shared = dict(self.shared)
        new.shared_devices = dict(self.shared_devices)
        new.capacity = dict(self.capacity)  # aggregates are replaced, never changed in place
        new._pool_stamps = dict(self._pool_stamps)
        return new

    # -- mutation -------------------------------------------------------------------------
    def add(self, claim: ResourceClaim) -> None:
        """Record the allocation of ``claim`` (no-op without status.allocation)."""
        key = _claim_key(claim)
        self.remove(key)
        allocation = claim.status.allocation
        if allocation is None:
            return
        self._by_claim[key] = (claim.key, allocation)
        for r in allocation.devices.results:
            self._apply(r, key, +1)

    def remove(self, claim_uid: str) -> None:
        """Forget the allocation recorded for ``claim_uid`` (no-op when unknown)."""
        entry = self._by_claim.pop(claim_uid, None)
        if entry is None:
            return
        for r in entry[1].devices.results:
            self._apply(r, claim_uid, -1)

    def _apply(self, r: DeviceRequestAllocationResult, key: str, sign: int) -> None:
        if r.admin_access:
            return
        self._pool_stamps[(r.driver, r.pool)] = next(_STAMPS)
        dev = DeviceID(r.driver, r.pool, r.device)
        if r.share_id is not None and self._consumable:
            sid = SharedDeviceID(r.driver, r.pool, r.device, r.share_id)
            _update_holders(self.shared, sid, key, sign)
            if sign > 0:
                self.shared_devices[dev] = self.shared_devices.get(dev, 0) + 1
            else:
                left = self.shared_devices.get(dev, 0) - 1
                if left > 0:
                    self.shared_devices[dev] = left
                else:
                    self.shared_devices.pop(dev, None)
            if r.consumed_capacity:
                agg = dict(self.capacity.get(dev, {}))
                for name, q in r.consumed_capacity.items():
                    agg[name] = agg.get(name, 0) + sign * nanos(q)
                if (
                    sign < 0
                    and all(v == 0 for v in agg.values())
                    and dev not in self.shared_devices
                ):
                    self.capacity.pop(dev, None)
                else:
                    self.capacity[dev] = agg
            return
        _update_holders(self.dedicated, dev, key, sign)

    # -- queries --------------------------------------------------------------------------
    def pool_stamp(self, pool: tuple[str, str]) -> int:
        """A number that identifies what this state records about the devices of ``pool``
        (driver, pool name): two states (copies included) with the same stamp for a pool
        record the same devices of it as allocated, with the same shares and capacity.
        0 means nothing of the pool was ever recorded. Every change gets a new stamp from
        a process-wide counter, so diverging copies never share one."""
        return self._pool_stamps.get(pool, 0)

    def is_dedicated(self, device: DeviceID) -> bool:
        return device in self.dedicated

    def is_allocated(self, device: DeviceID) -> bool:
        """Dedicated, shared, or with consumed capacity (Kubernetes IsDeviceAllocated)."""
        return device in self.dedicated or device in self.shared_devices or device in self.capacity

    def capacity_in_use(self, device: DeviceID) -> bool:
        return device in self.capacity or device in self.shared_devices

    def consumed_capacity(self, device: DeviceID) -> dict[str, Quantity]:
        """Aggregate consumed capacity of a shared device."""
        return {n: Quantity(Fraction(v, NANO)) for n, v in self.capacity.get(device, {}).items()}

    def claims(self) -> list[str]:
        """UIDs (or namespace/name when a claim has no UID) of the recorded claims."""
        return list(self._by_claim)

    def conflicts(
        self, claim: ResourceClaim, capacities: dict[DeviceID, dict[str, Quantity]] | None = None
    ) -> list[Conflict]:
        """Reasons why ``claim``'s allocation cannot be added without double use.

        Empty list = safe. The claim itself (same UID) is never a conflict with itself.
        ``capacities`` (device -> capacity name -> total) enables the capacity check for
        shared devices; without it only dedicated/shared exclusivity is checked.
        """
        allocation = claim.status.allocation
        if allocation is None:
            return []
        own = _claim_key(claim)
        names = {k: v[0] for k, v in self._by_claim.items()}
        out: list[Conflict] = []
        for r in allocation.devices.results:
            if r.admin_access:
                continue
            dev = DeviceID(r.driver, r.pool, r.device)
            dedicated = {h for h in self.dedicated.get(dev, ()) if h != own}
            if dedicated:
                out.append(_conflict(r, "device is allocated exclusively", dedicated, names))
                continue
            sharers = {
                h for sid, hs in self.shared.items() if sid.device_id == dev for h in hs if h != own
            }
            if r.share_id is None or not self._consumable:
                if sharers:
                    out.append(_conflict(r, "device is shared by other claims", sharers, names))
                continue
            share = SharedDeviceID(r.driver, r.pool, r.device, r.share_id)
            same_share = {h for h in self.shared.get(share, ()) if h != own}
            if same_share:
                out.append(_conflict(r, f"share {r.share_id} is already in use", same_share, names))
                continue
            if capacities and dev in capacities and r.consumed_capacity:
                out.extend(
                    self._capacity_conflicts(
                        r, dev=dev, own=own, totals=capacities[dev], sharers=sharers, names=names
                    )
                )
        return out

    def _capacity_conflicts(
        self,
        r: DeviceRequestAllocationResult,
        *,
        dev: DeviceID,
        own: str,
        totals: dict[str, Quantity],
        sharers: set[str],
        names: dict[str, str],
    ) -> list[Conflict]:
        used = dict(self.capacity.get(dev, {}))
        mine = self._by_claim.get(own)
        if mine is not None:  # do not count the claim's own earlier contribution twice
            for old in mine[1].devices.results:
                if old.device_id == dev and old.share_id is not None:
                    for n, q in old.consumed_capacity.items():
                        used[n] = used.get(n, 0) - nanos(q)
        out = []
        for name, q in r.consumed_capacity.items():
            total = totals.get(name)
            if total is not None and used.get(name, 0) + nanos(q) > nanos(total):
                out.append(_conflict(r, f"capacity {name} would be exceeded", sharers, names))
        return out


def _update_holders(holders: dict[_K, frozenset[str]], device: _K, key: str, sign: int) -> None:
    """Add (``sign`` > 0) or drop ``key`` among the holders of ``device``; the set is
    replaced, never changed in place (snapshots share it)."""
    current = holders.get(device, frozenset())
    if sign > 0:
        holders[device] = current | {key}
        return
    left = current - {key}
    if left:
        holders[device] = left
    else:
        holders.pop(device, None)


def _claim_key(claim: ResourceClaim) -> str:
    return claim.metadata.uid or claim.key
