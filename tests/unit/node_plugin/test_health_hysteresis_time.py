"""The health hysteresis counts seconds on an injected clock, never reports (pure logic)."""

from __future__ import annotations

import pytest
from helpers.clock import FakeClock

from drakit.node_plugin.health.hysteresis import Hysteresis, Observation

A = ("pool", "a")
B = ("pool", "b")


def _report(**health: str) -> list[Observation]:
    return [
        Observation(("pool", name), h, reason="Bad" if h == "Unhealthy" else "")
        for name, h in health.items()
    ]


def _hysteresis(
    clock: FakeClock, unhealthy_for: float = 0, healthy_for: float = 0, flap_window: float = 0
) -> Hysteresis:
    return Hysteresis(unhealthy_for, healthy_for, flap_window, clock=clock)


def _directions(h: Hysteresis, **health: str) -> list[str]:
    return [t.direction for t in h.observe(_report(**health))]


def test_a_device_turns_unhealthy_only_once_it_was_reported_unhealthy_for_the_dwell() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, unhealthy_for=30)
    assert _directions(h, a="Unhealthy") == []
    clock.advance(29.9)
    assert _directions(h, a="Unhealthy") == []
    clock.advance(0.1)
    (t,) = h.observe(_report(a="Unhealthy"))
    assert (t.key, t.direction, t.reason) == (A, "Unhealthy", "Bad")
    assert h.unhealthy() == {A: "Bad"}


@pytest.mark.parametrize("reports_in_between", [1, 10, 1000])
def test_extra_reports_such_as_change_notices_do_not_hurry_a_dwell(
    reports_in_between: int,
) -> None:
    # A backend that announces changes often makes the publisher read many reports; however
    # many arrive, the device is declared only when the dwell has passed, in both directions.
    clock = FakeClock()
    h = _hysteresis(clock, unhealthy_for=20, healthy_for=40)
    start = clock.now
    for i in range(reports_in_between):  # all within the first 19 s of the run
        clock.now = start + 19 * i / reports_in_between
        assert _directions(h, a="Unhealthy") == []
    clock.now = start + 20
    assert _directions(h, a="Unhealthy") == ["Unhealthy"]
    start = clock.now + 1
    for i in range(reports_in_between):
        clock.now = start + 39 * i / reports_in_between
        assert _directions(h, a="Healthy") == []
    clock.now = start + 40
    assert _directions(h, a="Healthy") == ["Recovered"]


def test_a_contrary_report_breaks_a_run_and_its_clock_starts_over() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, unhealthy_for=10)
    h.observe(_report(a="Unhealthy"))
    clock.advance(9)
    h.observe(_report(a="Healthy"))  # the run breaks
    clock.advance(1)
    assert _directions(h, a="Unhealthy") == []  # a new run starts here
    clock.advance(9)
    assert _directions(h, a="Unhealthy") == []
    clock.advance(1)
    assert _directions(h, a="Unhealthy") == ["Unhealthy"]


def test_unknown_reports_neither_extend_nor_break_a_run() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, unhealthy_for=10)
    h.observe(_report(a="Unhealthy"))
    clock.advance(10)
    assert _directions(h, a="Unknown") == []  # cannot declare: the backend could not tell
    assert _directions(h, a="Unhealthy") == ["Unhealthy"]  # the run went on meanwhile


def test_a_device_recovers_only_once_it_was_reported_healthy_for_the_dwell() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, healthy_for=30)
    assert _directions(h, a="Unhealthy") == ["Unhealthy"]
    clock.advance(10)
    assert _directions(h, a="Healthy") == []
    clock.advance(29)
    assert _directions(h, a="Healthy") == []
    clock.advance(1)
    assert _directions(h, a="Healthy") == ["Recovered"]
    assert h.unhealthy() == {}


def _flap(h: Hysteresis, clock: FakeClock) -> float:
    """Fail, then report Healthy every second until recovered; return the seconds it took."""
    assert _directions(h, a="Unhealthy") == ["Unhealthy"]
    clock.advance(1)
    start = clock.now
    while _directions(h, a="Healthy") != ["Recovered"]:
        clock.advance(1)
    return clock.now - start


def test_a_flapping_device_waits_twice_as_long_to_recover_each_time_up_to_the_window() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, healthy_for=30, flap_window=200)
    assert [_flap(h, clock) for _ in range(5)] == [30, 60, 120, 200, 200]
    assert h.flaps(A) == 4


def test_a_device_that_stays_healthy_for_the_window_is_forgiven() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, healthy_for=30, flap_window=200)
    assert [_flap(h, clock) for _ in range(2)] == [30, 60]
    clock.advance(199)
    assert _flap(h, clock) == 120  # failed again within the window: still flapping
    clock.advance(200)
    assert _flap(h, clock) == 30


def test_without_a_flap_window_recovery_never_backs_off() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, healthy_for=30, flap_window=0)
    assert [_flap(h, clock) for _ in range(3)] == [30, 30, 30]


def test_next_due_is_when_the_earliest_running_dwell_ends() -> None:
    clock = FakeClock(now=100)
    h = _hysteresis(clock, unhealthy_for=20, healthy_for=30)
    assert h.next_due() is None
    h.observe(_report(a="Unhealthy", b="Healthy"))
    assert h.next_due() == 120
    clock.advance(20)
    h.observe(_report(a="Unhealthy", b="Healthy"))  # a is declared: its dwell is over
    assert h.next_due() is None
    clock.advance(5)
    h.observe(_report(a="Healthy", b="Healthy"))
    assert h.next_due() == 155


def test_seeded_devices_start_unhealthy_and_need_the_full_healthy_dwell() -> None:
    clock = FakeClock()
    h = _hysteresis(clock, healthy_for=30)
    h.seed({A: "DeviceNodeMissing"})
    assert _directions(h, a="Healthy") == []
    assert h.unhealthy() == {A: "DeviceNodeMissing"}
    clock.advance(30)
    assert _directions(h, a="Healthy") == ["Recovered"]


def test_a_device_missing_from_a_report_is_forgotten() -> None:
    clock = FakeClock()
    h = _hysteresis(clock)
    h.observe(_report(a="Unhealthy", b="Unhealthy"))
    assert h.observe(_report(b="Unhealthy")) == []
    assert h.unhealthy() == {B: "Bad"}
