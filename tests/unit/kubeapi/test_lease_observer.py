"""LeaseObserver: judging another component's leader Lease on our own clock."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.clock import FakeClock

from drakit.kubeapi.errors import Forbidden
from drakit.kubeapi.leaseobserver import LeaseObserver, parse_lease_key
from drakit.kubeapi.resources import LEASES
from drakit.kubeapi.testing import FakeApi, FakeResource

NS, NAME = "kube-system", "kube-controller-manager"


def lease_spec(holder: str, renew: str, duration: int = 15) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renew}


def make(clock: FakeClock) -> tuple[FakeResource, LeaseObserver]:
    leases = FakeApi().resource(LEASES)
    observer = LeaseObserver(None, NS, NAME, clock=clock, leases=leases, max_age=0.0)
    return leases, observer


def renew(leases: FakeResource, holder: str, renew_time: str) -> None:
    lease = leases.get(NAME, NS)
    lease["spec"] = lease_spec(holder, renew_time)
    leases.update(lease)


def test_no_lease_is_not_held() -> None:
    _, observer = make(FakeClock())
    view = observer.view()
    assert (view.held, view.holder, view.version) == (False, "", None)


def test_a_lease_renewed_within_its_duration_is_held_however_old_its_renew_time_looks() -> None:
    clock = FakeClock()
    leases, observer = make(clock)
    # The holder's wall clock is far behind ours: renewTime is never trusted.
    leases.create(
        {"metadata": {"name": NAME}, "spec": lease_spec("kcm-a", "2001-01-01T00:00:00Z")}, NS
    )
    for second in range(30):
        renew(leases, "kcm-a", f"2001-01-01T00:00:{second:02d}Z")
        clock.advance(2.0)
        view = observer.view()
        assert view.held and view.holder == "kcm-a"
        assert 0 < view.expires_in <= 15


def test_a_lease_that_stops_changing_expires_after_its_duration_on_our_clock() -> None:
    clock = FakeClock()
    leases, observer = make(clock)
    leases.create(
        {"metadata": {"name": NAME}, "spec": lease_spec("kcm-a", "2099-01-01T00:00:00Z")}, NS
    )
    assert observer.view().held  # first sight: its duration counts from now
    clock.advance(14.9)
    assert observer.view().held
    clock.advance(0.2)
    assert not observer.view().held


def test_a_released_lease_without_holder_is_not_held() -> None:
    clock = FakeClock()
    leases, observer = make(clock)
    leases.create(
        {"metadata": {"name": NAME}, "spec": lease_spec("", "2026-01-01T00:00:00Z", 1)}, NS
    )
    assert not observer.view().held


def test_unchanged_since_is_false_once_the_lease_is_renewed_or_taken() -> None:
    clock = FakeClock()
    leases, observer = make(clock)
    leases.create(
        {"metadata": {"name": NAME}, "spec": lease_spec("kcm-a", "2026-01-01T00:00:00Z")}, NS
    )
    observer.view()
    clock.advance(16)
    expired = observer.view()
    assert not expired.held
    assert observer.unchanged_since(expired)
    renew(leases, "kcm-b", "2026-01-01T00:01:00Z")
    assert not observer.unchanged_since(expired)
    assert observer.view().held  # and the new holder leads


def test_unchanged_since_sees_a_lease_created_where_there_was_none() -> None:
    leases, observer = make(FakeClock())
    none = observer.view()
    assert observer.unchanged_since(none)
    leases.create(
        {"metadata": {"name": NAME}, "spec": lease_spec("kcm-a", "2026-01-01T00:00:00Z")}, NS
    )
    assert not observer.unchanged_since(none)


def test_view_answers_from_a_recent_read_and_reads_again_after_max_age() -> None:
    clock = FakeClock()
    leases = FakeApi().resource(LEASES)
    reads: list[str] = []
    get = leases.get

    def counting_get(name: str, namespace: str | None = None) -> Any:
        reads.append(name)
        return get(name, namespace)

    leases.get = counting_get  # type: ignore[method-assign]
    observer = LeaseObserver(None, NS, NAME, clock=clock, leases=leases, max_age=1.0)
    observer.view()
    observer.view()
    assert len(reads) == 1
    clock.advance(1.0)
    observer.view()
    assert len(reads) == 2


def test_a_failed_read_raises_the_api_error() -> None:
    leases = FakeApi().resource(LEASES)

    def forbidden(name: str, namespace: str | None = None) -> Any:
        raise Forbidden("leases is forbidden", code=403, reason="Forbidden")

    leases.get = forbidden  # type: ignore[method-assign]
    observer = LeaseObserver(None, NS, NAME, leases=leases)
    with pytest.raises(Forbidden):
        observer.view()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("kube-controller-manager", "is not NAMESPACE/NAME"),
        ("a/b/c", "is not NAMESPACE/NAME"),
        ("/name", "the namespace '' must not be empty"),
        ("Kube-System/kcm", "the namespace 'Kube-System' must be a lowercase RFC 1123"),
        ("kube-system/kcm?x=1", "the name 'kcm?x=1' must be a lowercase RFC 1123"),
    ],
)
def test_a_bad_lease_key_names_its_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("?", r"\?")):
        parse_lease_key(text)


def test_a_lease_key_splits_into_namespace_and_name() -> None:
    assert parse_lease_key("kube-system/kube-controller-manager") == (NS, NAME)
