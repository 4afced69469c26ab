"""The health policy against the real apiserver: taints per reason with their effect, lifted on
recovery, Events on the Node, effect changes, a flapping device's timeAdded, and NoExecute
requested by the node plugins and granted by the controller's budget across two nodes."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from publisher_support import HealthDevices

from drakit.controller.noexecute.decision import Budget
from drakit.controller.noexecute.rules import BUDGET_LABEL
from drakit.controller.noexecute.runner import NoExecuteBudget, rule_type
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import EVENTS, Resource
from drakit.node_plugin.health.policy import HealthPolicy

pytestmark = pytest.mark.integration


def node_slices(slices: Resource, node: str) -> list[KubeObject]:
    """The node's slices of any driver (each test has a driver of its own)."""
    return slices.list(field_selector=f"spec.nodeName={node}").items


def _taint(slices: Resource, node: str, device: str) -> dict[str, Any] | None:
    for s in node_slices(slices, node):
        for d in s["spec"].get("devices") or ():
            if d["name"] == device:
                taints = d.get("taints") or []
                return taints[0] if taints else None
    return None


def _effect(slices: Resource, node: str, device: str) -> str | None:
    taint = _taint(slices, node, device)
    return taint["effect"] if taint else None


def _requested(slices: Resource, node: str, device: str) -> bool:
    """The device carries the node plugin's NoExecute request (effect None)."""
    for s in node_slices(slices, node):
        for d in s["spec"].get("devices") or ():
            if d["name"] == device:
                return any(
                    t["key"].endswith("/noexecute-request") and t["effect"] == "None"
                    for t in d.get("taints") or ()
                )
    return False


def _events(api: Any, node: str, reason: str) -> list[KubeObject]:
    return [
        e
        for e in Resource(api, EVENTS).list("default").items
        if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == node
    ]


def test_a_device_gets_its_reasons_effect_and_loses_the_taint_when_it_recovers(
    *,
    api: Any,
    health_driver: str,
    fake_nodes: Any,
    health_publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    devices = HealthDevices(fake_nodes(), 4)
    policy = HealthPolicy(effects=(("DeviceNodeMissing", "NoExecute"),), healthy_for=0)
    publisher = health_publishers(devices, policy)
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")

    devices.set("gpu-1", "DeviceNodeMissing")
    devices.set("gpu-2", "EccErrors")
    eventually(lambda: _requested(slices, devices.node, "gpu-1"), what="NoExecute requested")
    eventually(lambda: _effect(slices, devices.node, "gpu-2") == "NoSchedule", what="NoSchedule")
    assert _effect(slices, devices.node, "gpu-1") == "NoSchedule"  # the plugin's own taint
    assert not _requested(slices, devices.node, "gpu-2")
    taint = _taint(slices, devices.node, "gpu-1")
    assert taint is not None
    assert (taint["key"], taint["value"]) == (f"{health_driver}/unhealthy", "DeviceNodeMissing")
    assert taint.get("timeAdded"), "the apiserver stamps the time the taint was added"
    eventually(lambda: len(_events(api, devices.node, "DeviceUnhealthy")) == 2, what="Events")

    devices.set("gpu-1", None)
    eventually(lambda: _taint(slices, devices.node, "gpu-1") is None, what="taint lifted")
    (recovered,) = eventually(
        lambda: _events(api, devices.node, "DeviceRecovered"), what="DeviceRecovered Event"
    )
    assert recovered["type"] == "Normal"
    assert f"{devices.node}/gpu-1 is healthy again" in recovered["note"]
    assert _effect(slices, devices.node, "gpu-2") == "NoSchedule"
    registry = publisher.metrics.registry
    labels = {"driver": health_driver, "pool": devices.node, "device": "gpu-1"}
    for direction in ("Unhealthy", "Recovered"):
        got = registry.get_sample_value(
            "drakit_node_plugin_health_transitions_total", {**labels, "direction": direction}
        )
        assert got == 1


def test_a_report_only_policy_records_the_transition_without_a_taint(
    *, api: Any, fake_nodes: Any, health_publishers: Any, slices: Resource, eventually: Any
) -> None:
    devices = HealthDevices(fake_nodes(), 2)
    health_publishers(devices, HealthPolicy(default_effect="None"))
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")
    devices.set("gpu-0", "EccErrors")
    eventually(lambda: _events(api, devices.node, "DeviceUnhealthy"), what="DeviceUnhealthy")
    assert _taint(slices, devices.node, "gpu-0") is None


def test_plugins_request_noexecute_and_the_controllers_budget_grants_one_across_nodes(
    *, api: Any, fake_nodes: Any, health_publishers: Any, slices: Resource, eventually: Any
) -> None:
    # 2 nodes x 5 devices, 10 %: one device of the driver may hold NoExecute at a time. The
    # plugins carry NoSchedule and the request; the controller's budget (the runner the
    # controller starts, here on its own) writes the one DeviceTaintRule.
    policy = HealthPolicy(default_effect="NoExecute", healthy_for=0)
    a, b = HealthDevices(fake_nodes(), 5), HealthDevices(fake_nodes(), 5)
    health_publishers(a, policy)
    publisher = health_publishers(b, policy)
    for d in (a, b):
        eventually(lambda d=d: len(node_slices(slices, d.node)) == 1, what="published")
    budget = NoExecuteBudget(
        api, Budget(per_node=1, percent=10), list_slices=lambda: slices.list().items
    )
    budget.start()

    def granted() -> set[tuple[str, str]]:
        budget.kick()  # the controller kicks it on every slice event of its cache
        return _granted(api, publisher.driver)

    try:
        a.set("gpu-0", "DeviceNodeMissing")
        eventually(lambda: granted() == {(a.node, "gpu-0")}, what="a's rule")
        assert _keys(slices, a.node, "gpu-0") == {
            ("NoSchedule", f"{publisher.driver}/unhealthy"),
            ("None", f"{publisher.driver}/noexecute-request"),
        }
        b.set("gpu-0", "DeviceNodeMissing")
        eventually(lambda: _keys(slices, b.node, "gpu-0") == _keys(slices, a.node, "gpu-0")
                   != set(), what="b's request")  # fmt: skip
        eventually(lambda: granted() and budget.last[publisher.driver].plan.waiting,
                   what="b waits")  # fmt: skip
        assert _granted(api, publisher.driver) == {(a.node, "gpu-0")}

        a.set("gpu-0", None)
        eventually(lambda: granted() == {(b.node, "gpu-0")}, what="passed on")
        assert _taint(slices, a.node, "gpu-0") is None
    finally:
        budget.stop()
        rules = Resource(api, rule_type("v1"))
        for rule in rules.list(label_selector=f"{BUDGET_LABEL}={publisher.driver}").items:
            rules.delete(rule["metadata"]["name"])


def _keys(slices: Resource, node: str, device: str) -> set[tuple[str, str]]:
    for s in node_slices(slices, node):
        for d in s["spec"].get("devices") or ():
            if d["name"] == device:
                return {(t["effect"], t["key"]) for t in d.get("taints") or ()}
    return set()


def _granted(api: Any, driver: str) -> set[tuple[str, str]]:
    """(pool, device) of the budget's DeviceTaintRules of ``driver``."""
    rules = Resource(api, rule_type("v1")).list(label_selector=f"{BUDGET_LABEL}={driver}")
    selectors = (r["spec"]["deviceSelector"] for r in rules.items)
    return {(sel["pool"], sel["device"]) for sel in selectors}


def _stamp_seconds(taint: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(taint["timeAdded"].replace("Z", "+00:00")).timestamp()


def test_a_flapping_device_gets_its_taint_back_with_the_same_time_added(
    *, api: Any, fake_nodes: Any, health_publishers: Any, slices: Resource, eventually: Any
) -> None:
    devices = HealthDevices(fake_nodes(), 2)
    policy = HealthPolicy(default_effect="NoExecute", healthy_for=0, flap_window=600)
    publisher = health_publishers(devices, policy)
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")
    devices.set("gpu-0", "Xid79")
    first = eventually(lambda: _taint(slices, devices.node, "gpu-0"), what="the first taint")
    devices.set("gpu-0", None)
    eventually(lambda: _taint(slices, devices.node, "gpu-0") is None, what="the taint lifted")
    # timeAdded has whole seconds: a new stamp would differ once the second has turned.
    eventually(lambda: time.time() >= _stamp_seconds(first) + 1.5, what="the next second")
    devices.set("gpu-0", "Xid48")  # fails again, for another reason
    again = eventually(lambda: _taint(slices, devices.node, "gpu-0"), what="the taint back")
    assert (again["value"], again["effect"]) == ("Xid48", "NoSchedule")
    assert _requested(slices, devices.node, "gpu-0")
    assert again["timeAdded"] == first["timeAdded"]
    # The kept time causes no update loop: ten more reports write nothing.
    (stored,) = node_slices(slices, devices.node)
    reads = devices.backend.discoveries
    eventually(lambda: devices.backend.discoveries >= reads + 10, what="ten more reports")
    assert (
        node_slices(slices, devices.node)[0]["metadata"]["resourceVersion"]
        == (stored["metadata"]["resourceVersion"])
    )
    changed = publisher.metrics.registry.get_sample_value(
        "drakit_node_plugin_health_effect_changes_total",
        {"driver": publisher.driver, "from": "None", "to": "NoExecute"},
    )
    assert changed == 2


def test_a_reason_change_while_unhealthy_changes_the_effect_with_an_event(
    *, api: Any, fake_nodes: Any, health_publishers: Any, slices: Resource, eventually: Any
) -> None:
    devices = HealthDevices(fake_nodes(), 2)
    policy = HealthPolicy(effects=(("Xid79", "NoExecute"),))
    health_publishers(devices, policy)
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")
    devices.set("gpu-0", "EccErrors")
    eventually(lambda: _effect(slices, devices.node, "gpu-0") == "NoSchedule", what="NoSchedule")
    devices.set("gpu-0", "Xid79")
    eventually(lambda: _requested(slices, devices.node, "gpu-0"), what="NoExecute requested")
    assert _effect(slices, devices.node, "gpu-0") == "NoSchedule"
    (changed,) = eventually(
        lambda: _events(api, devices.node, "DeviceTaintEffectChanged"), what="the Event"
    )
    assert changed["type"] == "Warning"
    assert "taint effect NoSchedule -> NoExecute (health reason Xid79" in changed["note"]


def test_a_report_is_read_when_a_dwell_ends_not_only_at_the_interval(
    *, fake_nodes: Any, health_publishers: Any, slices: Resource, eventually: Any
) -> None:
    # Reports come only with change notices and when a dwell ends (the interval is an hour):
    # the taint is lifted once the device has been healthy for 2 s, with no notice then.
    devices = HealthDevices(fake_nodes(), 1)
    health_publishers(devices, HealthPolicy(healthy_for=2), interval=3600)
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")
    devices.set("gpu-0", "EccErrors")
    eventually(lambda: _effect(slices, devices.node, "gpu-0") == "NoSchedule", what="tainted")
    devices.set("gpu-0", None)  # the last notice: its report starts the 2 s dwell
    eventually(lambda: _taint(slices, devices.node, "gpu-0") is None, what="lifted", timeout=60)
