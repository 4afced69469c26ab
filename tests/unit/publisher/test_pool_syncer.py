"""PoolSyncer.sync decisions on an in-memory API: what it writes, and when it writes nothing.

The same behaviour against the real apiserver (validation, field selectors, owners) is in
tests/integration/publisher/.
"""

from __future__ import annotations

import pytest

from allocator.model import Device
from kubeapi.resources import RESOURCE_SLICES
from kubeapi.testing import FakeApi, FakeResource
from node_plugin.publisher.layout import InvalidPoolError
from node_plugin.publisher.node import NodeIdentity
from node_plugin.publisher.sync import PoolState, PoolSyncer

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
