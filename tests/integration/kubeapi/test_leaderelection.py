"""Lease-based leader election with two real candidates on one apiserver."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drakit.kubeapi.leaderelection import LeaderElectionConfig, LeaderElector
from drakit.kubeapi.resources import LEASES, Resource

pytestmark = pytest.mark.integration


class Candidate:
    """An elector plus a record of what its callbacks saw."""

    def __init__(self, api: Any, lease: str, namespace: str, identity: str, **timing: Any) -> None:
        self.identity = identity
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.leading_ended = threading.Event()
        config = LeaderElectionConfig(lease, namespace, identity, **timing)
        self.elector = LeaderElector(
            api,
            config,
            on_started_leading=self._lead,
            on_stopped_leading=self.stopped.set,
        )

    def _lead(self, stop: threading.Event) -> None:
        self.started.set()
        stop.wait()
        self.leading_ended.set()


@pytest.fixture
def candidates(api: Any, namespace: str) -> Iterator[Callable[..., Candidate]]:
    made: list[Candidate] = []
    lease = f"lease-{uuid.uuid4().hex[:6]}"

    def make(identity: str, **overrides: Any) -> Candidate:
        timing = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5, **overrides}
        candidate = Candidate(api, lease, namespace, identity, **timing)
        made.append(candidate)
        return candidate

    yield make
    for candidate in made:
        candidate.elector.stop()


def holder(api: Any, namespace: str, lease: str) -> str:
    obj = Resource(api, LEASES).get(lease, namespace)
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def test_of_two_candidates_exactly_one_leads(
    api: Any, namespace: str, candidates: Callable[..., Candidate], eventually: Any
) -> None:
    a, b = candidates("a"), candidates("b")
    a.elector.start()
    b.elector.start()
    leader = eventually(lambda: next((c for c in (a, b) if c.started.is_set()), None))
    follower = b if leader is a else a
    # Several renew periods later, still only one has ever led.
    for _ in range(6):
        threading.Event().wait(0.5)
        assert not follower.started.is_set()
        assert leader.elector.is_leader() and not follower.elector.is_leader()
    assert follower.elector.leader == leader.identity
    lease = leader.elector.config.lease_name
    assert holder(api, namespace, lease) == leader.identity


def test_a_released_lease_is_taken_over_by_the_standby(
    api: Any, namespace: str, candidates: Callable[..., Candidate], eventually: Any
) -> None:
    a = candidates("a", lease_duration=60.0, renew_deadline=40.0)
    b = candidates("b", lease_duration=60.0, renew_deadline=40.0)
    a.elector.start()
    eventually(a.started.is_set)
    b.elector.start()
    a.elector.stop()
    assert a.leading_ended.is_set() and a.stopped.is_set()
    # With a 60 s lease, b can only lead this soon because a released the Lease on stop.
    eventually(b.started.is_set, timeout=30)
    assert holder(api, namespace, a.elector.config.lease_name) == "b"


def test_the_standby_takes_over_when_the_leader_dies_without_releasing(
    api: Any, namespace: str, candidates: Callable[..., Candidate], eventually: Any
) -> None:
    a = candidates("a", release_on_stop=False)  # a crash: the Lease stays held until it expires
    b = candidates("b")
    a.elector.start()
    eventually(a.started.is_set)
    b.elector.start()
    a.elector.stop()
    assert holder(api, namespace, a.elector.config.lease_name) == "a"
    eventually(b.started.is_set)
    assert holder(api, namespace, a.elector.config.lease_name) == "b"
    lease = Resource(api, LEASES).get(a.elector.config.lease_name, namespace)
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_steps_down(
    api: Any, namespace: str, candidates: Callable[..., Candidate], eventually: Any
) -> None:
    a = candidates("a")
    a.elector.start()
    eventually(a.started.is_set)
    # Someone else takes the Lease by force (as if a's renewals had failed for too long).
    leases = Resource(api, LEASES)
    lease = leases.get(a.elector.config.lease_name, namespace)
    lease["spec"]["holderIdentity"] = "intruder"
    lease["spec"]["leaseDurationSeconds"] = 3600
    leases.update(lease)
    eventually(a.leading_ended.is_set)
    eventually(a.stopped.is_set)
    assert not a.elector.is_leader()


def test_a_leader_paused_past_its_renew_deadline_does_not_hold_the_lease_on_waking(
    api: Any, namespace: str
) -> None:
    """A SIGSTOPped leader (soak seed 7) wakes before its renew loop notices the deadline
    passed: ``is_leader()`` still says yes, ``holds_lease()`` must not."""
    paused_for = [0.0]
    started = threading.Event()

    def lead(stop: threading.Event) -> None:
        started.set()
        stop.wait()

    # Renewals every 10 s: the check below runs well between two of them.
    config = LeaderElectionConfig(
        f"lease-{uuid.uuid4().hex[:6]}", namespace, "sleeper",
        lease_duration=40.0, renew_deadline=30.0, retry_period=10.0,
    )  # fmt: skip
    elector = LeaderElector(
        api, config, on_started_leading=lead, clock=lambda: time.monotonic() + paused_for[0]
    )
    elector.start()
    try:
        assert started.wait(30)
        assert elector.holds_lease()
        paused_for[0] = 31.0  # the monotonic clock ran on while the process was stopped
        assert elector.is_leader()
        assert not elector.holds_lease()
    finally:
        elector.stop()
