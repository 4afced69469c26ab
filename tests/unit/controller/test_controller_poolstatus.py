"""``drakit.controller.poolstatus.pool_status``: upstream's answer shape for edge cases the
integration test's workload does not reach (incomplete pools, limit, other drivers)."""

from __future__ import annotations

from typing import Any

from drakit.controller.poolstatus import INCOMPLETE_PREFIX, pool_status


def slice_(driver: str, pool: str, devices: int, count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{driver}-{pool}-{devices}"},
        "spec": {
            "driver": driver,
            "nodeName": "n",
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "devices": [{"name": f"d{i}"} for i in range(devices)],
        },
    }


def test_incomplete_pool_is_flagged_without_counts_and_asks_for_a_retry() -> None:
    status, retry = pool_status(
        {"driver": "a.example.com"}, [slice_("a.example.com", "p", 2, count=2)], []
    )
    assert retry
    (pool,) = status["pools"]
    assert pool["validationError"].startswith(INCOMPLETE_PREFIX)
    assert "totalDevices" not in pool
    assert status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"


def test_limit_truncates_pools_sorted_by_name_but_pool_count_counts_all() -> None:
    slices = [slice_("a.example.com", p, 1) for p in ("c", "a", "b")]
    slices.append(slice_("other.example.com", "a", 4))
    status, retry = pool_status({"driver": "a.example.com", "limit": 2}, slices, [])
    assert not retry
    assert status["poolCount"] == 3
    assert [p["poolName"] for p in status["pools"]] == ["a", "b"]
    assert status["pools"][0]["totalDevices"] == 1
