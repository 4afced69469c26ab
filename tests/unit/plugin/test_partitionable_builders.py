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


def refused(pool: PoolDescription) -> str:
    """The start-up check's message for ``pool`` (it must refuse it)."""
    backend = NpuBackend(BackendContext("npu.example.com", "node-a"), pool)
    with pytest.raises(BackendConfigError) as error:
        check_backend("backend npu", backend)
    return str(error.value)


def with_counters(**counters: object) -> PoolDescription:
    """The NPU pool with its counter set's ``counters`` replaced."""
    pool = npu_pool()
    npu = CounterSet(name="npu-0", counters=counters)  # type: ignore[arg-type]
    return PoolDescription(pool.name, (), shared_counters=(npu,))


def consuming(*uses: object) -> PoolDescription:
    """The NPU pool with one device whose ``consumes_counters`` is ``uses``."""
    pool = npu_pool()
    device = Device(name="npu-0-odd", consumes_counters=uses)  # type: ignore[arg-type]
    return PoolDescription(pool.name, (device,), shared_counters=pool.shared_counters)


# Each mistake a backend can make building counters by hand, and what the message must say
# (besides the backend and pool): the set or device, the field in Python's names, the reason.
MISTAKES = {
    "amount as text": (
        with_counters(memory=Counter("40Gi")),  # type: ignore[arg-type]
        "counter set 'npu-0': counters['memory'].value is str '40Gi', not Quantity "
        "(Quantity.parse('40Gi'))",
    ),
    "bare number for a Counter": (
        with_counters(memory=40),
        "counter set 'npu-0': counters['memory'] is int, not Counter",
    ),
    "empty counter set": (with_counters(), "counter set 'npu-0': counters must not be empty"),
    "counter name not a label": (
        with_counters(Memory_GiB=gib(40)),
        "counter set 'npu-0': counter 'Memory_GiB' must be a lowercase RFC 1123 label",
    ),
    "counter set name not a label": (
        PoolDescription("node-a", (), (CounterSet(name="NPU 0", counters={"m": gib(1)}),)),
        "counter set 'NPU 0': name must be a lowercase RFC 1123 label",
    ),
    "counter set not a CounterSet": (
        PoolDescription("node-a", (), ({"name": "npu-0"},)),  # type: ignore[arg-type]
        "shared_counters[0] is dict, not CounterSet",
    ),
    "consumption as Kubernetes JSON": (
        consuming({"counterSet": "npu-0", "counters": {"memory": {"value": "20Gi"}}}),
        "device 'npu-0-odd': consumes_counters[0] is dict, not DeviceCounterConsumption",
    ),
    "consumption of nothing": (
        consuming(DeviceCounterConsumption(counter_set="npu-0")),
        "device 'npu-0-odd': consumption of 'npu-0': counters must not be empty",
    ),
    "consumed amount as text": (
        consuming(
            DeviceCounterConsumption(counter_set="npu-0", counters={"memory": Counter("1Gi")})  # type: ignore[arg-type]
        ),
        "device 'npu-0-odd': consumption of 'npu-0': counters['memory'].value is str '1Gi'",
    ),
    "consumption without a set": (
        consuming(DeviceCounterConsumption(counters={"memory": gib(1)})),
        "device 'npu-0-odd': consumes_counters[0].counter_set must not be empty",
    ),
    "one set consumed twice": (
        consuming(
            DeviceCounterConsumption(counter_set="npu-0", counters={"memory": gib(1)}),
            DeviceCounterConsumption(counter_set="npu-0", counters={"memory": gib(1)}),
        ),
        "device 'npu-0-odd': counter set 'npu-0' is consumed twice",
    ),
    "a counter the set lacks": (
        consuming(DeviceCounterConsumption(counter_set="npu-0", counters={"cores": gib(1)})),
        "device 'npu-0-odd': counter 'cores' is not in counter set 'npu-0'",
    ),
}


@pytest.mark.parametrize(("pool", "says"), MISTAKES.values(), ids=MISTAKES.keys())
def test_a_mistake_building_counters_stops_the_plugin_with_one_line_naming_it(
    pool: PoolDescription, says: str
) -> None:
    # Before the start-up check looked at the builders' fields, all of these but the last
    # passed it: the publisher crashed on them or the apiserver refused the slice later.
    message = refused(pool)
    assert message.startswith("backend npu: NpuBackend.discover(): pool 'node-a': "), message
    assert says in message
    assert "\n" not in message


def test_every_counter_mistake_of_a_pool_is_named_at_once() -> None:
    pool = PoolDescription(
        "node-a",
        (
            Device(
                name="npu-0-half-0",
                consumes_counters=(
                    DeviceCounterConsumption(counter_set="npu-9", counters={"memory": gib(1)}),
                ),
            ),
        ),
        (CounterSet(name="npu-0", counters={"memory": 40}),),  # type: ignore[dict-item]
    )
    message = refused(pool)
    assert "counters['memory'] is int, not Counter" in message
    assert "device 'npu-0-half-0': consumesCounters names unknown counter set 'npu-9'" in message
