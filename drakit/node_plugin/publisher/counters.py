"""A pool's counter sets and the devices' counter consumptions, as a backend built them
(pure, no I/O).

Backends build partitionable devices in Python (``CounterSet``, ``Counter``,
``DeviceCounterConsumption``), and nothing checks the types of a frozen dataclass's fields:
``Counter("40Gi")`` or ``{"memory": 40}`` would reach the publisher, and the mistake would
surface as a crash or an apiserver refusal far from the line that made it. The plugin checks
them at start (``discover()``) and before each publish, so that a mistake is one line naming
the counter set or device, the field and the reason, in Python's names (what the author
wrote). Also checked: the API rules the apiserver would apply to these fields (names are
RFC 1123 labels, counter maps are neither empty nor too long), and the rule no single slice
can show: every counter a device consumes exists in its pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from drakit.allocator.model import Counter, CounterSet, Device, DeviceCounterConsumption
from drakit.allocator.quantity import Quantity
from drakit.allocator.validation import (
    MAX_COUNTER_CONSUMPTIONS_PER_DEVICE,
    MAX_COUNTERS_PER_CONSUMPTION,
    MAX_COUNTERS_PER_SET,
    dns_label_problem,
)

__all__ = ["counter_problems"]


def counter_problems(devices: Sequence[Device], counter_sets: Sequence[object]) -> list[str]:
    """Every problem of ``counter_sets`` (the pool's ``shared_counters``) and of the devices'
    ``consumes_counters``, one line each; empty when the pool's counters are sound."""
    reasons: list[str] = []
    sets: dict[str, CounterSet] = {}
    for index, counter_set in enumerate(counter_sets):
        if not isinstance(counter_set, CounterSet):
            reasons.append(f"shared_counters[{index}] is {_kind(counter_set)}, not CounterSet")
            continue
        where = f"counter set {counter_set.name!r}"
        reasons.extend(_name_problems(where, "name", counter_set.name))
        if counter_set.name in sets:
            reasons.append(f"duplicate counter set {counter_set.name!r}")
        sets[counter_set.name] = counter_set
        reasons.extend(
            _map_problems(where, counter_set.counters, MAX_COUNTERS_PER_SET, check_names=True)
        )
    for device in devices:
        reasons.extend(_consumption_problems(device, sets))
    return reasons


def _consumption_problems(device: Device, sets: Mapping[str, CounterSet]) -> Iterable[str]:
    uses = device.consumes_counters
    if not uses:
        return
    where = f"device {device.name!r}"
    if not isinstance(uses, tuple | list):
        yield f"{where}: consumes_counters is {_kind(uses)}, not a tuple of consumptions"
        return
    if len(uses) > MAX_COUNTER_CONSUMPTIONS_PER_DEVICE:
        yield (
            f"{where}: consumes_counters has {len(uses)} entries, at most "
            f"{MAX_COUNTER_CONSUMPTIONS_PER_DEVICE} are allowed"
        )
    seen: set[str] = set()
    for index, use in enumerate(uses):
        if not isinstance(use, DeviceCounterConsumption):
            kind = _kind(use)
            yield f"{where}: consumes_counters[{index}] is {kind}, not DeviceCounterConsumption"
            continue
        if use.counter_set in seen:
            yield f"{where}: counter set {use.counter_set!r} is consumed twice"
        seen.add(use.counter_set)
        target = sets.get(use.counter_set)
        if target is None:
            yield (
                f"{where}: consumesCounters names unknown counter set {use.counter_set!r}"
                if use.counter_set
                else f"{where}: consumes_counters[{index}].counter_set must not be empty"
            )
            continue
        # No name rules here: a consumed counter must be in the set, whose names are checked.
        problems = list(
            _map_problems(
                f"{where}: consumption of {use.counter_set!r}",
                use.counters,
                MAX_COUNTERS_PER_CONSUMPTION,
            )
        )
        yield from problems
        if not problems:
            yield from (
                f"{where}: counter {name!r} is not in counter set {target.name!r}"
                for name in use.counters
                if name not in target.counters
            )


def _map_problems(
    where: str, counters: object, limit: int, *, check_names: bool = False
) -> Iterable[str]:
    """A ``counters`` field: a mapping of 1 to ``limit`` names (with ``check_names``,
    RFC 1123 labels) to :class:`Counter` amounts (:class:`Quantity`)."""
    if not isinstance(counters, Mapping):
        yield f"{where}: counters is {_kind(counters)}, not a mapping of names to Counter"
        return
    if not counters:
        yield f"{where}: counters must not be empty"
    if len(counters) > limit:
        yield f"{where}: counters has {len(counters)} entries, at most {limit} are allowed"
    for name, counter in counters.items():
        if not isinstance(name, str):
            yield f"{where}: counter name {name!r} is {_kind(name)}, not str"
            continue
        if check_names:
            yield from _name_problems(where, f"counter {name!r}", name)
        if not isinstance(counter, Counter):
            yield (
                f"{where}: counters[{name!r}] is {_kind(counter)}, not Counter "
                f"(Counter(Quantity.parse(...)))"
            )
        elif not isinstance(counter.value, Quantity):
            yield (
                f"{where}: counters[{name!r}].value is {_kind(counter.value)} "
                f"{counter.value!r}, not Quantity (Quantity.parse({str(counter.value)!r}))"
            )


def _name_problems(where: str, what: str, name: object) -> Iterable[str]:
    problem = dns_label_problem(name) if isinstance(name, str) else f"is {_kind(name)}, not str"
    if problem:
        yield f"{where}: {what} {problem}"


def _kind(value: object) -> str:
    return type(value).__name__
