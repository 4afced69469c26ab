"""``drakit devices`` against the real apiserver: the exact table and summary for a workload
with plain, tainted, unhealthy, admin-access, partitionable and shared devices on two nodes;
the same numbers counted independently from the raw objects; --class, --node, -o json."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from devices_workload import Workload

from drakit.cli import main
from drakit.kubeapi.resources import RESOURCE_CLAIMS, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration


def run_devices(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["devices", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_rows(text: str) -> list[list[str]]:
    """The rows of a printed table (header included), cells split at the column gaps."""
    return [re.split(r"\s{3,}", line) for line in text.splitlines() if not line.startswith("note:")]


def expected_device_rows(w: Workload) -> list[list[str]]:
    d, ns, admin = w.driver, w.namespace, w.admin_namespace
    return [
        ["NODE", "DRIVER", "POOL", "DEVICE", "STATE", "CLAIM", "PODS"],
        ["node-a", d, "node-a", "gpu-0", "allocated", f"{ns}/plain", "pod-a"],
        ["node-a", d, "node-a", "gpu-1", "free", "-", "-"],
        ["node-a", d, "node-a", "gpu-2", "tainted", "-", "-"],
        ["node-a", d, "node-a", "gpu-3", "unhealthy", "-", "-"],
        ["node-a", d, "node-a", "gpu-4", "admin-access", f"{admin}/watcher (admin)", "pod-admin"],
        [
            "node-b",
            d,
            "node-b-part",
            "part-full",
            "exhausted (gpu-counters/memory 40Gi needed, 20Gi left)",
            "-",
            "-",
        ],
        ["node-b", d, "node-b-part", "part-half-0", "allocated", f"{ns}/part", "pod-b"],
        ["node-b", d, "node-b-part", "part-half-1", "free", "-", "-"],
        [
            "node-b",
            d,
            "node-b-shared",
            "shared-0",
            "shared (memory 10Gi/16Gi left)",
            f"{ns}/share-1,{ns}/share-2",
            "pod-c,pod-d",
        ],
        ["node-b", d, "node-b-shared", "shared-1", "free", "-", "-"],
    ]


def expected_summary_rows(w: Workload) -> list[list[str]]:
    d = w.driver
    return [
        [
            "NODE", "DRIVER", "POOL", "DEVICES", "ALLOCATED", "FREE", "EXHAUSTED", "TAINTED",
            "COUNTERS USED/TOTAL", "CAPACITY USED/TOTAL",
        ],
        ["node-a", d, "node-a", "5", "1", "2", "0", "2", "-", "-"],
        ["node-b", d, "node-b-part", "3", "1", "1", "1", "0", "gpu-counters/memory 20Gi/40Gi",
         "-"],
        ["node-b", d, "node-b-shared", "2", "1", "1", "0", "0", "-", "memory 6Gi/32Gi"],
    ]  # fmt: skip


def test_device_table_shows_every_device_state_holder_and_pod(
    cluster: LocalCluster, workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_devices(
        capsys, "--kubeconfig", cluster.kubeconfig, "--driver", workload.driver
    )
    assert (code, err) == (0, "")
    assert table_rows(out) == expected_device_rows(workload)


def test_summary_counts_devices_counters_and_capacity_per_node_and_pool(
    cluster: LocalCluster, workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_devices(
        capsys, "--kubeconfig", cluster.kubeconfig, "--driver", workload.driver, "--summary"
    )
    assert (code, err) == (0, "")
    assert table_rows(out) == expected_summary_rows(workload)


def counters_left(slices: list[dict[str, Any]], held: set[tuple[str, str]]) -> dict[str, Any]:
    """``pool/set/counter`` -> amount left after the held devices, from the raw objects
    (the workload's counters are whole Gi)."""
    left: dict[str, int] = {}
    for s in slices:
        pool = s["spec"]["pool"]["name"]
        for cs in s["spec"].get("sharedCounters") or []:
            for name, c in cs["counters"].items():
                left[f"{pool}/{cs['name']}/{name}"] = int(c["value"].removesuffix("Gi"))
    for s in slices:
        pool = s["spec"]["pool"]["name"]
        for dev in s["spec"].get("devices") or []:
            if (pool, dev["name"]) in held:
                for use in dev.get("consumesCounters") or []:
                    for name, c in use["counters"].items():
                        key = f"{pool}/{use['counterSet']}/{name}"
                        left[key] -= int(c["value"].removesuffix("Gi"))
    return left


def exhausted(pool: str, dev: dict[str, Any], left: dict[str, int]) -> bool:
    return any(
        int(c["value"].removesuffix("Gi")) > left[f"{pool}/{use['counterSet']}/{name}"]
        for use in dev.get("consumesCounters") or []
        for name, c in use["counters"].items()
    )


def independent_pool_counts(admin_api: Any, driver: str) -> dict[str, dict[str, int]]:
    """Per pool: total, allocated, tainted, exhausted (shared counters used up) and free,
    counted straight from the raw objects."""
    slices = [
        s
        for s in Resource(admin_api, RESOURCE_SLICES).list().items
        if s["spec"]["driver"] == driver
    ]
    held: set[tuple[str, str]] = set()
    for claim in Resource(admin_api, RESOURCE_CLAIMS).list().items:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r["driver"] == driver and not r.get("adminAccess"):
                held.add((r["pool"], r["device"]))
    left = counters_left(slices, held)
    counts: dict[str, dict[str, int]] = {}
    for s in slices:
        pool = s["spec"]["pool"]["name"]
        c = counts.setdefault(
            pool, {"devices": 0, "allocated": 0, "tainted": 0, "exhausted": 0, "free": 0}
        )
        for dev in s["spec"].get("devices") or []:
            tainted = any(
                t["effect"] in ("NoSchedule", "NoExecute") for t in dev.get("taints") or []
            )
            allocated = (pool, dev["name"]) in held
            used_up = not (allocated or tainted) and exhausted(pool, dev, left)
            c["devices"] += 1
            c["allocated"] += allocated
            c["tainted"] += tainted
            c["exhausted"] += used_up
            c["free"] += not (allocated or tainted or used_up)
    return counts


def test_summary_json_matches_counts_taken_directly_from_the_objects(
    cluster: LocalCluster,
    admin_api: Any,
    workload: Workload,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_devices(
        capsys, "--kubeconfig", cluster.kubeconfig, "--driver", workload.driver,
        "--summary", "-o", "json",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    shown = {
        p["pool"]: {k: p[k] for k in ("devices", "allocated", "tainted", "exhausted", "free")}
        for p in doc["items"]
    }
    assert shown == independent_pool_counts(admin_api, workload.driver)
    part = next(p for p in doc["items"] if p["pool"] == "node-b-part")
    assert part["counters"] == [
        {"name": "gpu-counters/memory", "used": "20Gi", "total": "40Gi", "available": "20Gi"}
    ]
    assert doc["notes"] == []


def test_device_json_names_each_share_and_its_consumed_capacity(
    cluster: LocalCluster, workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_devices(
        capsys, "--kubeconfig", cluster.kubeconfig, "--driver", workload.driver, "-o", "json"
    )
    assert code == 0
    shared = next(i for i in json.loads(out)["items"] if i["device"] == "shared-0")
    assert [(c["name"], c["consumedCapacity"]) for c in shared["claims"]] == [
        ("share-1", {"memory": "4Gi"}),
        ("share-2", {"memory": "2Gi"}),
    ]
    assert shared["capacity"] == [
        {"name": "memory", "used": "6Gi", "total": "16Gi", "available": "10Gi"}
    ]


def test_class_filter_keeps_only_devices_the_class_selectors_match(
    cluster: LocalCluster, workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_devices(
        capsys, "--kubeconfig", cluster.kubeconfig, "--class", workload.device_class
    )
    assert code == 0
    assert [row[3] for row in table_rows(out)[1:]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"]


def test_node_and_namespace_filters_narrow_the_rows(
    cluster: LocalCluster, workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--kubeconfig", cluster.kubeconfig, "--driver", workload.driver]
    _, out, _ = run_devices(capsys, *base, "--node", "node-b")
    assert {row[0] for row in table_rows(out)[1:]} == {"node-b"}
    _, out, _ = run_devices(capsys, *base, "--namespace", workload.admin_namespace)
    assert [row[3] for row in table_rows(out)[1:]] == ["gpu-4"]


def test_unknown_class_is_a_clear_error_without_traceback(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_devices(capsys, "--kubeconfig", cluster.kubeconfig, "--class", "nope")
    assert code == 1
    assert out == ""
    assert err == "drakit devices: --class: DeviceClass 'nope' not found\n"


def test_bad_output_format_is_refused_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_devices(capsys, "--kubeconfig", "/nonexistent", "-o", "xml")
    assert code == 2
    assert "--output: 'xml' is not one of table, wide, json, yaml" in err


def test_namespace_that_is_not_a_name_is_refused_before_it_reaches_a_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_devices(capsys, "--kubeconfig", "/nonexistent", "-n", "../../etc")
    assert (code, out) == (2, "")
    assert err.startswith("drakit devices: --namespace: '../../etc' is not a namespace name")
