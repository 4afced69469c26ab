"""Helpers and fixtures for the publisher's integration tests: a fake Node, a backend whose
pools the test sets, and a counter of ResourceSlice writes as the apiserver itself counts them.

``conftest.py`` re-exports the fixtures; tests import the helpers from here."""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers.waiting import eventually

from drakit.allocator.model import CounterSet, Device
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.health.policy import HealthPolicy
from drakit.node_plugin.publisher import Publisher

DRIVER = "gpu.publisher.drakit.dev"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Pool:
    """A backend pool, shaped like ``drakit.plugin.PoolDescription``."""

    name: str
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass
class StaticBackend:
    """A backend whose pools the test sets; ``set`` notifies the subscriber like a real one."""

    pools: list[Pool] = field(default_factory=list)
    listeners: list[Callable[[], None]] = field(default_factory=list)
    discoveries: int = 0

    def discover(self) -> tuple[Pool, ...]:
        self.discoveries += 1
        return tuple(self.pools)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self.listeners.append(on_change)

    def set(self, pools: Sequence[Pool]) -> None:
        self.pools = list(pools)
        for listener in self.listeners:
            listener()


def plain_devices(count: int, *, prefix: str = "gpu", model: str = "a100") -> tuple[Device, ...]:
    return tuple(
        Device.from_dict(
            {
                "name": f"{prefix}-{i}",
                "attributes": {"model": {"string": model}, "index": {"int": i}},
                "capacity": {"memory": {"value": "40Gi"}},
            }
        )
        for i in range(count)
    )


@pytest.fixture
def slices(api: RateLimitedApiClient) -> Resource:
    return Resource(api, RESOURCE_SLICES)


def make_node(api: Any, name: str) -> KubeObject:
    """A Ready Node object without a kubelet (enough for the scheduler)."""
    nodes = Resource(api, NODES)
    node = nodes.create(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
        }
    )
    node["status"] = {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "fake node",
                "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        ],
    }
    return nodes.update_status(node)


@pytest.fixture
def node_name() -> str:
    return f"node-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def node(api: RateLimitedApiClient, node_name: str) -> Iterator[KubeObject]:
    obj = make_node(api, node_name)
    yield obj
    with contextlib.suppress(NotFound):
        Resource(api, NODES).delete(node_name)


@pytest.fixture
def publishers(api: RateLimitedApiClient) -> Iterator[Callable[..., Publisher]]:
    """``publishers(node_name, backend, **kw)``: a started Publisher, stopped after the test."""
    started: list[Publisher] = []

    def start(node_name: str, backend: StaticBackend, **kwargs: Any) -> Publisher:
        publisher = Publisher(api, DRIVER, node_name, backend, **kwargs)
        publisher.start()
        started.append(publisher)
        return publisher

    yield start
    for publisher in started:
        publisher.stop()


Wait = Callable[..., Any]


_REQUEST_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def slice_writes(cluster: LocalCluster) -> dict[str, int]:
    """ResourceSlice write requests the apiserver has served so far, by verb (all results)."""
    totals = dict.fromkeys(WRITE_VERBS, 0)
    for line in cluster.apiserver_metrics().splitlines():
        match = _REQUEST_LINE.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("resource") == "resourceslices" and labels.get("verb") in totals:
            totals[labels["verb"]] += int(float(match["value"]))
    return totals


class WriteCounter:
    """Counts ResourceSlice writes at the apiserver between ``reset()`` and ``delta()``."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self._base = slice_writes(cluster)

    def reset(self) -> None:
        self._base = slice_writes(self._cluster)

    def delta(self) -> dict[str, int]:
        now = slice_writes(self._cluster)
        return {verb: now[verb] - self._base[verb] for verb in WRITE_VERBS}

    def total(self) -> int:
        return sum(self.delta().values())


@pytest.fixture
def writes(cluster: LocalCluster) -> WriteCounter:
    return WriteCounter(cluster)


def node_slices(slices: Resource, node_name: str) -> list[KubeObject]:
    return slices.list(field_selector=f"spec.driver={DRIVER},spec.nodeName={node_name}").items


def settle(publisher: Publisher, slices: Resource, node_name: str, quiet: float = 1.5) -> None:
    """Wait until the node's slices stop changing for ``quiet`` seconds (the publisher's own
    echo syncs run ``repair_delay`` after each write)."""
    last = ""
    stable_since = time.monotonic()

    def quiet_long_enough() -> bool:
        nonlocal last, stable_since
        current = repr(
            sorted(
                (s["metadata"]["name"], s["metadata"]["resourceVersion"])
                for s in node_slices(slices, node_name)
            )
        )
        if current != last:
            last, stable_since = current, time.monotonic()
        return time.monotonic() - stable_since >= quiet

    eventually(
        quiet_long_enough,
        lambda: f"the slices of {node_name} to stop changing for {quiet:g}s (last: {last})",
        timeout=60,
    )


# -- health ------------------------------------------------------------------------------------

#: Health reports every 0.2 s: the policy and the budget move without waiting on a backend.
HEALTH_TICK = 0.2


@dataclass(frozen=True)
class HealthReport:
    """One device's health, shaped like ``drakit.node_plugin.driver.DeviceHealth``."""

    pool_name: str
    device_name: str
    health: str
    reason: str = ""
    message: str = ""


class HealthDevices:
    """A node's devices and the health the test sets for them (a backend with health)."""

    def __init__(self, node: str, count: int) -> None:
        self.node = node
        self.backend = StaticBackend([Pool(node, plain_devices(count))])
        self._bad: dict[str, str] = {}
        self._lock = threading.Lock()

    def set(self, device: str, reason: str | None) -> None:
        """``reason`` None: healthy again. Notifies like a backend's change."""
        with self._lock:
            if reason is None:
                self._bad.pop(device, None)
            else:
                self._bad[device] = reason
        self.backend.set(self.backend.pools)

    def health(self) -> list[HealthReport]:
        with self._lock:
            bad = dict(self._bad)
        return [
            HealthReport(
                self.node, d.name, "Unhealthy" if d.name in bad else "Healthy", bad.get(d.name, "")
            )
            for d in self.backend.pools[0].devices
        ]


@pytest.fixture
def health_driver() -> str:
    """A driver of this test alone: the budget counts every slice of the driver."""
    return f"health-{uuid.uuid4().hex[:8]}.drakit.dev"


@pytest.fixture
def fake_nodes(api: RateLimitedApiClient) -> Iterator[Callable[[], str]]:
    """``fake_nodes()``: the name of a new Node object (no kubelet), deleted after the test."""
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
def health_publishers(
    api: RateLimitedApiClient, health_driver: str
) -> Iterator[Callable[..., Publisher]]:
    """``health_publishers(devices, policy, client=None, interval=HEALTH_TICK)``: a started
    Publisher of ``health_driver`` reading ``devices``' health every ``interval`` seconds,
    stopped after the test."""
    started: list[Publisher] = []

    def run(
        devices: HealthDevices,
        policy: HealthPolicy,
        client: Any = None,
        interval: float = HEALTH_TICK,
    ) -> Publisher:
        publisher = Publisher(
            client or api, health_driver, devices.node, devices.backend,
            health=devices.health, health_policy=policy, health_interval=interval,
        )  # fmt: skip
        publisher.start()
        started.append(publisher)
        return publisher

    yield run
    for publisher in started:
        publisher.stop()
