"""Partitionable devices built with the typed builders of drakit.plugin (Counter,
CounterSet, DeviceCounterConsumption): the same ResourceSlice fields as Kubernetes JSON, and
a pool the plugin accepts at start-up."""

from __future__ import annotations

import pytest

from drakit.node_plugin.backend_loader import check_backend
from drakit.plugin import (
    BackendBase,
    BackendConfigError,
    BackendContext,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    Counter,
    CounterSet,
    Device,
    DeviceCounterConsumption,
    PoolDescription,
    Quantity,
    RequestContext,
)


def gib(amount: int) -> Counter:
    return Counter(Quantity.parse(f"{amount}Gi"))


def npu_pool(half_takes: int = 20) -> PoolDescription:
    """One NPU of 40 GiB offered whole and as two halves."""

    def takes(amount: int) -> tuple[DeviceCounterConsumption, ...]:
        return (DeviceCounterConsumption(counter_set="npu-0", counters={"memory": gib(amount)}),)

    return PoolDescription(
        name="node-a",
        devices=(
            Device(name="npu-0", consumes_counters=takes(40)),
            Device(name="npu-0-half-0", consumes_counters=takes(half_takes)),
            Device(name="npu-0-half-1", consumes_counters=takes(half_takes)),
        ),
        shared_counters=(CounterSet(name="npu-0", counters={"memory": gib(40)}),),
    )


class NpuBackend(BackendBase):
    name = "npu"

    def __init__(self, context: BackendContext, pool: PoolDescription) -> None:
        super().__init__(context)
        self.pool = pool

    def discover(self) -> tuple[PoolDescription, ...]:
        return (self.pool,)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        return BackendPrepared(())

    def unprepare(self, claim: ClaimRef, state: object, context: RequestContext) -> None:
        pass


def test_typed_counters_are_the_resource_slice_fields_kubernetes_json_gives() -> None:
    pool = npu_pool()
    assert pool.shared_counters[0].to_dict() == {
        "name": "npu-0",
        "counters": {"memory": {"value": "40Gi"}},
    }
    assert pool.devices[1].to_dict() == {
        "name": "npu-0-half-0",
        "consumesCounters": [{"counterSet": "npu-0", "counters": {"memory": {"value": "20Gi"}}}],
    }
    assert Device.from_dict(pool.devices[1].to_dict()).to_dict() == pool.devices[1].to_dict()


def test_a_pool_of_typed_partitionable_devices_passes_the_start_up_check() -> None:
    backend = NpuBackend(BackendContext("npu.example.com", "node-a"), npu_pool())
    check_backend("backend npu", backend)  # raises on a wrong description


def test_a_device_consuming_a_counter_set_the_pool_lacks_is_refused_at_start_up() -> None:
    pool = npu_pool()
    broken = PoolDescription(pool.name, pool.devices, shared_counters=())
    backend = NpuBackend(BackendContext("npu.example.com", "node-a"), broken)
    with pytest.raises(BackendConfigError, match="names unknown counter set 'npu-0'"):
        check_backend("backend npu", backend)
