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
        {"op": "test", "path": "/status/allocation", "value": ALLOCATION},
        {"op": "add", "path": "/status/reservedFor/-", "value": CONSUMER},
    ]


def test_first_reservation_creates_the_list_only_if_the_claim_is_unchanged():
    ops = ClaimWriter._reserve_ops(claim(allocation=ALLOCATION), CONSUMER)
    assert {"op": "test", "path": "/metadata/resourceVersion", "value": "7"} in ops
    assert ops[-1] == {"op": "add", "path": "/status/reservedFor", "value": [CONSUMER]}
