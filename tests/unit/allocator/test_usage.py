"""``drakit.allocator.usage``: device states, holders and pool summaries from model objects."""

from __future__ import annotations

from typing import Any

from drakit.allocator.model import ResourceClaim, ResourceSlice
from drakit.allocator.usage import build_usage

DRIVER = "gpu.example.com"


def slice_(
    name: str, pool: str, devices: list[dict[str, Any]], generation: int = 1
) -> ResourceSlice:
    return ResourceSlice.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "driver": DRIVER,
                "nodeName": "node-a",
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )


def claim(name: str, results: list[dict[str, Any]], pods: tuple[str, ...] = ()) -> ResourceClaim:
    return ResourceClaim.from_dict(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r", "driver": DRIVER, "pool": "p", **r} for r in results
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods],
            },
        }
    )


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = slice_("old", "p", [{"name": "gone"}], generation=1)
    new = slice_("new", "p", [{"name": "dev"}], generation=2)
    view = build_usage([old, new], [])
    assert [u.device for u in view.devices] == ["dev"]
    assert view.pools[0].total == 1


def test_admin_access_holder_neither_allocates_nor_frees_a_device() -> None:
    view = build_usage(
        [slice_("s", "p", [{"name": "a"}, {"name": "b"}])],
        [claim("admin", [{"device": "a", "adminAccess": True}]), claim("x", [{"device": "b"}])],
    )
    states = {u.device: u.state for u in view.devices}
    assert states == {"a": "admin-access", "b": "allocated"}
    assert (view.pools[0].allocated, view.pools[0].free) == (1, 1)


def test_shared_device_reports_capacity_left_after_every_share() -> None:
    device = {
        "name": "s0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "8Gi"}},
    }
    shares = [
        claim(f"c{i}", [{"device": "s0", "shareID": f"id{i}", "consumedCapacity": {"memory": q}}])
        for i, q in enumerate(("1Gi", "512Mi"))
    ]
    view = build_usage([slice_("s", "p", [device])], shares)
    (usage,) = view.devices
    assert usage.state == "shared"
    assert [(c.name, str(c.used), str(c.left)) for c in usage.capacity] == [
        ("memory", "1536Mi", "6656Mi")
    ]


def test_taint_states_and_unknown_when_claims_are_hidden() -> None:
    devices = [
        {"name": "free"},
        {"name": "t", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        {"name": "u", "taints": [{"key": f"{DRIVER}/unhealthy", "effect": "NoExecute"}]},
        {"name": "n", "taints": [{"key": "k", "effect": "None"}]},
    ]
    full = build_usage([slice_("s", "p", devices)], [])
    assert {u.device: u.state for u in full.devices} == {
        "free": "free", "t": "tainted", "u": "unhealthy", "n": "free",
    }  # fmt: skip
    partial = build_usage([slice_("s", "p", devices)], [], all_claims_visible=False)
    assert {u.device: u.state for u in partial.devices}["free"] == "unknown"
    pool = partial.pools[0]
    assert (pool.free, pool.unknown, pool.tainted) == (None, 2, 2)


def partition(name: str, memory: str, cores: str = "0") -> dict[str, Any]:
    counters = {"memory": {"value": memory}}
    uses = [{"counterSet": "npu-0", "counters": counters}]
    if cores != "0":
        uses.append({"counterSet": "npu-0-cores", "counters": {"cores": {"value": cores}}})
    return {"name": name, "consumesCounters": uses}


def partitioned_slice(devices: list[dict[str, Any]]) -> ResourceSlice:
    """One NPU with 40Gi of memory and 4 cores in two counter sets, and its partitions."""
    return ResourceSlice.from_dict(
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "node-a",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [
                    {"name": "npu-0", "counters": {"memory": {"value": "40Gi"}}},
                    {"name": "npu-0-cores", "counters": {"cores": {"value": "4"}}},
                ],
                "devices": devices,
            },
        }
    )


def test_a_partition_whose_counters_are_used_up_is_exhausted_not_free() -> None:
    # Both halves allocated: every counter is used up, nothing else can be allocated. The
    # summary counted the whole NPU and the quarters as free.
    devices = [
        partition("whole", "40Gi"),
        partition("half-0", "20Gi"),
        partition("half-1", "20Gi"),
        partition("quarter-0", "10Gi"),
        partition("quarter-1", "10Gi"),
    ]
    view = build_usage(
        [partitioned_slice(devices)], [claim("a", [{"device": "half-0"}, {"device": "half-1"}])]
    )
    states = {u.device: u.state for u in view.devices}
    assert states == {
        "whole": "exhausted", "half-0": "allocated", "half-1": "allocated",
        "quarter-0": "exhausted", "quarter-1": "exhausted",
    }  # fmt: skip
    (pool,) = view.pools
    assert (pool.total, pool.allocated, pool.free, pool.exhausted) == (5, 2, 0, 3)
    whole = next(u for u in view.devices if u.device == "whole")
    assert [(name, str(need), str(left)) for name, need, left in whole.short] == [
        ("npu-0/memory", "40Gi", "0")
    ]


def test_a_partition_is_exhausted_by_any_one_counter_set_and_free_when_it_fits_exactly() -> None:
    devices = [
        partition("big", "10Gi", cores="3"),  # memory fits, cores do not (3 > 2 left)
        partition("fits", "30Gi", cores="2"),  # exactly what is left of both
        partition("used", "10Gi", cores="2"),
    ]
    view = build_usage([partitioned_slice(devices)], [claim("a", [{"device": "used"}])])
    states = {u.device: u.state for u in view.devices}
    assert states == {"big": "exhausted", "fits": "free", "used": "allocated"}
    big = next(u for u in view.devices if u.device == "big")
    assert [(name, str(need), str(left)) for name, need, left in big.short] == [
        ("npu-0-cores/cores", "3", "2")
    ]
    assert (view.pools[0].free, view.pools[0].exhausted) == (1, 1)


def test_exhausted_stays_exhausted_when_claims_are_hidden_and_a_taint_comes_first() -> None:
    devices = [
        partition("whole", "40Gi"),
        {**partition("tainted", "40Gi"), "taints": [{"key": "k", "effect": "NoSchedule"}]},
        partition("half-0", "20Gi"),
        partition("half-1", "20Gi"),
    ]
    held = [claim("a", [{"device": "half-0"}])]
    view = build_usage([partitioned_slice(devices)], held, all_claims_visible=False)
    states = {u.device: u.state for u in view.devices}
    # Hidden claims can only use more: an exhausted device is exhausted; a free one unknown.
    assert states == {
        "whole": "exhausted", "tainted": "tainted", "half-0": "allocated", "half-1": "unknown",
    }  # fmt: skip
    (pool,) = view.pools
    assert (pool.free, pool.unknown, pool.exhausted, pool.tainted) == (None, 1, 1, 1)
