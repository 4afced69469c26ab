"""Properties every allocation must have, over random scenarios (hypothesis picks seeds)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from alloc_generators import random_scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drakit.allocator.capacity import consumed_capacity
from drakit.allocator.model import ResourceClaim as Claim
from drakit.allocator.model import ResourceSlice, with_api_defaults
from drakit.allocator.quantity import Quantity, nanos
from drakit.allocator.scenario import run_scenario

SEEDS = st.integers(min_value=0, max_value=10**9)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _devices(scenario: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    out = {}
    for raw in scenario["slices"]:
        s = ResourceSlice.from_dict(raw)
        for d in s.spec.devices:
            out[(s.spec.driver, s.spec.pool.name, d.name)] = d
    return out


def _results(output: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, r)
        for i, a in enumerate(output.get("allocations") or [])
        for r in (a["allocation"].get("devices") or {}).get("results") or []
    ]


def _allocated_results(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r for c in scenario["allocated"] for r in c["status"]["allocation"]["devices"]["results"]
    ]


@SETTINGS
@given(SEEDS)
def test_no_dedicated_device_is_allocated_twice(seed: int) -> None:
    scenario = random_scenario(seed)
    output = run_scenario(scenario)
    devices = _devices(scenario)
    taken: Counter[tuple[str, str, str]] = Counter()
    for _, r in _results(output):
        key = (r["driver"], r["pool"], r["device"])
        if not r.get("adminAccess") and not devices[key].allow_multiple_allocations:
            taken[key] += 1
    for r in _allocated_results(scenario):
        key = (r["driver"], r["pool"], r["device"])
        if key in taken:
            taken[key] += 1
    assert all(n == 1 for n in taken.values()), taken


@SETTINGS
@given(SEEDS)
def test_every_request_gets_its_count(seed: int) -> None:
    scenario = random_scenario(seed)
    output = run_scenario(scenario)
    if output["outcome"] != "allocated":
        return
    for ci, raw in enumerate(scenario["claims"]):
        claim = with_api_defaults(Claim.from_dict(raw))
        got = Counter(r["request"].split("/")[0] for i, r in _results(output) if i == ci)
        for req in claim.spec.devices.requests:
            if req.exactly is not None:
                if req.exactly.allocation_mode == "ExactCount":
                    assert got[req.name] == req.exactly.count
                else:
                    assert got[req.name] >= 1
            else:
                chosen = {
                    r["request"]
                    for i, r in _results(output)
                    if i == ci and r["request"].startswith(req.name + "/")
                }
                assert len(chosen) == 1
                sub_name = chosen.pop().split("/")[1]
                sub = next(s for s in req.first_available if s.name == sub_name)
                if sub.allocation_mode == "ExactCount":
                    assert got[req.name] == sub.count


@SETTINGS
@given(SEEDS)
def test_constraints_hold_within_each_claim(seed: int) -> None:
    scenario = random_scenario(seed)
    output = run_scenario(scenario)
    if output["outcome"] != "allocated":
        return
    devices = _devices(scenario)
    for ci, raw in enumerate(scenario["claims"]):
        picked = [
            devices[(r["driver"], r["pool"], r["device"])] for i, r in _results(output) if i == ci
        ]
        for c in raw["spec"]["devices"].get("constraints", []):
            name = (c.get("matchAttribute") or c.get("distinctAttribute")).split("/")[1]
            values = [set(d.attributes[name].values()) for d in picked]
            if "matchAttribute" in c and values:
                assert set.intersection(*values), (name, values)
            if "distinctAttribute" in c:
                for a in range(len(values)):
                    for b in range(a + 1, len(values)):
                        assert not values[a] & values[b], (name, values)


@SETTINGS
@given(SEEDS)
def test_counters_and_capacities_are_never_exceeded(seed: int) -> None:
    scenario = random_scenario(seed)
    output = run_scenario(scenario)
    if output["outcome"] != "allocated":
        return
    devices = _devices(scenario)
    counters: dict[tuple[str, str], int] = defaultdict(int)
    limits: dict[tuple[str, str], int] = {}
    for raw in scenario["slices"]:
        s = ResourceSlice.from_dict(raw)
        for cs in s.spec.shared_counters:
            for name, c in cs.counters.items():
                limits[(s.spec.pool.name, f"{cs.name}/{name}")] = nanos(c.value)
    used_capacity: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    charged: set[tuple[str, str, str]] = set()
    new_use: set[tuple[str, str]] = set()
    fresh = [(True, r) for _, r in _results(output)]
    persisted = [(False, r) for r in _allocated_results(scenario)]
    for is_new, r in persisted + fresh:
        key = (r["driver"], r["pool"], r["device"])
        d = devices[key]
        if r.get("adminAccess"):
            continue
        if key not in charged:  # a shared device charges its counters once
            charged.add(key)
            for cc in d.consumes_counters:
                for name, c in cc.counters.items():
                    counter = (r["pool"], f"{cc.counter_set}/{name}")
                    counters[counter] += nanos(c.value)
                    if is_new:
                        new_use.add(counter)
        for name, q in (r.get("consumedCapacity") or {}).items():
            used_capacity[key][name] += nanos(Quantity.parse(q))
    # the random allocated state may over-commit on its own; new picks must not add to that
    for key in new_use:
        assert counters[key] <= limits[key], (key, counters[key], limits[key])
    for key, used in used_capacity.items():
        for name, amount in used.items():
            assert amount <= nanos(devices[key].capacity[name].value)


def test_consumed_capacity_defaults_to_the_whole_capacity() -> None:
    d = ResourceSlice.from_dict(
        {
            "spec": {
                "driver": "d.io",
                "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
                "nodeName": "n",
                "devices": [{"name": "x", "capacity": {"bw": {"value": "8Gi"}}}],
            }
        }
    )
    dev = d.spec.devices[0]
    assert consumed_capacity(None, dev.capacity) == {"bw": nanos(Quantity.parse("8Gi"))}
