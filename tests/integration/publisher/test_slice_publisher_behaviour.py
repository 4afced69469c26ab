"""The publisher's reactions: a missing Node, invalid descriptions, dropped fields, health
taints, advanced device features, per-device node selection (real apiserver)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from publisher_support import (
    DRIVER,
    Pool,
    StaticBackend,
    WriteCounter,
    make_node,
    node_slices,
    plain_devices,
    settle,
)

from drakit.allocator.model import CounterSet, Device
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import EVENTS, NODES, Resource
from drakit.node_plugin.backends.base import BackendContext
from drakit.node_plugin.backends.example import ExampleBackend
from drakit.node_plugin.driver import HealthStatus
from drakit.node_plugin.health.policy import HealthPolicy
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.publisher.sync import PER_DEVICE_NODE_LABEL
from drakit.node_plugin.wiring import build_publisher
from drakit.telemetry.endpoint import render_text

pytestmark = pytest.mark.integration


def _metric(counter: Any) -> float:
    return float(counter.get())


def _events(api: Any, node_name: str, reason: str) -> list[KubeObject]:
    return [
        e
        for e in Resource(api, EVENTS).list("default").items
        if e.get("reason") == reason and (e.get("regarding") or {}).get("name") == node_name
    ]


def test_a_missing_node_is_reported_and_publishing_starts_once_it_exists(
    *,
    api: Any,
    node_name: str,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="drakit.node_plugin.publisher.node")
    publisher = publishers(node_name, StaticBackend([Pool(node_name, plain_devices(3))]))
    eventually(
        lambda: sum("Node object not found" in r.getMessage() for r in caplog.records) >= 2,
        what="the missing Node is reported, more than once (it retries)",
    )
    assert not publisher.wait_ready(timeout=0)
    assert node_slices(slices, node_name) == []

    node = make_node(api, node_name)
    try:
        eventually(lambda: len(node_slices(slices, node_name)) == 1, what="published")
        (published,) = node_slices(slices, node_name)
        assert published["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    finally:
        publisher.stop()
        Resource(api, NODES).delete(node_name)


def test_an_invalid_description_is_reported_once_and_not_retried(
    *,
    api: Any,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    too_many = {f"attr{i}": {"int": i} for i in range(33)}
    bad = Device.from_dict({"name": "gpu-0", "attributes": too_many})
    backend = StaticBackend([Pool(name, (bad,))])
    publisher = publishers(name, backend)

    eventually(lambda: _metric(publisher.metrics.invalid_pools_total) == 1, what="reported")
    eventually(lambda: _events(api, name, "InvalidDeviceDescription"), what="Event")
    (event,) = _events(api, name, "InvalidDeviceDescription")
    assert "device 'gpu-0'" in event["note"]
    assert "attributes and capacities must not exceed 32" in event["note"]
    assert event["type"] == "Warning"

    # More triggers (a slice event, a manual sync) do not retry the same description.
    publisher._queue.add(name)
    publisher.resync()
    eventually(lambda: backend.discoveries >= 2, what="asked the backend again")
    settle(publisher, slices, name)
    assert _metric(publisher.metrics.invalid_pools_total) == 1
    assert node_slices(slices, name) == []
    assert writes.delta()["POST"] == 0

    backend.set([Pool(name, plain_devices(2))])
    eventually(lambda: len(node_slices(slices, name)) == 1, what="fixed pool published")


def test_fields_the_apiserver_drops_are_reported_once_and_cause_no_update_loop(
    *,
    api: Any,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    """``consumesCounters[].compatibilityGroups`` needs the alpha gate
    DRADeviceCompatibilityGroups, which the test cluster leaves off."""
    name = node["metadata"]["name"]
    counters = {"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}
    device = Device.from_dict(
        {
            "name": "gpu-0-part-0",
            "consumesCounters": [
                {
                    "counterSet": "gpu-0-counters",
                    "counters": {"memory": {"value": "20Gi"}},
                    "compatibilityGroups": ["half"],
                }
            ],
        }
    )

    backend = StaticBackend([Pool(name, (device,), (CounterSet.from_dict(counters),))])
    publisher = publishers(name, backend)
    eventually(lambda: len(node_slices(slices, name)) == 2, what="published")
    settle(publisher, slices, name, quiet=2.0)
    assert _metric(publisher.metrics.dropped_fields_total) == 1
    eventually(lambda: _events(api, name, "DroppedResourceSliceFields"), what="Event")
    (event,) = _events(api, name, "DroppedResourceSliceFields")
    assert "compatibilityGroups" in event["note"]

    writes.reset()
    publisher._queue.add(name)
    publisher.resync()
    settle(publisher, slices, name, quiet=2.0)
    assert writes.total() == 0
    assert _metric(publisher.metrics.dropped_fields_total) == 1


@dataclass(frozen=True)
class _Health:
    pool_name: str
    device_name: str
    health: str


def test_a_device_turning_unhealthy_is_tainted_with_one_update(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    # Two slices of at most 64 (devices 0 and 119 are unhealthy from the start).
    unhealthy = {"gpu-0", "gpu-119"}
    lock = threading.Lock()

    def health() -> list[_Health]:
        with lock:
            return [
                _Health(name, d.name, "Unhealthy" if d.name in unhealthy else "Healthy")
                for d in plain_devices(120)
            ]

    backend = StaticBackend([Pool(name, plain_devices(120))])
    publisher = publishers(name, backend, health=health)
    eventually(lambda: len(node_slices(slices, name)) == 2, what="published")
    settle(publisher, slices, name)
    writes.reset()

    with lock:
        unhealthy.add("gpu-70")
    backend.set(backend.pools)  # the backend tells its subscribers that health changed

    def tainted() -> bool:
        return any(
            d["name"] == "gpu-70" and d.get("taints")
            for s in node_slices(slices, name)
            for d in s["spec"]["devices"]
        )

    eventually(tainted, what="gpu-70 tainted")
    settle(publisher, slices, name)
    assert writes.delta() == {"POST": 0, "PUT": 1, "PATCH": 0, "DELETE": 0}
    (taint,) = next(
        d["taints"]
        for s in node_slices(slices, name)
        for d in s["spec"]["devices"]
        if d["name"] == "gpu-70"
    )
    assert (taint["key"], taint["effect"]) == (f"{DRIVER}/unhealthy", "NoSchedule")


def _example_backend(node_name: str, **settings: Any) -> ExampleBackend:
    return ExampleBackend(BackendContext(driver_name=DRIVER, node_name=node_name, config=settings))


def _published_devices(items: list[KubeObject]) -> dict[str, Device]:
    return {d["name"]: Device.from_dict(d) for s in items for d in s["spec"].get("devices") or ()}


def test_example_backend_features_round_trip_without_loss(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    backend = _example_backend(
        name,
        gpus=2,
        partitionable={"gpus": 2, "memory": "40Gi", "partitions": 2},
        consumable={"devices": 1},
        taints=[{"device": "gpu-1", "key": "maintenance", "effect": "NoSchedule"}],
        bindingConditions=[{"device": "gpu-0", "conditions": ["Attached"]}],
    )
    (pool,) = backend.discover()
    publisher = publishers(name, backend)
    want = {d.name: d for d in pool.devices}
    eventually(
        lambda: set(_published_devices(node_slices(slices, name))) == set(want),
        what="all devices published",
    )
    settle(publisher, slices, name)
    items = node_slices(slices, name)
    got = _published_devices(items)
    for device_name, device in want.items():
        published = got[device_name]
        # The apiserver stamps taints with timeAdded; everything else must be as described.
        stripped = published.to_dict()
        for taint in stripped.get("taints", ()):
            taint.pop("timeAdded", None)
        assert Device.from_dict(stripped) == device, device_name
    counter_sets = {cs["name"]: cs for s in items for cs in s["spec"].get("sharedCounters") or ()}
    assert set(counter_sets) == {cs.name for cs in pool.shared_counters}
    assert all(not (s["spec"].get("devices") and s["spec"].get("sharedCounters")) for s in items)
    assert _metric(publisher.metrics.dropped_fields_total) == 0
    writes.reset()
    publisher._queue.add(name)
    settle(publisher, slices, name)
    assert writes.total() == 0


def test_per_device_node_selection_pools_are_published_and_repaired(
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    name = node["metadata"]["name"]
    backend = _example_backend(name, gpus=3, perDeviceNodeSelection=True)
    publishers(name, backend)

    def published() -> list[KubeObject]:
        return slices.list(label_selector=f"{PER_DEVICE_NODE_LABEL}={name}").items

    eventually(lambda: len(published()) == 1, what="published")
    (item,) = published()
    assert item["spec"]["perDeviceNodeSelection"] is True
    assert "nodeName" not in item["spec"]
    assert {d["nodeName"] for d in item["spec"]["devices"]} == {name}

    slices.delete(item["metadata"]["name"])
    eventually(
        lambda: [s["metadata"]["uid"] for s in published()] not in ([], [item["metadata"]["uid"]]),
        timeout=10.0,
        what="deleted slice restored",
    )


def test_the_owner_reference_is_restored_after_an_outside_edit(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    publisher = publishers(name, StaticBackend([Pool(name, plain_devices(2))]))
    eventually(lambda: len(node_slices(slices, name)) == 1, what="published")
    settle(publisher, slices, name)
    (item,) = node_slices(slices, name)
    item["metadata"]["ownerReferences"] = []
    try:
        slices.update(item)
    except NotFound:
        pytest.fail("slice vanished")
    eventually(
        lambda: node_slices(slices, name)[0]["metadata"].get("ownerReferences"),
        timeout=10.0,
        what="owner reference restored",
    )


def test_slices_follow_a_re_created_node_to_its_new_uid(
    api: Any, node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    publishers(name, StaticBackend([Pool(name, plain_devices(2))]))
    eventually(lambda: len(node_slices(slices, name)) == 1, what="published")

    # The Node is deleted and registered again; the garbage collector (not running here)
    # would delete the slices it owned: the test does that.
    nodes = Resource(api, NODES)
    nodes.delete(name)
    recreated = make_node(api, name)
    for s in node_slices(slices, name):
        slices.delete(s["metadata"]["name"])

    def owned_by_new_node() -> bool:
        items = node_slices(slices, name)
        return (
            len(items) == 1
            and items[0]["metadata"]["ownerReferences"][0]["uid"] == (recreated["metadata"]["uid"])
        )

    eventually(owned_by_new_node, timeout=10.0, what="slice re-created for the new Node")


def test_the_wired_publisher_publishes_the_example_backend_and_taints_unhealthy_devices(
    api: Any, node: KubeObject, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    backend = _example_backend(name, gpus=4)
    # Lifted at the first Healthy report: this test is about the wiring, not the dwells.
    config = SimpleNamespace(
        driver_name=DRIVER, node_name=name, health_policy=HealthPolicy(healthy_for=0)
    )
    metrics = PluginMetrics()
    publisher = build_publisher(config, backend, api, metrics)  # type: ignore[arg-type]
    publisher.start()
    try:
        eventually(
            lambda: len(_published_devices(node_slices(slices, name))) == 4, what="published"
        )
        assert "drakit_node_plugin_publisher_slice_writes_total" in render_text(metrics.registry)

        backend.set_health("gpu-2", HealthStatus.UNHEALTHY)

        def gpu2_taints() -> list[str]:
            device = _published_devices(node_slices(slices, name)).get("gpu-2")
            return [t.key for t in device.taints] if device else []

        eventually(lambda: gpu2_taints() == [f"{DRIVER}/unhealthy"], what="gpu-2 tainted")
        backend.set_health("gpu-2", HealthStatus.HEALTHY)
        eventually(lambda: gpu2_taints() == [], what="taint removed when healthy again")
    finally:
        publisher.stop()
