"""The health policy against the real apiserver: taints per reason with their effect, lifted on
recovery, Events on the Node, and the cluster-wide NoExecute budget across two nodes."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from publisher_support import Pool, StaticBackend, make_node, plain_devices

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import EVENTS, NODES, Resource
from drakit.node_plugin.health.policy import HealthPolicy
from drakit.node_plugin.publisher import Publisher

pytestmark = pytest.mark.integration

#: Reports every 0.2 s: the hysteresis and the budget move without waiting on a backend.
_TICK = 0.2


@dataclass(frozen=True)
class _Health:
    pool_name: str
    device_name: str
    health: str
    reason: str = ""
    message: str = ""


class _Devices:
    """A node's devices and the health the test sets for them (a backend with health)."""

    def __init__(self, node: str, count: int) -> None:
        self.node = node
        self.backend = StaticBackend([Pool(node, plain_devices(count))])
        self._bad: dict[str, str] = {}
        self._lock = threading.Lock()

    def set(self, device: str, reason: str | None) -> None:
        """``reason`` None: healthy again."""
        with self._lock:
            if reason is None:
                self._bad.pop(device, None)
            else:
                self._bad[device] = reason
        self.backend.set(self.backend.pools)

    def health(self) -> list[_Health]:
        with self._lock:
            bad = dict(self._bad)
        return [
            _Health(
                self.node, d.name, "Unhealthy" if d.name in bad else "Healthy", bad.get(d.name, "")
            )
            for d in self.backend.pools[0].devices
        ]


@pytest.fixture
def driver() -> str:
    """A driver of this test alone: the budget counts every slice of the driver."""
    return f"health-{uuid.uuid4().hex[:8]}.drakit.dev"


@pytest.fixture
def nodes(api: Any) -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def make() -> str:
        name = f"node-{uuid.uuid4().hex[:8]}"
        make_node(api, name)
        made.append(name)
        return name

    yield make
    for name in made:
        with contextlib.suppress(NotFound):
            Resource(api, NODES).delete(name)


@pytest.fixture
def start(api: Any, driver: str) -> Iterator[Callable[..., Publisher]]:
    started: list[Publisher] = []

    def run(devices: _Devices, policy: HealthPolicy) -> Publisher:
        publisher = Publisher(
            api, driver, devices.node, devices.backend, health=devices.health,
            health_policy=policy, health_interval=_TICK,
        )  # fmt: skip
        publisher.start()
        started.append(publisher)
        return publisher

    yield run
    for publisher in started:
        publisher.stop()


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


def _events(api: Any, node: str, reason: str) -> list[KubeObject]:
    return [
        e
        for e in Resource(api, EVENTS).list("default").items
        if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == node
    ]


def test_a_device_gets_its_reasons_effect_and_loses_the_taint_when_it_recovers(
    *, api: Any, driver: str, nodes: Any, start: Any, slices: Resource, eventually: Any
) -> None:
    devices = _Devices(nodes(), 4)
    policy = HealthPolicy(
        effects=(("DeviceNodeMissing", "NoExecute"),), noexecute_cluster_percent=100
    )
    publisher = start(devices, policy)
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")

    devices.set("gpu-1", "DeviceNodeMissing")
    devices.set("gpu-2", "EccErrors")
    eventually(lambda: _effect(slices, devices.node, "gpu-1") == "NoExecute", what="NoExecute")
    eventually(lambda: _effect(slices, devices.node, "gpu-2") == "NoSchedule", what="NoSchedule")
    taint = _taint(slices, devices.node, "gpu-1")
    assert taint is not None
    assert (taint["key"], taint["value"]) == (f"{driver}/unhealthy", "DeviceNodeMissing")
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
    labels = {"driver": driver, "pool": devices.node, "device": "gpu-1"}
    for direction in ("Unhealthy", "Recovered"):
        got = registry.get_sample_value(
            "drakit_node_plugin_health_transitions_total", {**labels, "direction": direction}
        )
        assert got == 1


def test_a_report_only_policy_records_the_transition_without_a_taint(
    *, api: Any, nodes: Any, start: Any, slices: Resource, eventually: Any
) -> None:
    devices = _Devices(nodes(), 2)
    start(devices, HealthPolicy(default_effect="None"))
    eventually(lambda: len(node_slices(slices, devices.node)) == 1, what="published")
    devices.set("gpu-0", "EccErrors")
    eventually(lambda: _events(api, devices.node, "DeviceUnhealthy"), what="DeviceUnhealthy")
    assert _taint(slices, devices.node, "gpu-0") is None


def test_the_cluster_wide_budget_holds_across_nodes_and_frees_on_recovery(
    *, api: Any, nodes: Any, start: Any, slices: Resource, eventually: Any
) -> None:
    # 2 nodes x 5 devices, 10 %: one device of the driver may hold NoExecute at a time.
    policy = HealthPolicy(default_effect="NoExecute", noexecute_cluster_percent=10)
    a, b = _Devices(nodes(), 5), _Devices(nodes(), 5)
    start(a, policy)
    publisher_b = start(b, policy)
    for d in (a, b):
        eventually(lambda d=d: len(node_slices(slices, d.node)) == 1, what="published")

    a.set("gpu-0", "DeviceNodeMissing")
    eventually(lambda: _effect(slices, a.node, "gpu-0") == "NoExecute", what="a's NoExecute")
    b.set("gpu-0", "DeviceNodeMissing")
    eventually(lambda: _effect(slices, b.node, "gpu-0") == "NoSchedule", what="b demoted")
    (exceeded,) = eventually(
        lambda: _events(api, b.node, "DeviceTaintBudgetExceeded"), what="budget Event"
    )
    assert exceeded["type"] == "Warning"
    over = publisher_b.metrics.registry.get_sample_value(
        "drakit_node_plugin_health_noexecute_over_budget", {"driver": publisher_b.driver}
    )
    assert over == 1
    assert _effect(slices, a.node, "gpu-0") == "NoExecute"

    a.set("gpu-0", None)
    eventually(lambda: _effect(slices, b.node, "gpu-0") == "NoExecute", what="b promoted")
    assert _taint(slices, a.node, "gpu-0") is None
