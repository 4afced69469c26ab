"""The shapes of the claim writes: which preconditions each write carries."""

from __future__ import annotations

from typing import Any

from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.naming import FINALIZER

CONSUMER = {"resource": "pods", "name": "p", "uid": "pod-uid"}


def claim(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid", "resourceVersion": "7",
                     "finalizers": ["example.com/other", FINALIZER]},
        "status": status,
    }  # fmt: skip


def test_allocation_write_is_the_claim_as_read_with_the_allocation_and_one_reservation():
    allocation = {"devices": {"results": []}}
    read = claim(devices=[{"driver": "d", "pool": "p", "device": "x"}])
    read["metadata"]["managedFields"] = [{"manager": "someone"}]
    body = ClaimWriter._allocation_body(read, allocation, CONSUMER)
    # The resourceVersion is the precondition: the write lands on the claim that was checked
    # (finalizer included) or gets Conflict.
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["metadata"]["finalizers"] == ["example.com/other", FINALIZER]
    assert "managedFields" not in body["metadata"]  # unset in a PUT: the server keeps them
    assert body["status"] == {
        "devices": [{"driver": "d", "pool": "p", "device": "x"}],
        "allocation": allocation,
        "reservedFor": [CONSUMER],
    }
    assert read["metadata"]["managedFields"] == [{"manager": "someone"}]  # not changed
    assert "allocation" not in read["status"]


ALLOCATION = {"devices": {"results": [{"request": "r", "driver": "d", "pool": "p",
                                        "device": "x"}]}}  # fmt: skip


def test_reservation_appends_without_a_resource_version_when_the_list_exists():
    ops = ClaimWriter._reserve_ops(
        claim(allocation=ALLOCATION, reservedFor=[{"uid": "x"}]), CONSUMER
    )
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "claim-uid"},
        {"op": "test", "path": "/status/allocation/devices/results",
         "value": ALLOCATION["devices"]["results"]},
        {"op": "add", "path": "/status/reservedFor/-", "value": CONSUMER},
    ]  # fmt: skip


def test_reservation_tests_the_allocation_by_its_results_node_and_time_never_its_config():
    # A test of the whole allocation compares the opaque config's numbers as re-encoded
    # (1000.0 for a stored 1e3) and fails on a claim that did not change.
    allocation = {
        "devices": {"results": ALLOCATION["devices"]["results"],
                    "config": [{"opaque": {"driver": "d", "parameters": {"n": 1000.0}}}]},
        "nodeSelector": {"nodeSelectorTerms": []},
        "allocationTimestamp": "2026-01-02T03:04:05Z",
    }  # fmt: skip
    ops = ClaimWriter._reserve_ops(claim(allocation=allocation, reservedFor=[]), CONSUMER)
    tested = {op["path"]: op["value"] for op in ops if op["op"] == "test"}
    assert tested == {
        "/metadata/uid": "claim-uid",
        "/status/allocation/allocationTimestamp": "2026-01-02T03:04:05Z",
        "/status/allocation/nodeSelector": {"nodeSelectorTerms": []},
        "/status/allocation/devices/results": ALLOCATION["devices"]["results"],
    }


def test_first_reservation_creates_the_list_only_if_the_claim_is_unchanged():
    ops = ClaimWriter._reserve_ops(claim(allocation=ALLOCATION), CONSUMER)
    assert {"op": "test", "path": "/metadata/resourceVersion", "value": "7"} in ops
    assert ops[-1] == {"op": "add", "path": "/status/reservedFor", "value": [CONSUMER]}
