"""When the publisher queues a pool sync, stepped with its injected queue and clock.

What a sync then writes is in test_pool_syncer.py; the whole publisher against the real
apiserver (informers, Node lookup, Events) is in tests/integration/publisher/.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from helpers.clock import FakeClock

from drakit.kubeapi.workqueue import WorkQueue
from drakit.node_plugin.publisher import Publisher
from drakit.plugin import BackgroundError
from drakit.telemetry.metrics import Registry

DRIVER = "gpu.example.com"
REPAIR_DELAY = 0.5


class NoDevices:
    def discover(self) -> Sequence[Any]:
        return ()

    def subscribe(self, on_change: Callable[[], None]) -> None:
        pass


def a_slice(name: str, rv: str, pool: str = "pool-a") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {"pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}},
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue("publisher-test", clock=clock)


@pytest.fixture
def publisher(clock: FakeClock, queue: WorkQueue[str]) -> Publisher:
    return Publisher(
        None,  # no API: nothing here starts or reads
        DRIVER,
        "node-a",
        NoDevices(),
        registry=Registry(),
        events=object(),  # type: ignore[arg-type]
        repair_delay=REPAIR_DELAY,
        clock=clock,
        queue=queue,
    )


def test_a_burst_of_outside_changes_to_a_pool_is_one_sync_after_the_repair_delay(
    publisher: Publisher, queue: WorkQueue[str], clock: FakeClock
) -> None:
    for rv in ("11", "12", "13"):
        publisher.slice_changed(a_slice("s-1", rv))
    synced: list[str] = []
    assert queue.run_pending(synced.append) == 0  # still within the delay
    clock.advance(REPAIR_DELAY)
    queue.run_pending(synced.append)
    assert synced == ["pool-a"]


def test_the_echo_of_the_publishers_own_write_queues_no_sync(
    publisher: Publisher, queue: WorkQueue[str], clock: FakeClock
) -> None:
    written = a_slice("s-1", "21")
    publisher.view.record_written(written)
    publisher.slice_changed(written)
    clock.advance(REPAIR_DELAY)
    assert queue.run_pending(lambda _key: None) == 0


def test_a_slice_deleted_by_someone_else_queues_its_pool(
    publisher: Publisher, queue: WorkQueue[str], clock: FakeClock
) -> None:
    publisher.slice_changed(a_slice("s-2", "30", pool="pool-b"), deleted=True)
    clock.advance(REPAIR_DELAY)
    synced: list[str] = []
    queue.run_pending(synced.append)
    assert synced == ["pool-b"]


def test_resync_asks_the_backend_again_at_once(publisher: Publisher, queue: WorkQueue[str]) -> None:
    publisher.resync()
    keys: list[str] = []
    queue.run_pending(keys.append)
    assert keys == [""]  # the rescan key: discover() again, then the changed pools


class FailingDevices(NoDevices):
    def discover(self) -> Sequence[Any]:
        raise OSError("device scan failed")


def test_a_failed_publish_goes_to_the_error_hook_as_recoverable_and_is_retried(
    clock: FakeClock, queue: WorkQueue[str]
) -> None:
    heard: list[BackgroundError] = []
    publisher = Publisher(
        None,
        DRIVER,
        "node-a",
        FailingDevices(),
        registry=Registry(),
        events=object(),  # type: ignore[arg-type]
        clock=clock,
        queue=queue,
        on_error=heard.append,
    )
    publisher.resync()
    queue.run_pending(publisher._handle)
    (error,) = heard
    assert (error.what, error.recoverable, str(error.cause)) == (
        "publish ResourceSlices",
        True,
        "device scan failed",
    )
    assert queue.pending_delayed() == 1  # the queue retries it after its backoff
