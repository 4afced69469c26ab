"""PoolSyncer.sync decisions on an in-memory API: what it writes, and when it writes nothing.

The same behaviour against the real apiserver (validation, field selectors, owners) is in
tests/integration/publisher/.
"""

from __future__ import annotations

from typing import Any

import pytest

from drakit.allocator.model import Device, DeviceTaint
from drakit.kubeapi.errors import Conflict
from drakit.kubeapi.resources import RESOURCE_SLICES
from drakit.kubeapi.testing import FakeApi, FakeResource
from drakit.node_plugin.publisher.layout import InvalidPoolError
from drakit.node_plugin.publisher.node import NodeIdentity
from drakit.node_plugin.publisher.sync import PoolState, PoolSyncer

DRIVER = "gpu.example.com"
NODE = NodeIdentity("node-a", "node-uid-1")


def devices(*names: str) -> tuple[Device, ...]:
    return tuple(Device(name=name) for name in names)


@pytest.fixture
def slices() -> FakeResource:
    return FakeApi().resource(RESOURCE_SLICES)


@pytest.fixture
def syncer(slices: FakeResource) -> PoolSyncer:
    return PoolSyncer(slices, DRIVER, NODE)  # type: ignore[arg-type]


def test_first_sync_creates_one_slice_owned_by_the_node(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    result = syncer.sync("node-a", PoolState("node-a", devices("gpu-0", "gpu-1")), [])
    assert (result.created, result.updated, result.deleted) == (1, 0, 0)
    (stored,) = slices.list().items
    assert stored["metadata"]["ownerReferences"][0]["uid"] == NODE.uid
    assert [d["name"] for d in stored["spec"]["devices"]] == ["gpu-0", "gpu-1"]


def test_a_pool_that_matches_what_is_published_costs_no_write(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    desired = PoolState("node-a", devices("gpu-0", "gpu-1"))
    syncer.sync("node-a", desired, [])
    again = syncer.sync("node-a", desired, slices.list().items)
    assert again.writes == 0


def test_a_removed_device_updates_the_slice_in_place(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0", "gpu-1")), [])
    result = syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), slices.list().items)
    assert (result.created, result.updated, result.deleted) == (0, 1, 0)
    (stored,) = slices.list().items
    assert [d["name"] for d in stored["spec"]["devices"]] == ["gpu-0"]


def test_a_vanished_pool_deletes_its_slices(syncer: PoolSyncer, slices: FakeResource) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), [])
    result = syncer.sync("node-a", None, slices.list().items)
    assert result.deleted == 1 and slices.list().items == []


def test_an_invalid_pool_is_refused_before_any_write(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    with pytest.raises(InvalidPoolError, match="duplicate device 'gpu-0'"):
        syncer.sync("node-a", PoolState("node-a", devices("gpu-0", "gpu-0")), [])
    assert slices.api.events_since() == []


def generations(slices: FakeResource) -> list[int]:
    return sorted(s["spec"]["pool"]["generation"] for s in slices.list().items)


def test_a_single_slice_update_keeps_the_pools_generation(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0", "gpu-1")), [])
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), slices.list().items)
    assert generations(slices) == [1]


def test_a_pool_that_needs_a_second_slice_is_republished_as_a_new_generation(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), [])
    many = devices(*(f"gpu-{i}" for i in range(200)))  # more than one slice holds (128)
    result = syncer.sync("node-a", PoolState("node-a", many), slices.list().items)
    assert (result.created, result.updated, result.generation, result.slice_count) == (1, 1, 2, 2)
    assert generations(slices) == [2, 2]
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in slices.list().items}
    assert counts == {2}


def test_a_surplus_slice_of_an_older_generation_is_deleted(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), [])
    (current,) = slices.list().items
    stale = {
        "metadata": {"name": "stale-slice", "ownerReferences": [NODE.owner_reference]},
        "spec": {**current["spec"], "pool": {**current["spec"]["pool"], "generation": 0}},
    }
    slices.create(stale)
    result = syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), slices.list().items)
    assert (result.created, result.updated, result.deleted) == (0, 0, 1)
    assert [s["metadata"]["name"] for s in slices.list().items] == [current["metadata"]["name"]]


def test_a_write_racing_an_outside_change_is_a_conflict_and_the_next_sync_repairs(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    syncer.sync("node-a", PoolState("node-a", devices("gpu-0", "gpu-1")), [])
    seen = slices.list().items
    edited = seen[0] | {"spec": {**seen[0]["spec"], "devices": [{"name": "intruder"}]}}
    slices.update(edited)  # someone else writes between the publisher's read and its write
    with pytest.raises(Conflict):
        syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), seen)
    result = syncer.sync("node-a", PoolState("node-a", devices("gpu-0")), slices.list().items)
    assert result.updated == 1
    (stored,) = slices.list().items
    assert [d["name"] for d in stored["spec"]["devices"]] == ["gpu-0"]


def test_a_field_the_server_drops_is_reported_once_and_then_accepted_as_stored(
    syncer: PoolSyncer, slices: FakeResource
) -> None:
    def drop_taints(obj: dict[str, Any]) -> None:  # an apiserver with DRADeviceTaints off
        for device in obj["spec"].get("devices", []):
            device.pop("taints", None)

    slices.api.on_write(RESOURCE_SLICES, drop_taints)
    taint = DeviceTaint(key="example.com/hot", effect="NoSchedule")
    tainted = (Device(name="gpu-0", taints=(taint,)),)
    first = syncer.sync("node-a", PoolState("node-a", tainted), [])
    (dropped,) = first.dropped
    assert "taints" in str(dropped)
    again = syncer.sync("node-a", PoolState("node-a", tainted), slices.list().items)
    assert (again.writes, again.dropped) == (0, [])  # no update loop
