"""The health engine: taints per device, Events and metrics on transitions (pure); a node
plugin requests NoExecute and never carries it (the controller's budget grants it)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from helpers.clock import FakeClock

from drakit.node_plugin.health.engine import DeviceTaintDecision, HealthEngine, PublishedTaint
from drakit.node_plugin.health.policy import EFFECTS, HealthPolicy
from drakit.telemetry.metrics import Registry

DRIVER = "gpu.example.com"


@dataclass(frozen=True)
class _Health:
    pool_name: str
    device_name: str
    health: str
    reason: str = ""
    message: str = ""


class _Rig:
    """An engine on a fake clock; each report comes ``interval`` seconds after the last."""

    def __init__(self, policy: HealthPolicy, interval: float = 10) -> None:
        self.registry = Registry()
        self.events: list[tuple[bool, str, str]] = []
        self.clock = FakeClock()
        self.interval = interval
        self.engine = HealthEngine(
            DRIVER, "n1", policy, registry=self.registry,
            notify=lambda *e: self.events.append(e), clock=self.clock,
        )  # fmt: skip

        # What this node's slices carry, as the publisher and the apiserver would make it.
        self.published: dict[tuple[str, str], PublishedTaint] = {}

    def report(
        self, reason: str = "DeviceNodeMissing", **health: str
    ) -> dict[tuple[str, str], DeviceTaintDecision]:
        self.clock.advance(self.interval)
        reports = [
            _Health("p", name, h, reason=reason if h == "Unhealthy" else "")
            for name, h in health.items()
        ]
        decisions = self.engine.evaluate(reports, dict(self.published))
        self._publish(decisions)
        return decisions

    def _publish(self, decisions: dict[tuple[str, str], DeviceTaintDecision]) -> None:
        """Write the decisions: a taint without a time keeps the time of the same taint
        already published (the publisher's sync), else the apiserver stamps the time now."""
        published: dict[tuple[str, str], PublishedTaint] = {}
        for key, d in decisions.items():
            old = self.published.get(key)
            same = old is not None and (old.value, old.effect) == (d.value, d.effect)
            stamp = d.time_added or (old.time_added if old and same else f"t={self.clock.now:g}")
            published[key] = PublishedTaint(d.value, d.effect, stamp, d.noexecute_requested)
        self.published = published

    def time_added(self, device: str) -> str | None:
        taint = self.published.get(("p", device))
        return taint.time_added if taint else None

    def effect_changes(self, old: str, new: str) -> float | None:
        return self.metric(
            "drakit_node_plugin_health_effect_changes_total", **{"from": old, "to": new}
        )

    def reasons(self) -> list[str]:
        return [e[1] for e in self.events]

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"driver": DRIVER, **labels})


def test_an_unhealthy_device_gets_the_reasons_effect_and_the_reason_as_value() -> None:
    rig = _Rig(HealthPolicy(effects=(("DeviceNodeMissing", "NoExecute"),)))
    assert rig.report(a="Unhealthy", b="Healthy") == {
        ("p", "a"): DeviceTaintDecision("NoSchedule", "DeviceNodeMissing", noexecute_requested=True)
    }
    assert [e[:2] for e in rig.events] == [(True, "DeviceUnhealthy")]
    assert "p/a is unhealthy (DeviceNodeMissing)" in rig.events[0][2]
    assert "NoExecute requested" in rig.events[0][2]
    assert rig.metric("drakit_node_plugin_health_tainted_devices", effect="NoExecute") == 1


def test_recovery_lifts_the_taint_with_an_event_and_a_counted_transition() -> None:
    rig = _Rig(HealthPolicy(healthy_for=0))
    rig.report(a="Unhealthy")
    assert rig.report(a="Healthy") == {}
    assert [e[:2] for e in rig.events] == [(True, "DeviceUnhealthy"), (False, "DeviceRecovered")]
    for direction in ("Unhealthy", "Recovered"):
        value = rig.metric(
            "drakit_node_plugin_health_transitions_total", pool="p", device="a",
            direction=direction,
        )  # fmt: skip
        assert value == 1
    assert rig.metric("drakit_node_plugin_health_tainted_devices", effect="NoSchedule") == 0


def test_report_only_effect_taints_nothing_but_records_the_transition() -> None:
    rig = _Rig(HealthPolicy(default_effect="None"))
    assert rig.report(a="Unhealthy") == {}
    assert [e[1] for e in rig.events] == ["DeviceUnhealthy"]
    assert rig.metric("drakit_node_plugin_health_tainted_devices", effect="None") == 1


@pytest.mark.parametrize("devices", [1, 2, 8])
def test_a_node_plugin_never_carries_noexecute_it_requests_it_for_every_device(
    devices: int,
) -> None:
    # The shared fault: however many devices fail at once, the node decides no
    # NoExecute (it used to grant up to its per-node budget from its own view): every device
    # carries NoSchedule and requests NoExecute; only the controller grants it.
    rig = _Rig(HealthPolicy(default_effect="NoExecute"))
    taints = rig.report(**{f"d{i}": "Unhealthy" for i in range(devices)})
    assert {d.effect for d in taints.values()} == {"NoSchedule"}
    assert all(d.noexecute_requested for d in taints.values())
    assert len(taints) == devices
    assert rig.reasons() == ["DeviceUnhealthy"] * devices


def test_a_noschedule_reason_makes_no_request() -> None:
    rig = _Rig(HealthPolicy(effects=(("Xid79", "NoExecute"),)))
    decision = rig.report(reason="Degraded", a="Unhealthy")[("p", "a")]
    assert (decision.effect, decision.noexecute_requested) == ("NoSchedule", False)


# -- every effect change is a transition with an Event and a metric ---------------------------

_REASON_OF = {"None": "Quiet", "NoSchedule": "Degraded", "NoExecute": "Broken"}
_EFFECT_POLICY = HealthPolicy(effects=tuple((r, e) for e, r in _REASON_OF.items()), healthy_for=0)


def test_a_reason_change_to_a_noexecute_reason_is_a_transition_with_an_event() -> None:
    rig = _Rig(_EFFECT_POLICY)
    assert not rig.report(reason="Degraded", a="Unhealthy")[("p", "a")].noexecute_requested
    decision = rig.report(reason="Broken", a="Unhealthy")[("p", "a")]
    assert (decision.effect, decision.noexecute_requested) == ("NoSchedule", True)
    assert rig.reasons() == ["DeviceUnhealthy", "DeviceTaintEffectChanged"]
    warning, _, note = rig.events[-1]
    assert warning
    assert "device p/a taint effect NoSchedule -> NoExecute (health reason Broken" in note
    assert rig.effect_changes("NoSchedule", "NoExecute") == 1


@pytest.mark.parametrize("old", list(_REASON_OF))
@pytest.mark.parametrize("new", list(_REASON_OF))
def test_every_effect_change_of_an_unhealthy_device_has_one_event_and_a_count(
    old: str, new: str
) -> None:
    rig = _Rig(_EFFECT_POLICY)
    rig.report(reason=_REASON_OF[old], a="Unhealthy")
    assert rig.reasons() == ["DeviceUnhealthy"]
    assert rig.effect_changes("None", old) == (1 if old != "None" else None)
    rig.report(reason=_REASON_OF[new], a="Unhealthy")
    if old == new:
        assert rig.reasons() == ["DeviceUnhealthy"]
        return
    assert rig.reasons() == ["DeviceUnhealthy", "DeviceTaintEffectChanged"]
    assert rig.events[-1][0] is (EFFECTS.index(new) > EFFECTS.index(old))  # stricter: Warning
    assert rig.effect_changes(old, new) == 1
    rig.report(a="Healthy")
    assert rig.reasons()[-1] == "DeviceRecovered"
    assert rig.effect_changes(new, "None") == (1 if new != "None" else None)


# -- flapping is damped in time; a taint put back keeps its timeAdded ------------------------


def test_with_the_default_policy_a_flapping_device_keeps_one_taint_and_its_time() -> None:
    # Bad and good reports in turn, one every 10 s for an hour: the device never stays
    # healthy for 30 s, so it is tainted once and its taint (and timeAdded) stays.
    rig = _Rig(HealthPolicy())
    times = set()
    for i in range(360):
        rig.report(a="Unhealthy" if i % 2 == 0 else "Healthy")
        times.add(rig.time_added("a"))
    assert rig.reasons() == ["DeviceUnhealthy"]
    assert times == {"t=1010"}


def test_a_flapping_device_keeps_its_taints_time_added_within_the_flap_window() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", healthy_for=0, flap_window=600))
    rig.report(a="Unhealthy")
    first = rig.time_added("a")
    for _ in range(5):
        assert rig.report(a="Healthy") == {}
        assert rig.time_added("a") is None  # the taint is lifted meanwhile
        decision = rig.report(a="Unhealthy")[("p", "a")]
        assert decision.time_added == first
    assert rig.reasons().count("DeviceUnhealthy") == 6


def test_a_taint_put_back_after_the_flap_window_gets_a_new_time() -> None:
    rig = _Rig(HealthPolicy(healthy_for=0, flap_window=600))
    rig.report(a="Unhealthy")
    rig.report(a="Healthy")
    rig.clock.advance(600)
    assert rig.report(a="Unhealthy")[("p", "a")].time_added is None
    assert rig.time_added("a") == f"t={rig.clock.now:g}"


def test_a_reason_that_requests_noexecute_keeps_the_noschedule_taints_time() -> None:
    # The plugin's taint stays NoSchedule when the reason changes to a NoExecute one (the
    # request is added beside it): its timeAdded, and the claims' clocks, stay.
    rig = _Rig(_EFFECT_POLICY)
    rig.report(reason="Degraded", a="Unhealthy")
    first = rig.time_added("a")
    decision = rig.report(reason="Broken", a="Unhealthy")[("p", "a")]
    assert (decision.time_added, decision.noexecute_requested) == (first, True)


def test_a_new_reason_with_the_same_effect_keeps_the_time() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute"))
    rig.report(reason="Xid79", a="Unhealthy")
    first = rig.time_added("a")
    decision = rig.report(reason="Xid48", a="Unhealthy")[("p", "a")]
    assert (decision.value, decision.time_added) == ("Xid48", first)


def test_a_restarted_engine_keeps_the_published_request_and_time() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute"))
    published = {
        ("p", "a"): PublishedTaint(
            "DeviceNodeMissing", "NoSchedule", "2026-01-01T00:00:00Z", noexecute_requested=True
        )
    }
    rig.engine.seed(published)
    rig.published = dict(published)
    decision = rig.report(a="Unhealthy")[("p", "a")]
    assert decision == DeviceTaintDecision(
        "NoSchedule", "DeviceNodeMissing", "2026-01-01T00:00:00Z", noexecute_requested=True
    )
    assert rig.events == []  # nothing changed


def test_a_noexecute_taint_of_an_older_plugin_becomes_noschedule_and_a_request() -> None:
    # Before the controller's budget, node plugins carried NoExecute themselves: after the
    # upgrade the device requests it instead (one change, with no Event: the policy effect
    # is the same), and the controller grants it within the budget.
    rig = _Rig(HealthPolicy(default_effect="NoExecute"))
    published = {("p", "a"): PublishedTaint("Xid79", "NoExecute", "2026-01-01T00:00:00Z")}
    rig.engine.seed(published)
    rig.published = dict(published)
    decision = rig.report(reason="Xid79", a="Unhealthy")[("p", "a")]
    assert (decision.effect, decision.noexecute_requested) == ("NoSchedule", True)
    assert rig.events == []


def test_next_due_asks_for_a_report_when_the_recovery_dwell_ends() -> None:
    rig = _Rig(HealthPolicy(healthy_for=30))
    rig.report(a="Unhealthy")
    assert rig.engine.next_due() is None
    rig.report(a="Healthy")
    assert rig.engine.next_due() == 30
    rig.clock.advance(12)
    assert rig.engine.next_due() == 18
