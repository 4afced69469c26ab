"""``run_leader_elected`` tells a clean stop from an election that died."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from drakit.controller.leader import run_leader_elected
from drakit.kubeapi.leaderelection import LeaderElectionConfig


class BrokenApi:
    """An API client whose every request fails with an unexpected (non-API) error."""

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("client bug")


def never_built() -> Any:
    raise AssertionError("the controller must not be built without leadership")


# The election thread dies of the RuntimeError on purpose; that is the case under test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_election_thread_dying_while_campaigning_is_a_failure_not_a_clean_exit() -> None:
    election = LeaderElectionConfig(
        lease_name="drakit-controller", namespace="kube-system", identity="a",
        lease_duration=2.0, renew_deadline=1.4, retry_period=0.3,
    )  # fmt: skip
    stop = threading.Event()
    assert run_leader_elected(BrokenApi(), election, never_built, stop) is False
    assert not stop.is_set()
