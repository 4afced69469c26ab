"""Consumable capacity: how much of each device capacity a request consumes, and whether
it fits. All amounts are integer nano-units (see :func:`drakit.allocator.inventory.nanos`).

For every capacity of a device the consumed amount is the request's value for it, else the
request policy's ``default``, else the whole capacity. With a policy the requested amount
is rounded up first (``validRange``: to ``min``, then to the next ``step`` above ``min``,
in integer units, or milli-units with fractional ranges; ``validValues``: to the smallest
listed value not below it) and then checked (above ``max``, off-step, or not listed ⇒ no
fit; the unrequested default always passes). A device fits when persisted + in-flight +
this amount stays within the capacity value, for every capacity. A requested capacity the
device does not have means the device does not fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from drakit.allocator.model import CapacityRequestPolicyRange, DeviceCapacity
from drakit.allocator.quantity import NANO, Quantity, nanos

__all__ = [
    "CapacityError",
    "CapacityPlan",
    "capacity_plan",
    "consumed_capacity",
    "fits_capacity",
    "fits_plan",
]

INT64_MAX: Final = 2**63 - 1
MILLI: Final = NANO // 1000


class CapacityError(ValueError):
    """A request cannot be evaluated against a device's capacity (fatal, as upstream)."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _value(n: int) -> int:
    """Kubernetes ``Quantity.Value()``: rounded up to an integer."""
    return _ceil_div(n, NANO)


def _milli(n: int) -> int | None:
    """Exact milli-units, or None when not representable."""
    return n // MILLI if n % MILLI == 0 else None


def _use_milli(rng: CapacityRequestPolicyRange, fractional: bool) -> bool:
    if not fractional:
        return False
    for i, q in enumerate((rng.min, rng.max, rng.step)):
        if q is None:
            continue
        m = _milli(nanos(q))
        if m is None:
            return False
        if i == 2 and m < 1:
            return False
    return True


def _round_up_range(requested: int, rng: CapacityRequestPolicyRange, fractional: bool) -> int:
    assert rng.min is not None
    low = nanos(rng.min)
    if requested < low:
        return low
    if rng.step is None:
        return requested
    if _use_milli(rng, fractional):
        req_m = _milli(requested)
        if req_m is None:
            raise CapacityError("capacity request is not a representable milli value")
        step_m = _ceil_div(nanos(rng.step), MILLI)
        min_m = _ceil_div(low, MILLI)
        n = _ceil_div(req_m - min_m, step_m)
        if n > (INT64_MAX - min_m) // step_m:
            raise CapacityError("rounding the capacity request up passes the milli-value range")
        return (min_m + step_m * n) * MILLI
    if requested > INT64_MAX * NANO:
        raise CapacityError("capacity request exceeds the int64 range")
    req_i, step_i, min_i = _value(requested), _value(nanos(rng.step)), _value(low)
    if step_i <= 0:
        raise CapacityError("capacity request policy step must be positive")
    added = req_i - min_i  # >= 0: requested >= min
    n = added // step_i
    if added % step_i:
        n += 1
    if min_i >= 0 and n > (INT64_MAX - min_i) // step_i:
        raise CapacityError("rounding the capacity request up passes the int64 range")
    return (min_i + step_i * n) * NANO


def _consumed_one(
    requested: Quantity | None, cap: DeviceCapacity, fractional: bool
) -> tuple[int, bool]:
    """(amount, is_the_policy_default) for one capacity."""
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return nanos(policy.default), True
        return nanos(cap.value), False
    req = nanos(requested)
    if policy is None:
        return req, False
    same_as_default = policy.default is not None and requested.text == policy.default.text
    rng = policy.valid_range
    if rng is not None and rng.min is not None:
        # upstream compares Go structs with the default: a copy of min or of the request
        # can be equal to it, a freshly rounded value never is
        if req < nanos(rng.min):
            return nanos(
                rng.min
            ), policy.default is not None and rng.min.text == policy.default.text
        if rng.step is None:
            return req, same_as_default
        return _round_up_range(req, rng, fractional), False
    if policy.valid_values:
        for v in policy.valid_values:
            if req <= nanos(v):
                return nanos(v), policy.default is not None and v.text == policy.default.text
        return req, same_as_default
    return req, same_as_default


def _violates(amount: int, is_default: bool, cap: DeviceCapacity, fractional: bool) -> bool:
    policy = cap.request_policy
    if policy is None or is_default:
        return False
    rng = policy.valid_range
    if rng is not None:
        if rng.max is not None and amount > nanos(rng.max):
            return True
        if rng.step is not None and rng.min is not None:
            if _use_milli(rng, fractional):
                req_m = _milli(amount)
                if req_m is None:
                    return True
                step, low = _ceil_div(nanos(rng.step), MILLI), _ceil_div(nanos(rng.min), MILLI)
                return step == 0 or (req_m - low) % step != 0
            step, low = _value(nanos(rng.step)), _value(nanos(rng.min))
            return step == 0 or (_value(amount) - low) % step != 0
        return False
    if policy.valid_values:
        return all(amount != nanos(v) for v in policy.valid_values)
    return False


def consumed_capacity(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    fractional: bool = False,
) -> dict[str, int]:
    """The amount (nano-units) a request consumes of every capacity of a device."""
    return {
        name: _consumed_one((requests or {}).get(name), cap, fractional)[0]
        for name, cap in capacity.items()
    }


#: what fitting one request on one device needs to know beyond the consumption in use:
#: (capacity name, amount the request consumes, capacity value) for every capacity
CapacityPlan = tuple[tuple[str, int, int], ...]


def capacity_plan(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    fractional: bool = False,
) -> CapacityPlan | None:
    """The part of :func:`fits_capacity` that depends only on the request and the device:
    None when the device never fits the request (a requested capacity it lacks, or an
    amount its policy does not allow), else the plan :func:`fits_plan` checks.

    Raises CapacityError exactly when :func:`fits_capacity` would for some consumption in
    use; the amounts are those :func:`consumed_capacity` returns.
    """
    if requests:
        for name in requests:
            if name not in capacity:
                return None
    amounts: dict[str, tuple[int, bool]] = {}
    for name, cap in capacity.items():
        amount, is_default = _consumed_one((requests or {}).get(name), cap, fractional)
        if amount < 0:
            raise CapacityError(f"capacity {name!r}: capacity value is negative")
        amounts[name] = (amount, is_default)
    plan = []
    for name, cap in capacity.items():
        amount, is_default = amounts[name]
        if _violates(amount, is_default, cap, fractional):
            return None
        plan.append((name, amount, nanos(cap.value)))
    return tuple(plan)


def fits_plan(
    plan: CapacityPlan | None,
    persisted: Mapping[str, int] | None,
    in_flight: Mapping[str, int] | None,
) -> bool:
    """Whether a request with this :func:`capacity_plan` fits next to the persisted and
    in-flight consumption of the device."""
    if plan is None:
        return False
    for name, amount, value in plan:
        total = amount
        if persisted:
            total += persisted.get(name, 0)
        if in_flight:
            total += in_flight.get(name, 0)
        if total > value:
            return False
    return True


def fits_capacity(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, DeviceCapacity],
    persisted: Mapping[str, int] | None,
    in_flight: Mapping[str, int] | None,
    fractional: bool = False,
) -> bool:
    """Whether the request fits the device next to persisted and in-flight consumption.

    Raises CapacityError when the request cannot be evaluated (upstream: fatal).
    """
    if (
        not requests
        and not persisted
        and not in_flight
        and all(cap.request_policy is None and cap.value.sign() >= 0 for cap in capacity.values())
    ):
        return True  # nothing requested, nothing in use: each capacity is taken whole
    return fits_plan(capacity_plan(requests, capacity, fractional), persisted, in_flight)
