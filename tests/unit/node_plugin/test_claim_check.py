"""ClaimReader.check: what a prepare reads of a claim, and the errors it names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from drakit.node_plugin.claims import ClaimError, ClaimReader
from drakit.plugin import ClaimRef

DRIVER = "gpu.example.com"
REF = ClaimRef("ns", "uid-1", "claim-1")


class NoSource:
    def get(self, name: str, namespace: str | None = None) -> Mapping[str, Any]:
        raise AssertionError("check() must not read the API")


def reader() -> ClaimReader:
    return ClaimReader(NoSource(), DRIVER, BaseModel, parallel=1)  # no opaque config here


def claim(status: Any, spec: Any = None) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "claim-1", "uid": "uid-1"},
        "spec": spec if spec is not None else {"devices": {}},
        "status": status,
    }


def allocated(*results: dict[str, Any]) -> dict[str, Any]:
    return {"allocation": {"devices": {"results": list(results)}}}


def gpu(device: str, driver: str = DRIVER) -> dict[str, Any]:
    return {"request": "gpu", "driver": driver, "pool": "node-1", "device": device}


def test_check_keeps_only_this_drivers_results_as_devices_to_prepare() -> None:
    fetched = reader().check(REF, claim(allocated(gpu("gpu-0"), gpu("nic-0", "nic.example.com"))))
    assert [d.device for d in fetched.to_prepare.devices] == ["gpu-0"]
    assert [r.device for r in fetched.results] == ["gpu-0"]


def test_check_does_not_read_the_spec_of_an_allocated_claim() -> None:
    fetched = reader().check(REF, claim(allocated(gpu("gpu-0")), spec={"devices": "garbage"}))
    assert [d.device for d in fetched.to_prepare.devices] == ["gpu-0"]


def test_check_names_the_bad_field_of_a_malformed_allocation() -> None:
    bad = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER}]}}}
    with pytest.raises(ClaimError) as caught:
        reader().check(REF, claim(bad))
    assert caught.value.reason == "InvalidResourceClaim"
    assert "ResourceClaim ns/claim-1" in str(caught.value)
    assert "status.allocation.devices.results" in str(caught.value)


def test_check_refuses_a_status_that_is_not_an_object() -> None:
    with pytest.raises(ClaimError) as caught:
        reader().check(REF, claim(["allocated"]))
    assert caught.value.reason == "InvalidResourceClaim" and "status" in str(caught.value)


def test_check_reports_a_claim_without_allocation_as_not_allocated() -> None:
    with pytest.raises(ClaimError) as caught:
        reader().check(REF, claim({"reservedFor": []}))
    assert caught.value.reason == "ResourceClaimNotAllocated"
