"""Unschedulable pods back off as in kube-scheduler: 1 s, doubling, at most 10 s, reset on
success (issue 30, item 5)."""

from __future__ import annotations

import pytest
from helpers.clock import FakeClock

from drakit.controller.backoff import PodBackoff


def test_backoff_doubles_from_one_second_up_to_ten() -> None:
    backoff = PodBackoff(clock=FakeClock())
    assert [backoff.failed("ns/p") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_woken_pod_waits_for_the_rest_of_its_backoff() -> None:
    clock = FakeClock()
    backoff = PodBackoff(clock=clock)
    backoff.failed("ns/p")
    backoff.failed("ns/p")  # 2 s from now
    clock.advance(0.5)
    assert backoff.remaining("ns/p") == pytest.approx(1.5)
    clock.advance(1.5)
    assert backoff.remaining("ns/p") == 0.0


def test_success_resets_the_backoff_to_its_initial_value() -> None:
    backoff = PodBackoff(clock=FakeClock())
    for _ in range(4):
        backoff.failed("ns/p")
    backoff.forget("ns/p")
    assert backoff.remaining("ns/p") == 0.0
    assert backoff.failed("ns/p") == 1.0


def test_pods_back_off_independently() -> None:
    backoff = PodBackoff(clock=FakeClock())
    backoff.failed("ns/a")
    backoff.failed("ns/a")
    assert backoff.remaining("ns/b") == 0.0
    assert backoff.failed("ns/b") == 1.0


def test_backoff_limits_must_be_ordered_and_positive() -> None:
    with pytest.raises(ValueError, match="initial <= maximum"):
        PodBackoff(initial=5.0, maximum=1.0)
