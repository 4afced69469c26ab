"""The health engine: taints per device, Events and metrics on transitions and budget (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from drakit.node_plugin.health.budget import ClusterTaints, Holder
from drakit.node_plugin.health.engine import DeviceTaintDecision, HealthEngine
from drakit.node_plugin.health.policy import HealthPolicy
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
    def __init__(self, policy: HealthPolicy, cluster: ClusterTaints | None = None) -> None:
        self.registry = Registry()
        self.events: list[tuple[bool, str, str]] = []
        self.cluster = cluster if cluster is not None else ClusterTaints(100)
        self.cluster_reads = 0
        self.engine = HealthEngine(
            DRIVER, "n1", policy, registry=self.registry, notify=lambda *e: self.events.append(e)
        )

    def _view(self) -> ClusterTaints | None:
        self.cluster_reads += 1
        return self.cluster

    def report(self, **health: str) -> dict[tuple[str, str], DeviceTaintDecision]:
        reports = [
            _Health("p", name, h, reason="DeviceNodeMissing" if h == "Unhealthy" else "")
            for name, h in health.items()
        ]
        return self.engine.evaluate(reports, self._view)

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
    rig = _Rig(HealthPolicy())
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
    rig = _Rig(HealthPolicy(default_effect="NoExecute", noexecute_per_node=1))
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
