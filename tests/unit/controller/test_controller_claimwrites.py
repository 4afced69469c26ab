"""The shapes of the claim writes: which preconditions each JSON patch carries."""

from __future__ import annotations

from typing import Any

from controller.claimwrites import ClaimWriter
from controller.naming import FINALIZER

CONSUMER = {"resource": "pods", "name": "p", "uid": "pod-uid"}


def claim(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid", "resourceVersion": "7",
                     "finalizers": ["example.com/other", FINALIZER]},
        "status": status,
    }  # fmt: skip


def test_allocation_write_tests_uid_and_the_finalizer_at_its_index_before_writing():
    allocation = {"devices": {"results": []}}
    ops = ClaimWriter._allocation_ops(claim(), allocation, CONSUMER)
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "claim-uid"},
        {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
        {"op": "add", "path": "/status/allocation", "value": allocation},
        {"op": "add", "path": "/status/reservedFor", "value": [CONSUMER]},
    ]


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
