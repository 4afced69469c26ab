"""The publisher against a real apiserver: layout, minimal writes, generations, repair.

Writes are counted by the apiserver (``apiserver_request_total``), not by the client.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from publisher_support import (
    DRIVER,
    Pool,
    StaticBackend,
    WriteCounter,
    node_slices,
    plain_devices,
    settle,
)

from drakit.allocator.model import Device, DeviceAttribute
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource
from drakit.node_plugin.publisher.naming import decode_index

pytestmark = pytest.mark.integration


def _pool_summary(items: list[KubeObject]) -> tuple[set[int], set[int], int]:
    generations = {s["spec"]["pool"]["generation"] for s in items}
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in items}
    devices = sum(len(s["spec"].get("devices") or ()) for s in items)
    return generations, counts, devices


def _publish_1000(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> tuple[Any, StaticBackend]:
    name = node["metadata"]["name"]
    backend = StaticBackend([Pool(name, plain_devices(1000))])
    publisher = publishers(name, backend)
    eventually(
        lambda: _pool_summary(node_slices(slices, name))[2] == 1000,
        what="1000 devices published",
    )
    settle(publisher, slices, name)
    return publisher, backend


def test_1000_devices_land_in_ceil_1000_over_128_slices_owned_by_the_node(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    _publish_1000(node, publishers, slices, eventually)

    items = node_slices(slices, name)
    expected = math.ceil(1000 / 128)
    assert len(items) == expected
    generations, counts, devices = _pool_summary(items)
    assert (len(generations), counts, devices) == (1, {expected}, 1000)
    assert sorted(decode_index(s["metadata"]["name"], 5) for s in items) == list(range(expected))
    for s in items:
        assert s["metadata"]["name"].startswith(f"{decode_index(s['metadata']['name']):05x}-")
        assert s["metadata"]["generateName"].endswith(f"-{DRIVER}-{name}-")
        assert s["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": name,
                "uid": node["metadata"]["uid"],
                "controller": True,
            }
        ]
        assert s["spec"]["nodeName"] == name
        assert s["spec"]["pool"]["name"] == name
        assert len(s["spec"]["devices"]) <= 128


def test_publishing_the_same_state_again_makes_no_write(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    publisher, backend = _publish_1000(node, publishers, slices, eventually)
    writes.reset()
    before = publisher.metrics.syncs_total.labels("unchanged").get()

    asked = backend.discoveries
    backend.set(list(backend.pools))  # the backend reports a change that changes nothing
    eventually(lambda: backend.discoveries > asked, what="backend asked again")
    # A sync of the pool (queued by hand) must find nothing to do either.
    publisher._queue.add(name)
    eventually(
        lambda: publisher.metrics.syncs_total.labels("unchanged").get() > before,
        what="a pool sync ran",
    )
    settle(publisher, slices, name)
    assert writes.total() == 0


def test_changing_one_device_attribute_makes_exactly_one_update(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    publisher, backend = _publish_1000(node, publishers, slices, eventually)
    generation_before = _pool_summary(node_slices(slices, name))[0]
    writes.reset()

    devices = list(backend.pools[0].devices)
    devices[500] = replace(
        devices[500],
        attributes={**devices[500].attributes, "model": DeviceAttribute.of("h100")},
    )
    backend.set([Pool(name, tuple(devices))])

    def changed() -> bool:
        return any(
            d["name"] == "gpu-500" and d["attributes"]["model"] == {"string": "h100"}
            for s in node_slices(slices, name)
            for d in s["spec"]["devices"]
        )

    eventually(changed, what="gpu-500 republished")
    settle(publisher, slices, name)
    assert writes.delta() == {"POST": 0, "PUT": 1, "PATCH": 0, "DELETE": 0}
    assert _pool_summary(node_slices(slices, name))[0] == generation_before


def test_shrinking_the_device_list_bumps_the_generation_and_deletes_obsolete_slices(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    publisher, backend = _publish_1000(node, publishers, slices, eventually)
    (generation_before,) = _pool_summary(node_slices(slices, name))[0]
    writes.reset()

    backend.set([Pool(name, plain_devices(300))])
    eventually(lambda: len(node_slices(slices, name)) == 3, what="shrunk to 3 slices")
    settle(publisher, slices, name)

    items = node_slices(slices, name)
    generations, counts, devices = _pool_summary(items)
    assert generations == {generation_before + 1}
    assert counts == {3}
    assert devices == 300
    assert writes.delta() == {"POST": 0, "PUT": 3, "PATCH": 0, "DELETE": 5}


def test_obsolete_slices_are_deleted_before_missing_ones_are_created(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    api: Any,
) -> None:
    """A crashed earlier instance left a pool half-written: two slices of the current
    generation and one of an older one. The sync deletes the stale one before it creates the
    missing one (seen in the order of the apiserver's watch events)."""
    name = node["metadata"]["name"]
    devices = plain_devices(300)
    owner = {
        "apiVersion": "v1",
        "kind": "Node",
        "name": name,
        "uid": node["metadata"]["uid"],
        "controller": True,
    }

    def leftover(index: int, generation: int, chunk: tuple[Device, ...]) -> None:
        slices.create(
            {
                "metadata": {
                    "generateName": f"{index:05x}-{DRIVER}-{name}-",
                    "ownerReferences": [owner],
                },
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": generation, "resourceSliceCount": 3},
                    "devices": [d.to_dict() for d in chunk],
                },
            }
        )

    leftover(0, 4, devices[:128])
    leftover(1, 4, devices[128:256])
    leftover(2, 3, devices[256:])
    start_rv = slices.list().resource_version
    stream = slices.watch(
        resource_version=start_rv,
        field_selector=f"spec.driver={DRIVER},spec.nodeName={name}",
        timeout_seconds=60,
    )
    publisher = publishers(name, StaticBackend([Pool(name, devices)]))
    events: list[tuple[str, int]] = []
    with stream:
        for event in stream:
            events.append((event.type, event.object["spec"]["pool"]["generation"]))
            if event.type == "ADDED":
                break
    settle(publisher, slices, name)

    kinds = [kind for kind, _ in events]
    assert "DELETED" in kinds
    assert kinds.index("DELETED") < kinds.index("ADDED")
    assert events[kinds.index("DELETED")][1] == 3
    generations, counts, total = _pool_summary(node_slices(slices, name))
    assert (generations, counts, total) == ({5}, {3}, 300)


def test_deleting_every_slice_of_the_node_restores_them(
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
) -> None:
    name = node["metadata"]["name"]
    _publish_1000(node, publishers, slices, eventually)

    # What the kubelet does when it starts: delete all of the node's slices.
    for s in node_slices(slices, name):
        slices.delete(s["metadata"]["name"])

    def restored() -> bool:
        items = node_slices(slices, name)
        generations, counts, devices = _pool_summary(items)
        return len(items) == 8 and devices == 1000 and counts == {8} and len(generations) == 1

    eventually(restored, timeout=10.0, what="slices restored after deletion")


def test_an_outside_edit_of_a_slice_is_undone(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    _publish_1000(node, publishers, slices, eventually)
    victim = node_slices(slices, name)[0]
    victim["spec"]["devices"] = victim["spec"]["devices"][:3]
    slices.update(victim)

    eventually(
        lambda: _pool_summary(node_slices(slices, name))[2] == 1000,
        timeout=10.0,
        what="edited slice repaired",
    )


def test_slices_stay_when_the_publisher_stops(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    publisher, _backend = _publish_1000(node, publishers, slices, eventually)
    before = sorted(s["metadata"]["uid"] for s in node_slices(slices, name))
    publisher.stop()
    assert sorted(s["metadata"]["uid"] for s in node_slices(slices, name)) == before


def test_a_restarted_publisher_with_unchanged_hardware_makes_no_write(
    *,
    node: KubeObject,
    publishers: Any,
    slices: Resource,
    eventually: Any,
    writes: WriteCounter,
) -> None:
    name = node["metadata"]["name"]
    publisher, backend = _publish_1000(node, publishers, slices, eventually)
    publisher.stop()
    writes.reset()

    second = publishers(name, StaticBackend(list(backend.pools)))
    assert second.wait_ready(timeout=30)
    eventually(
        lambda: second.metrics.syncs_total.labels("unchanged").get() >= 1,
        what="restarted publisher synced the pool",
    )
    settle(second, slices, name)
    assert writes.total() == 0


def test_several_pools_on_one_node_and_a_removed_pool_is_deleted(
    node: KubeObject, publishers: Any, slices: Resource, eventually: Any
) -> None:
    name = node["metadata"]["name"]
    backend = StaticBackend(
        [
            Pool(f"{name}-a", plain_devices(130, prefix="a")),
            Pool(f"{name}-b", plain_devices(5, prefix="b")),
            Pool(f"{name}-empty"),
        ]
    )
    publishers(name, backend)

    def pools() -> dict[str, int]:
        found: dict[str, int] = {}
        for s in node_slices(slices, name):
            pool = s["spec"]["pool"]["name"]
            found[pool] = found.get(pool, 0) + 1
        return found

    eventually(
        lambda: pools() == {f"{name}-a": 2, f"{name}-b": 1, f"{name}-empty": 1},
        what="three pools published",
    )
    backend.set(backend.pools[:1])
    eventually(lambda: pools() == {f"{name}-a": 2}, what="removed pools deleted")
