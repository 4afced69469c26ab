"""The double-use guard on the allocator's bookkeeping (no API server needed)."""

from __future__ import annotations

from typing import Any

from allocator.model import Device
from node_plugin.backends.base import PoolDescription
from node_plugin.checkpoint import COMPLETED, ClaimEntry
from node_plugin.guard import Inventory, claim_from_results, find_conflicts

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


def conflicts(uid: str, others: list[ClaimEntry], *results: dict[str, Any]) -> list[str]:
    found = find_conflicts(DRIVER, claim_from_results(uid, "ns", uid, results), others, INVENTORY)
    return [c.detail for c in found]


def test_guard_refuses_a_device_held_exclusively_by_another_claim_naming_it_in_detail() -> None:
    (problem,) = conflicts("b", [held("a", res("gpu-0"))], res("gpu-0"))
    assert "device d/p/gpu-0" in problem and "ns/claim-a" in problem


def test_guard_public_text_of_a_conflict_does_not_name_the_holder() -> None:
    claim = claim_from_results("b", "ns", "b", [res("gpu-0")])
    (found,) = find_conflicts(DRIVER, claim, [held("a", res("gpu-0"))], INVENTORY)
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
