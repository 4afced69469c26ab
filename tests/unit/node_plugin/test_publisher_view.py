"""The publisher's view: its own writes are visible before the informer has them."""

from __future__ import annotations

from typing import Any

from helpers.clock import FakeClock

from drakit.kubeapi.informer import Informer
from drakit.kubeapi.resources import RESOURCE_SLICES, Resource
from drakit.node_plugin.publisher.view import POOL_INDEX, SliceView, pool_index


def _slice(name: str, rv: int, pool: str = "pool-a") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(rv)},
        "spec": {"pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}},
    }


def _view(clock: FakeClock | None = None) -> SliceView:
    informer = Informer(Resource(None, RESOURCE_SLICES), indexers={POOL_INDEX: pool_index})
    return SliceView([informer], ttl=60.0, clock=clock or FakeClock(100.0))


def test_a_written_slice_is_in_view_before_the_informer_sees_it() -> None:
    view = _view()
    created = _slice("00000-d-n-abc", 5)
    view.record_written(created)
    assert view.pool_slices("pool-a") == [created]
    assert view.pool_slices("pool-b") == []
    assert view.pool_names() == {"pool-a"}


def test_the_echo_of_an_own_write_is_recognised_and_ends_the_overlay() -> None:
    view = _view()
    created = _slice("00000-d-n-abc", 5)
    view.record_written(created)
    assert view.observe(_slice("00000-d-n-abc", 5)) is True
    # The informer has caught up: from now on its store is the truth.
    assert view.pool_slices("pool-a") == []


def test_an_outside_change_is_not_an_echo() -> None:
    view = _view()
    view.record_written(_slice("00000-d-n-abc", 5))
    assert view.observe(_slice("00000-d-n-abc", 6)) is False
    assert view.observe(_slice("00001-d-n-xyz", 7)) is False


def test_the_deletion_of_a_deleted_slice_is_an_echo() -> None:
    view = _view()
    gone = _slice("00000-d-n-abc", 5)
    view.record_deleted(gone)
    assert view.observe(gone, deleted=True) is True
    assert view.observe(gone, deleted=True) is False


def test_overlay_entries_expire_after_the_ttl() -> None:
    clock = FakeClock(100.0)
    view = _view(clock)
    view.record_written(_slice("00000-d-n-abc", 5))
    clock.now += 61
    assert view.pool_slices("pool-a") == []
