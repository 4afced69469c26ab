"""Device usage: which device is where, who holds it, and how full each pool is.

Pure bookkeeping over ResourceSlices and ResourceClaims (model objects), shared by
``drakit devices`` and the controller's pool metrics so both count the same way:

* Only slices of a pool's newest generation count (older ones are being replaced), as in the
  allocator and in kube-controller-manager's ResourcePoolStatusRequest controller.
* A device is *held* by every claim whose ``status.allocation`` names it. Results with
  ``adminAccess: true`` observe a device without consuming it: they make a device
  ``admin-access`` only when nobody else holds it, and never count as allocated.
* A device is *allocated* when a non-admin result names it; a multi-allocatable device
  (``allowMultipleAllocations``) that is allocated is ``shared`` and reports the capacity
  left after the consumed capacity of all its shares.
* A device is *tainted* when it carries a ``NoSchedule`` or ``NoExecute`` taint (the effects
  that stop new allocations); *unhealthy* when one of those taints' key ends in
  ``/unhealthy`` (drakit's node plugin taints devices its backend reports Unhealthy).
* A device is *exhausted* when it consumes shared counters (a partition of a partitionable
  device) and one of them has less left than it needs: the pool's counter sets minus what
  its allocated devices consume (counters are pool-wide). Nothing can allocate it until
  another partition is freed, so it is not free.
* ``state`` is one word per device, first match wins: shared, allocated, admin-access,
  unhealthy, tainted, exhausted, free; ``unknown`` instead of free when the caller could not
  see every claim (a device held by a hidden claim looks free). An exhausted device stays
  exhausted then: hidden claims can only use more.

Pools are summarised per (node, driver, pool): devices total, allocated, tainted, exhausted
and free (neither allocated, tainted nor exhausted); shared counters consumed by allocated
devices vs the pool's counter sets; consumable capacity used vs total over multi-allocatable
devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from drakit.allocator.model import (
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    Device,
    DeviceID,
    ResourceClaim,
    ResourceSlice,
)
from drakit.allocator.quantity import Quantity

__all__ = [
    "ALL_NODES",
    "NOEXECUTE_REQUEST_TAINT_SUFFIX",
    "STATES",
    "CapacityUse",
    "DeviceUsage",
    "Holder",
    "PoolSummary",
    "UsageView",
    "build_usage",
    "capacity_use",
    "is_blocking_taint",
    "is_unhealthy_taint",
]

#: The node column of devices that are not bound to one node.
ALL_NODES = "<all nodes>"
SELECTED_NODES = "<node selector>"
STATES = (
    "free", "allocated", "shared", "admin-access", "tainted", "unhealthy", "exhausted", "unknown",
)  # fmt: skip
UNHEALTHY_TAINT_SUFFIX = "/unhealthy"
#: drakit's node plugin asks the controller's NoExecute budget for a device with a taint of
#: this key suffix and effect None (``<driver>/noexecute-request``; docs/health.md).
NOEXECUTE_REQUEST_TAINT_SUFFIX = "/noexecute-request"


def is_blocking_taint(effect: str) -> bool:
    """True for the taint effects that stop new allocations of a device."""
    return effect in (TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE)


def is_unhealthy_taint(key: str) -> bool:
    """True for the health taint drakit's publisher sets (``<driver>/unhealthy``)."""
    return key.endswith(UNHEALTHY_TAINT_SUFFIX)


@dataclass(frozen=True)
class Holder:
    """One claim's hold on a device: the claim, the pods it is reserved for, and how."""

    namespace: str
    name: str
    pods: tuple[str, ...]
    admin_access: bool
    share_id: str | None = None
    consumed: Mapping[str, Quantity] = field(default_factory=dict)

    @property
    def claim(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class CapacityUse:
    """One counter or capacity: how much is used of how much."""

    name: str
    used: Quantity
    total: Quantity

    @property
    def left(self) -> Quantity:
        return self.total - self.used


@dataclass(frozen=True)
class DeviceUsage:
    """One device and who holds it."""

    node: str
    driver: str
    pool: str
    device: str
    state: str
    holders: tuple[Holder, ...]
    #: ``key=value:effect`` of every taint.
    taints: tuple[str, ...]
    #: True when a taint stops new allocations (NoSchedule or NoExecute).
    blocked: bool
    #: Multi-allocatable devices only: consumed vs total per capacity name.
    capacity: tuple[CapacityUse, ...]
    #: What this device draws from its pool's shared counters: ``(set/counter, amount)``.
    counters: tuple[tuple[str, Quantity], ...]
    slice: str
    #: Exhausted devices only: each counter with less left than the device needs, as
    #: ``(set/counter, needed, left)``.
    short: tuple[tuple[str, Quantity, Quantity], ...] = ()

    @property
    def id(self) -> DeviceID:
        return DeviceID(self.driver, self.pool, self.device)


@dataclass(frozen=True)
class PoolSummary:
    """How full one pool is on one node. ``free`` is None when claims were hidden;
    ``exhausted`` counts the devices neither allocated nor tainted whose shared counters are
    used up (upstream's pool status counts them as available)."""

    node: str
    driver: str
    pool: str
    total: int
    allocated: int
    tainted: int
    free: int | None
    unknown: int
    counters: tuple[CapacityUse, ...]  # name is ``counterSet/counter``
    capacity: tuple[CapacityUse, ...]  # summed over multi-allocatable devices
    slices: int
    incomplete: bool
    exhausted: int = 0


@dataclass(frozen=True)
class UsageView:
    devices: tuple[DeviceUsage, ...]
    pools: tuple[PoolSummary, ...]


def build_usage(
    slices: Iterable[ResourceSlice],
    claims: Iterable[ResourceClaim],
    *,
    all_claims_visible: bool = True,
) -> UsageView:
    """The device table and pool summaries for ``slices`` as held by ``claims``.

    ``all_claims_visible=False`` says ``claims`` may miss some allocations (the caller could
    not list every namespace): unheld devices are then ``unknown``, not ``free``.
    """
    current = _newest_generation(slices)
    holders = _holders_by_device(claims)
    devices: list[DeviceUsage] = []
    for s in current:
        for d in s.devices:
            devices.append(
                _device_usage(s, d, holders.get(DeviceID(s.driver, s.pool.name, d.name), []))
            )
    devices = _mark_exhausted(devices, _counters_left(current, devices))
    if not all_claims_visible:
        devices = [_unknown_if_free(u) for u in devices]
    devices.sort(key=lambda u: (u.node, u.driver, u.pool, u.device))
    return UsageView(tuple(devices), tuple(_summaries(current, devices)))


def _newest_generation(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool.name)
        newest[key] = max(newest.get(key, s.pool.generation), s.pool.generation)
    return [s for s in slices if s.pool.generation == newest[(s.driver, s.pool.name)]]


def _holders_by_device(claims: Iterable[ResourceClaim]) -> dict[DeviceID, list[Holder]]:
    out: dict[DeviceID, list[Holder]] = {}
    for claim in claims:
        allocation = claim.status.allocation
        if allocation is None:
            continue
        pods = tuple(
            r.name if r.resource == "pods" and not r.api_group else f"{r.resource}/{r.name}"
            for r in claim.status.reserved_for
        )
        for r in allocation.devices.results:
            out.setdefault(r.device_id, []).append(
                Holder(
                    namespace=claim.namespace,
                    name=claim.name,
                    pods=pods,
                    admin_access=bool(r.admin_access),
                    share_id=r.share_id,
                    consumed=dict(r.consumed_capacity),
                )
            )
    for held in out.values():
        held.sort(key=lambda h: (h.namespace, h.name, h.share_id or ""))
    return out


def _node_of(s: ResourceSlice, d: Device) -> str:
    spec = s.spec
    if d.node_name:
        return d.node_name
    if d.all_nodes:
        return ALL_NODES
    if d.node_selector is not None:
        return SELECTED_NODES
    if spec.node_name:
        return spec.node_name
    if spec.all_nodes:
        return ALL_NODES
    return SELECTED_NODES


def _device_usage(s: ResourceSlice, d: Device, held: list[Holder]) -> DeviceUsage:
    consumers = [h for h in held if not h.admin_access]
    blocking = [t for t in d.taints if is_blocking_taint(t.effect)]
    capacity: tuple[CapacityUse, ...] = ()
    if d.multi_allocatable:
        capacity = tuple(
            CapacityUse(name, _sum(cap.value, (h.consumed.get(name) for h in consumers)), cap.value)
            for name, cap in sorted(d.capacity.items())
        )
    if consumers:
        state = "shared" if d.multi_allocatable else "allocated"
    elif held:
        state = "admin-access"
    elif any(is_unhealthy_taint(t.key) for t in blocking):
        state = "unhealthy"
    elif blocking:
        state = "tainted"
    else:
        state = "free"
    return DeviceUsage(
        node=_node_of(s, d),
        driver=s.driver,
        pool=s.pool.name,
        device=d.name,
        state=state,
        holders=tuple(held),
        taints=tuple(
            f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in d.taints
        ),
        capacity=capacity,
        blocked=bool(blocking),
        counters=tuple(
            (f"{cc.counter_set}/{name}", c.value)
            for cc in d.consumes_counters
            for name, c in sorted(cc.counters.items())
        ),
        slice=s.name,
    )


#: (driver, pool) -> ``set/counter`` -> amount not consumed by the pool's allocated devices.
CountersLeft = dict[tuple[str, str], dict[str, Quantity]]


def _counters_left(slices: list[ResourceSlice], devices: list[DeviceUsage]) -> CountersLeft:
    """What each pool's counter sets have left after its allocated devices (a counter set's
    name is unique in its pool, whichever slice publishes it)."""
    left: CountersLeft = {}
    for s in slices:
        for cs in s.spec.shared_counters:
            pool = left.setdefault((s.driver, s.pool.name), {})
            for name, counter in cs.counters.items():
                pool[f"{cs.name}/{name}"] = counter.value
    for u in devices:
        if u.state not in ("allocated", "shared"):
            continue
        pool = left.get((u.driver, u.pool), {})
        for key, amount in u.counters:
            if key in pool:
                pool[key] = pool[key] - amount
    return left


def _mark_exhausted(devices: list[DeviceUsage], left: CountersLeft) -> list[DeviceUsage]:
    """Free devices that need more of a counter than their pool has left: ``exhausted``."""
    out = []
    for u in devices:
        pool = left.get((u.driver, u.pool), {})
        short = tuple(
            (key, need, pool[key]) for key, need in u.counters if key in pool and need > pool[key]
        )
        out.append(replace(u, state="exhausted", short=short) if u.state == "free" and short else u)
    return out


def _unknown_if_free(u: DeviceUsage) -> DeviceUsage:
    if u.state != "free":
        return u
    return replace(u, state="unknown")


def _sum(like: Quantity, values: Iterable[Quantity | None]) -> Quantity:
    """The sum of ``values``, printed in the format (binary or decimal) of ``like``."""
    total = Quantity(0, like.format)
    for v in values:
        if v is not None:
            total = total + v
    return total


def _summaries(slices: list[ResourceSlice], devices: list[DeviceUsage]) -> list[PoolSummary]:
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        by_pool.setdefault((s.driver, s.pool.name), []).append(s)
    rows: dict[tuple[str, str, str], list[DeviceUsage]] = {}
    for u in devices:
        rows.setdefault((u.node, u.driver, u.pool), []).append(u)
    # A pool with counters but no devices on a node (a counters-only slice) still gets a row.
    for (driver, pool), pool_slices in by_pool.items():
        for s in pool_slices:
            if s.spec.shared_counters and not s.devices:
                rows.setdefault((_slice_node(s), driver, pool), [])
    out = []
    for (node, driver, pool), members in sorted(rows.items()):
        pool_slices = by_pool.get((driver, pool), [])
        out.append(_summary(node, driver, pool, members, pool_slices))
    return out


def _slice_node(s: ResourceSlice) -> str:
    if s.spec.node_name:
        return s.spec.node_name
    return ALL_NODES if s.spec.all_nodes else SELECTED_NODES


def _summary(
    node: str, driver: str, pool: str, members: list[DeviceUsage], pool_slices: list[ResourceSlice]
) -> PoolSummary:
    allocated = sum(1 for u in members if u.state in ("allocated", "shared"))
    tainted = sum(1 for u in members if u.blocked)
    unknown = sum(1 for u in members if u.state == "unknown")
    exhausted = sum(1 for u in members if u.state == "exhausted")
    neither = sum(
        1 for u in members if u.state not in ("allocated", "shared", "exhausted") and not u.blocked
    )
    expected = max((s.pool.resource_slice_count for s in pool_slices), default=0)
    return PoolSummary(
        node=node,
        driver=driver,
        pool=pool,
        total=len(members),
        allocated=allocated,
        tainted=tainted,
        free=None if unknown else neither,
        unknown=unknown,
        counters=_counter_use(members, pool_slices, node),
        capacity=capacity_use(members),
        slices=len(pool_slices),
        incomplete=len(pool_slices) < expected,
        exhausted=exhausted,
    )


def _counter_use(
    members: list[DeviceUsage], pool_slices: list[ResourceSlice], node: str
) -> tuple[CapacityUse, ...]:
    totals: dict[str, Quantity] = {}
    for s in pool_slices:
        if (
            s.spec.shared_counters
            and _slice_node(s) != node
            and any(_slice_node(o) == node for o in pool_slices)
        ):
            continue  # counters published for another node's part of the pool
        for cs in s.spec.shared_counters:
            for name, counter in cs.counters.items():
                totals[f"{cs.name}/{name}"] = counter.value
    used: dict[str, list[Quantity]] = {}
    for u in members:
        if u.state in ("allocated", "shared"):
            for key, amount in u.counters:
                used.setdefault(key, []).append(amount)
    out = []
    for name in sorted(set(totals) | set(used)):
        total = totals.get(name) or used[name][0] - used[name][0]
        out.append(CapacityUse(name, _sum(total, used.get(name, ())), total))
    return tuple(out)


def capacity_use(members: Iterable[DeviceUsage]) -> tuple[CapacityUse, ...]:
    """Consumable capacity of ``members`` summed per capacity name (sorted by name), each sum
    printed in the format of the first device's total."""
    used: dict[str, list[Quantity]] = {}
    total: dict[str, list[Quantity]] = {}
    for u in members:
        for c in u.capacity:
            used.setdefault(c.name, []).append(c.used)
            total.setdefault(c.name, []).append(c.total)
    return tuple(
        CapacityUse(n, _sum(total[n][0], used[n]), _sum(total[n][0], total[n]))
        for n in sorted(total)
    )
