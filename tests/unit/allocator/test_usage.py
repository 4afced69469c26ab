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
