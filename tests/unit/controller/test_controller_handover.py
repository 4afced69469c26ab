"""GenerationGate: when a scoped drakit generates a pod's claims beside kube-controller-manager."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest
from helpers.clock import FakeClock

from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.handover import MAX_RECHECK_SECONDS, GenerationGate
from drakit.kubeapi.errors import Forbidden
from drakit.kubeapi.leaseobserver import LeaseObserver
from drakit.kubeapi.resources import LEASES
from drakit.kubeapi.testing import FakeApi, FakeResource

NS, NAME = "kube-system", "kube-controller-manager"
SCOPED = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, scoped_generation_grace=5.0)


def pod(age: float, *, recorded: bool = False) -> dict[str, Any]:
    created = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age)
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": {"schedulerName": "drakit",
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tpl"}]},
        "status": status if recorded else {},
    }  # fmt: skip


def held_lease(leases: FakeResource, holder: str = "kcm-a") -> None:
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "renewTime": "2026-01-01T00:00:00Z",
    }
    leases.create({"metadata": {"name": NAME}, "spec": spec}, NS)


def gate_with(
    clock: FakeClock, config: ControllerConfig = SCOPED
) -> tuple[FakeResource, GenerationGate]:
    leases = FakeApi().resource(LEASES)
    observer = LeaseObserver(None, NS, NAME, clock=clock, leases=leases, max_age=0.0)
    return leases, GenerationGate(config, observer)


def test_a_new_pod_is_left_for_the_rest_of_its_grace_period() -> None:
    _, gate = gate_with(FakeClock())
    wait = gate.wait_before_generating(pod(age=1.0))
    assert isinstance(wait, float) and 3.0 <= wait <= 4.5


def test_after_the_grace_period_a_leading_controller_manager_keeps_the_pod() -> None:
    leases, gate = gate_with(FakeClock())
    held_lease(leases)
    wait = gate.wait_before_generating(pod(age=60.0))
    assert isinstance(wait, float) and 0 < wait <= MAX_RECHECK_SECONDS


def test_without_a_lease_drakit_generates_and_may_record_while_none_appears() -> None:
    leases, gate = gate_with(FakeClock())
    permit = gate.wait_before_generating(pod(age=60.0))
    assert callable(permit) and permit()
    held_lease(leases)  # a kube-controller-manager started meanwhile
    assert not permit()


def test_an_expired_lease_lets_drakit_generate_until_it_is_renewed() -> None:
    clock = FakeClock()
    leases, gate = gate_with(clock)
    held_lease(leases)
    assert isinstance(gate.wait_before_generating(pod(age=60.0)), float)
    clock.advance(15.1)  # not renewed for its whole duration
    permit = gate.wait_before_generating(pod(age=60.0))
    assert callable(permit) and permit()
    lease = leases.get(NAME, NS)
    lease["spec"]["renewTime"] = "2026-01-01T00:00:20Z"
    leases.update(lease)
    assert not permit()


def test_a_pod_whose_claims_are_recorded_needs_no_lease_read() -> None:
    leases, gate = gate_with(FakeClock())
    held_lease(leases)
    permit = gate.wait_before_generating(pod(age=1.0, recorded=True))
    assert callable(permit) and permit()


def test_all_mode_generates_at_once_whatever_the_lease_says() -> None:
    leases, gate = gate_with(FakeClock(), ControllerConfig(claim_generation=ClaimGeneration.ALL))
    held_lease(leases)
    permit = gate.wait_before_generating(pod(age=0.0))
    assert callable(permit) and permit()


def test_a_forbidden_lease_read_fails_closed_and_says_rbac_is_missing_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 30: unreadable, the Lease may be held; drakit must not race a leading
    kube-controller-manager on the grace period alone."""
    leases, gate = gate_with(FakeClock())

    def forbidden(name: str, namespace: str | None = None) -> Any:
        raise Forbidden("leases is forbidden", code=403, reason="Forbidden")

    leases.get = forbidden  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="drakit.controller.handover"):
        for _ in range(3):
            wait = gate.wait_before_generating(pod(age=60.0))
            assert wait == MAX_RECHECK_SECONDS  # left to kube-controller-manager, checked again
    errors = [r for r in caplog.records if "leader Lease" in r.getMessage()]
    assert len(errors) == 1
    assert "RBAC missing" in errors[0].getMessage()
    assert "generates no claims" in errors[0].getMessage()
