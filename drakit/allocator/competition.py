"""What requests that fit on their own compete for when they do not fit together.

:func:`drakit.allocator.explain.explain` finds, per request, the devices that would do on
their own. When every request has enough of them and the allocation still fails, the
requests (of one claim or of the claims allocated together) get in each other's way. This
module names how, from :class:`Demand` s (a request's count and its suitable devices):

* **Shared counters** (:func:`counter_shortages`): each device of a request consumes at least
  the least any of its suitable devices consumes of a counter, so the requests together
  consume at least the sum; when that is more than the counter sets have left (after the
  allocated devices), no choice of devices fits. Checked per counter set and per counter
  name over all the sets the requests draw that counter from (e.g. one set per NPU).
* **Devices** (:func:`device_shortages`): requests that together want more devices than
  the union of their suitable devices holds (Hall's condition), smallest groups first.
* Otherwise (:func:`overlaps`): which requests can use the same devices or draw on the same
  counter sets, the competition a search could not settle (with the claims' constraints).

Each finding is a sound reason (a lower bound, never a guess), so a message never blames
what is not to blame; what it cannot prove it states as overlap. Multi-allocatable devices
(shared by several allocations) and admin-access requests take nothing from the others and
are left out. Pure: no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from drakit.allocator.inventory import DeviceEntry
from drakit.allocator.quantity import DECIMAL_SI, Quantity

__all__ = [
    "MAX_SUBSET_DEMANDS",
    "CounterShortage",
    "Demand",
    "DeviceShortage",
    "counter_shortages",
    "device_shortages",
    "overlaps",
]

#: Up to this many demands every group is checked for a device shortage (2**n groups, each
#: a union of device sets); beyond it, pairs only, so that a pod with many requests costs
#: the controller's unschedulable message no more than a few hundred unions per node.
MAX_SUBSET_DEMANDS = 8
#: Devices named in a message before "and N more".
MAX_NAMED = 6

#: (driver, pool) -> counter set -> counter -> nano-units left.
CountersLeft = Callable[[tuple[str, str]], Mapping[str, Mapping[str, int]]]


@dataclass(frozen=True)
class Demand:
    """One request: ``count`` devices among ``devices`` (its suitable ones); ``label``
    names it in messages (``request gpu of claim ns/name``)."""

    label: str
    count: int
    devices: tuple[DeviceEntry, ...]


@dataclass(frozen=True)
class CounterShortage:
    """Requests whose devices need more of a counter than its sets have left."""

    pool: str
    counter_sets: tuple[str, ...]
    counter: str
    needed: Quantity
    left: Quantity
    #: (label, count, the least one suitable device of it consumes)
    shares: tuple[tuple[str, int, Quantity], ...]

    def text(self) -> str:
        sets = (
            f"counter set {self.counter_sets[0]}"
            if len(self.counter_sets) == 1
            else f"counter sets {', '.join(self.counter_sets)}"
        )
        parts = _and([f"{label} ({count} x {each})" for label, count, each in self.shares])
        verb = "needs" if len(self.shares) == 1 else "need"
        return (
            f"{sets} of pool {self.pool}, counter {self.counter}: {parts} {verb} at least "
            f"{self.needed}, {self.left} left"
        )


@dataclass(frozen=True)
class DeviceShortage:
    """Requests that together want more devices than any of them can use."""

    labels: tuple[str, ...]
    wanted: int
    devices: tuple[str, ...]

    def text(self) -> str:
        return (
            f"{_and(list(self.labels))} want {self.wanted} device(s) together, and only "
            f"{len(self.devices)} suit any of them: {_named(self.devices)}"
        )


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _named(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    more = len(names) - MAX_NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _scarce(demands: Sequence[Demand]) -> list[Demand]:
    """The demands that take something from the others: no multi-allocatable device among
    their suitable ones (a share leaves the device to other requests)."""
    return [d for d in demands if d.count > 0 and not any(e.multi for e in d.devices)]


# -- counters ------------------------------------------------------------------------------


def _drawn(device: DeviceEntry, counter_sets: Sequence[str], counter: str) -> int:
    return sum(
        amount
        for set_name, counters in device.counters
        if set_name in counter_sets
        for name, amount in counters
        if name == counter
    )


def _format_of(demands: Sequence[Demand], counter: str) -> str:
    for demand in demands:
        for entry in demand.devices:
            for cc in entry.device.consumes_counters:
                q = cc.counters.get(counter)
                if q is not None:
                    return q.value.format
    return DECIMAL_SI


def _quantity(nanos: int, fmt: str) -> Quantity:
    return Quantity(Fraction(nanos, 1_000_000_000), fmt)


def counter_shortages(demands: Sequence[Demand], left: CountersLeft) -> list[CounterShortage]:
    """Counters that the requests together need more of than is left, in pool, counter and
    set order; per counter name, a shortage over all its sets only when no single set shows
    one."""
    demands = _scarce(demands)
    drawn: dict[tuple[str, str], dict[str, set[str]]] = {}  # pool -> counter -> sets
    for demand in demands:
        for entry in demand.devices:
            for set_name, counters in entry.counters:
                for name, _ in counters:
                    drawn.setdefault(entry.pool_id, {}).setdefault(name, set()).add(set_name)
    out: list[CounterShortage] = []
    for pool_id in sorted(drawn):
        pool_left = left(pool_id)
        for counter, sets in sorted(drawn[pool_id].items()):
            known = sorted(s for s in sets if counter in pool_left.get(s, {}))
            found = [
                f
                for s in known
                if (f := _shortage(demands, pool_id, (s,), counter, pool_left)) is not None
            ]
            if not found and len(known) > 1:
                union = _shortage(demands, pool_id, tuple(known), counter, pool_left)
                found = [union] if union is not None else []
            out.extend(found)
    return out


def _shortage(
    demands: Sequence[Demand],
    pool_id: tuple[str, str],
    counter_sets: tuple[str, ...],
    counter: str,
    left: Mapping[str, Mapping[str, int]],
) -> CounterShortage | None:
    have = sum(left[s][counter] for s in counter_sets)
    needed = 0
    shares: list[tuple[str, int, int]] = []
    for demand in demands:
        least = min(
            (_drawn(e, counter_sets, counter) if e.pool_id == pool_id else 0)
            for e in demand.devices
        )
        if least > 0:
            needed += demand.count * least
            shares.append((demand.label, demand.count, least))
    if needed <= have:
        return None
    fmt = _format_of(demands, counter)
    return CounterShortage(
        pool="/".join(pool_id),
        counter_sets=counter_sets,
        counter=counter,
        needed=_quantity(needed, fmt),
        left=_quantity(have, fmt),
        shares=tuple((label, n, _quantity(each, fmt)) for label, n, each in shares),
    )


# -- devices -------------------------------------------------------------------------------


def device_shortages(demands: Sequence[Demand]) -> list[DeviceShortage]:
    """Groups of two or more requests that want more devices than the union of their
    suitable devices, smallest groups first; a group containing one already named is not
    named again."""
    demands = _scarce(demands)
    ids = [frozenset(e.id for e in d.devices) for d in demands]
    sizes = range(2, len(demands) + 1) if len(demands) <= MAX_SUBSET_DEMANDS else (2,)
    out: list[DeviceShortage] = []
    named: list[frozenset[int]] = []
    for size in sizes:
        for group in itertools.combinations(range(len(demands)), size):
            members = frozenset(group)
            if any(n <= members for n in named):
                continue
            union = frozenset().union(*(ids[i] for i in group))
            wanted = sum(demands[i].count for i in group)
            if wanted > len(union):
                named.append(members)
                out.append(
                    DeviceShortage(
                        labels=tuple(demands[i].label for i in group),
                        wanted=wanted,
                        devices=tuple(sorted(str(i) for i in union)),
                    )
                )
    return out


def overlaps(demands: Sequence[Demand]) -> list[tuple[tuple[str, str], str]]:
    """For each pair of requests with something in common: the two labels and a message
    naming the devices both can use and the counter sets both draw on (pool/set)."""
    demands = _scarce(demands)
    found = []
    for a, b in itertools.combinations(demands, 2):
        shared = sorted({str(e.id) for e in a.devices} & {str(e.id) for e in b.devices})
        sets_a = {(e.pool_id, s) for e in a.devices for s, _ in e.counters}
        sets_b = {(e.pool_id, s) for e in b.devices for s, _ in e.counters}
        common = sorted(f"{'/'.join(p)}/{s}" for p, s in sets_a & sets_b)
        what = []
        if shared:
            what.append(f"the same devices ({_named(shared)})")
        if common:
            what.append(f"the same counter sets ({_named(common)})")
        if what:
            found.append(
                ((a.label, b.label), f"{a.label} and {b.label} compete for {' and '.join(what)}")
            )
    return found
