"""The health engine: taints per device, Events and metrics on transitions and budget (pure)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from helpers.clock import FakeClock

from drakit.node_plugin.health.budget import ClusterTaints, Holder
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

    def __init__(
        self, policy: HealthPolicy, cluster: ClusterTaints | None = None, interval: float = 10
    ) -> None:
        self.registry = Registry()
        self.events: list[tuple[bool, str, str]] = []
        self.cluster = cluster if cluster is not None else ClusterTaints(100)
        self.cluster_reads = 0
        self.clock = FakeClock()
        self.interval = interval
        self.engine = HealthEngine(
            DRIVER, "n1", policy, registry=self.registry,
            notify=lambda *e: self.events.append(e), clock=self.clock,
        )  # fmt: skip

        # What this node's slices carry, as the publisher and the apiserver would make it.
        self.published: dict[tuple[str, str], PublishedTaint] = {}

    def _view(self) -> ClusterTaints | None:
        self.cluster_reads += 1
        return self.cluster

    def report(
        self, reason: str = "DeviceNodeMissing", **health: str
    ) -> dict[tuple[str, str], DeviceTaintDecision]:
        self.clock.advance(self.interval)
        reports = [
            _Health("p", name, h, reason=reason if h == "Unhealthy" else "")
            for name, h in health.items()
        ]
        decisions = self.engine.evaluate(reports, self._view, dict(self.published))
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
            published[key] = PublishedTaint(d.value, d.effect, stamp)
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
        ("p", "a"): DeviceTaintDecision("NoExecute", "DeviceNodeMissing")
    }
    assert [e[:2] for e in rig.events] == [(True, "DeviceUnhealthy")]
    assert "p/a is unhealthy (DeviceNodeMissing)" in rig.events[0][2]
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


def test_past_the_node_budget_devices_get_noschedule_an_event_and_the_alert_metric() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_per_node=1))
    rig.report(a="Unhealthy")
    taints = rig.report(a="Unhealthy", b="Unhealthy")
    assert {k: d.effect for k, d in taints.items()} == {
        ("p", "a"): "NoExecute",
        ("p", "b"): "NoSchedule",
    }
    assert [e[1] for e in rig.events].count("DeviceTaintBudgetExceeded") == 1
    assert rig.metric("drakit_node_plugin_health_noexecute_over_budget") == 1
    rig.report(a="Unhealthy", b="Unhealthy")  # still over: no second Event
    assert [e[1] for e in rig.events].count("DeviceTaintBudgetExceeded") == 1


def test_when_the_first_device_recovers_the_next_one_gets_noexecute() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_per_node=1, healthy_for=0))
    rig.report(a="Unhealthy")
    rig.report(a="Unhealthy", b="Unhealthy")
    taints = rig.report(a="Healthy", b="Unhealthy")
    assert {k: d.effect for k, d in taints.items()} == {("p", "b"): "NoExecute"}
    assert rig.metric("drakit_node_plugin_health_noexecute_over_budget") == 0


def test_the_cluster_view_is_read_only_when_a_device_wants_noexecute() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoSchedule"))
    rig.report(a="Unhealthy")
    assert rig.cluster_reads == 0


def test_without_the_cluster_view_nothing_new_gets_noexecute() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_per_node=5))
    rig.report(a="Unhealthy")
    rig.cluster = None  # type: ignore[assignment]
    taints = rig.report(a="Unhealthy", b="Unhealthy")
    assert {k: d.effect for k, d in taints.items()} == {
        ("p", "a"): "NoExecute",
        ("p", "b"): "NoSchedule",
    }


def test_other_nodes_holding_the_cluster_budget_demote_this_nodes_device() -> None:
    full = ClusterTaints(10, (Holder("n2", ("q", "x"), "2026-01-01T00:00:00Z"),))
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=10), full)
    assert rig.report(a="Unhealthy")[("p", "a")].effect == "NoSchedule"


# -- every effect change is a transition with an Event and a metric ---------------------------

_REASON_OF = {"None": "Quiet", "NoSchedule": "Degraded", "NoExecute": "Broken"}
_EFFECT_POLICY = HealthPolicy(
    effects=tuple((r, e) for e, r in _REASON_OF.items()),
    noexecute_cluster_percent=100,
    noexecute_per_node=10,
    healthy_for=0,
)


def test_a_reason_change_to_a_noexecute_reason_is_a_transition_with_an_event() -> None:
    rig = _Rig(_EFFECT_POLICY)
    assert rig.report(reason="Degraded", a="Unhealthy")[("p", "a")].effect == "NoSchedule"
    assert rig.report(reason="Broken", a="Unhealthy")[("p", "a")].effect == "NoExecute"
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


def test_the_budget_granting_noexecute_later_is_an_effect_change_with_an_event() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_per_node=1, healthy_for=0))
    rig.report(a="Unhealthy", b="Unhealthy")
    assert rig.reasons() == ["DeviceUnhealthy", "DeviceUnhealthy", "DeviceTaintBudgetExceeded"]
    taints = rig.report(a="Healthy", b="Unhealthy")
    assert taints[("p", "b")].effect == "NoExecute"
    assert rig.reasons()[3:] == ["DeviceRecovered", "DeviceTaintEffectChanged"]
    assert "device p/b taint effect NoSchedule -> NoExecute" in rig.events[-1][2]
    assert rig.effect_changes("NoSchedule", "NoExecute") == 1


def test_losing_noexecute_to_the_budget_has_the_budget_event_only() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=10))
    rig.report(a="Unhealthy")
    rig.cluster = ClusterTaints(10, (Holder("n2", ("q", "x"), "2026-01-01T00:00:00Z"),))
    assert rig.report(a="Unhealthy")[("p", "a")].effect == "NoSchedule"
    assert rig.reasons() == ["DeviceUnhealthy", "DeviceTaintBudgetExceeded"]
    assert "holds NoSchedule instead of NoExecute (was NoExecute)" in rig.events[-1][2]
    assert rig.effect_changes("NoExecute", "NoSchedule") == 1


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


def test_a_taint_of_another_effect_gets_its_own_time() -> None:
    rig = _Rig(_EFFECT_POLICY)
    rig.report(reason="Degraded", a="Unhealthy")
    assert rig.report(reason="Broken", a="Unhealthy")[("p", "a")].time_added is None


def test_a_new_reason_with_the_same_effect_keeps_the_time() -> None:
    policy = HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=100)
    rig = _Rig(policy)
    rig.report(reason="Xid79", a="Unhealthy")
    first = rig.time_added("a")
    decision = rig.report(reason="Xid48", a="Unhealthy")[("p", "a")]
    assert (decision.value, decision.time_added) == ("Xid48", first)


def test_a_restarted_engine_keeps_the_published_effect_and_time() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=100))
    published = {
        ("p", "a"): PublishedTaint("DeviceNodeMissing", "NoExecute", "2026-01-01T00:00:00Z")
    }
    rig.engine.seed(published)
    rig.published = dict(published)
    decision = rig.report(a="Unhealthy")[("p", "a")]
    assert (decision.effect, decision.time_added) == ("NoExecute", "2026-01-01T00:00:00Z")
    assert rig.events == []  # nothing changed


def test_a_restarted_engine_keeps_noexecute_before_the_budgets_view_is_in() -> None:
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=100))
    published = {("p", "a"): PublishedTaint("Xid79", "NoExecute", "2026-01-01T00:00:00Z")}
    rig.engine.seed(published)
    rig.published = dict(published)
    rig.cluster = None  # type: ignore[assignment]
    assert rig.report(a="Unhealthy", b="Unhealthy") == {
        ("p", "a"): DeviceTaintDecision("NoExecute", "DeviceNodeMissing", "2026-01-01T00:00:00Z"),
        ("p", "b"): DeviceTaintDecision("NoSchedule", "DeviceNodeMissing"),
    }
    assert "the eviction budget cannot be checked" in rig.events[-1][2]


def test_next_due_asks_for_a_report_when_the_recovery_dwell_ends() -> None:
    rig = _Rig(HealthPolicy(healthy_for=30))
    rig.report(a="Unhealthy")
    assert rig.engine.next_due() is None
    rig.report(a="Healthy")
    assert rig.engine.next_due() == 30
    rig.clock.advance(12)
    assert rig.engine.next_due() == 18
