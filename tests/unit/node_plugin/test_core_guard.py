"""The double-use guard on the allocator's bookkeeping (no API server needed)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from drakit.allocator.model import CounterSet, Device, DeviceRequestAllocationResult
from drakit.node_plugin.checkpoint import COMPLETED, ClaimEntry
from drakit.node_plugin.guard import (
    Inventory,
    bookkept_conflicts,
    claim_from_results,
    find_conflicts,
    may_conflict,
)
from drakit.plugin import ClaimRef, PoolDescription

DRIVER = "d"
POOL = PoolDescription(
    "p",
    (
        Device.from_dict({"name": "gpu-0"}),
        Device.from_dict(
            {
                "name": "shared",
                "allowMultipleAllocations": True,
                "capacity": {"memory": {"value": "10Gi"}},
            }
        ),
    ),
)
INVENTORY = Inventory(DRIVER, [POOL])


def res(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": DRIVER, "pool": "p", "device": device, **extra}


def held(uid: str, *results: dict[str, Any]) -> ClaimEntry:
    return ClaimEntry(uid, "ns", f"claim-{uid}", COMPLETED, results)


def decoded(results: Sequence[dict[str, Any]]) -> list[DeviceRequestAllocationResult]:
    return [DeviceRequestAllocationResult.from_dict(r) for r in results]


def conflicts(uid: str, others: list[ClaimEntry], *results: dict[str, Any]) -> list[str]:
    found = find_conflicts(DRIVER, ClaimRef("ns", uid, uid), decoded(results), others, INVENTORY)
    return [c.detail for c in found]


def test_guard_refuses_a_device_held_exclusively_by_another_claim_naming_it_in_detail() -> None:
    (problem,) = conflicts("b", [held("a", res("gpu-0"))], res("gpu-0"))
    assert "device d/p/gpu-0" in problem and "ns/claim-a" in problem


def test_guard_public_text_of_a_conflict_does_not_name_the_holder() -> None:
    claim = ClaimRef("ns", "b", "b")
    (found,) = find_conflicts(
        DRIVER, claim, decoded([res("gpu-0")]), [held("a", res("gpu-0"))], INVENTORY
    )
    assert "device d/p/gpu-0" in found.public and "held by another claim" in found.public
    assert "claim-a" not in found.public


def test_guard_ignores_admin_access_results() -> None:
    assert conflicts("b", [held("a", res("gpu-0"))], res("gpu-0", adminAccess=True)) == []
    assert conflicts("b", [held("a", res("gpu-0", adminAccess=True))], res("gpu-0")) == []


def test_guard_allows_shares_within_capacity_and_refuses_a_reused_share() -> None:
    a = held("a", res("shared", shareID="s1", consumedCapacity={"memory": "6Gi"}))
    assert (
        conflicts("b", [a], res("shared", shareID="s2", consumedCapacity={"memory": "4Gi"})) == []
    )
    (over,) = conflicts("b", [a], res("shared", shareID="s2", consumedCapacity={"memory": "5Gi"}))
    assert "capacity memory would be exceeded" in over
    (same,) = conflicts("b", [a], res("shared", shareID="s1", consumedCapacity={"memory": "1Gi"}))
    assert "share s1 is already in use" in same


def test_guard_refuses_a_device_unknown_to_the_backend() -> None:
    (problem,) = conflicts("b", [], res("gpu-9"))
    assert "p/gpu-9 is not a device of this node" in problem


COUNTED_POOL = PoolDescription(
    "p",
    (
        *POOL.devices,
        Device.from_dict({"name": "gpu-1"}),
        Device.from_dict(
            {
                "name": "part-0",
                "consumesCounters": [{"counterSet": "set", "counters": {"mem": {"value": "2"}}}],
            }
        ),
        Device.from_dict(
            {
                "name": "part-1",
                "consumesCounters": [{"counterSet": "set", "counters": {"mem": {"value": "2"}}}],
            }
        ),
    ),
    shared_counters=(CounterSet.from_dict({"name": "set", "counters": {"mem": {"value": "3"}}}),),
)


def random_result(rng: random.Random) -> dict[str, Any]:
    device = rng.choice(["gpu-0", "gpu-1", "shared", "part-0", "part-1"])
    extra: dict[str, Any] = {}
    if rng.random() < 0.2:
        extra["adminAccess"] = True
    if device == "shared" and rng.random() < 0.7:
        extra["shareID"] = rng.choice(["s1", "s2", "s3"])
        if rng.random() < 0.7:
            extra["consumedCapacity"] = {"memory": rng.choice(["1Gi", "4Gi", "9Gi", "11Gi"])}
    return res(device, **extra)


def test_guard_skips_the_bookkeeping_only_where_the_bookkeeping_finds_no_conflict() -> None:
    """The shortcut (no decode of every prepared claim) never hides a conflict: over
    random held sets and claims, whenever ``may_conflict`` says no, the full bookkeeping
    finds nothing either; and it says yes for every conflict the bookkeeping reports."""
    inventory = Inventory(DRIVER, [COUNTED_POOL])
    rng = random.Random(20261202)
    skipped = found = 0
    for _ in range(3000):
        others = [
            held(f"h{i}", *(random_result(rng) for _ in range(rng.randint(1, 2))))
            for i in range(rng.randint(0, 3))
        ]
        raw = [random_result(rng) for _ in range(rng.randint(1, 2))]
        results = decoded(raw)
        full = bookkept_conflicts(
            DRIVER, claim_from_results("c", "ns", "c", raw), others, inventory
        )
        if not may_conflict(DRIVER, results, others, inventory):
            skipped += 1
            assert full == [], (results, others)
        found += bool(full)
    assert skipped > 300 and found > 300  # both branches were exercised
