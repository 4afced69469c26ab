"""What the publisher withholds or leaves out on a cluster without an optional feature."""

from __future__ import annotations

from drakit.allocator.model import (
    CapacityRequestPolicy,
    Device,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
)
from drakit.allocator.quantity import Quantity
from drakit.kubeapi.clusterversion import SliceFields
from drakit.node_plugin.publisher.versionfields import trim_pool

NONE = SliceFields(
    counters=False, consumable_capacity=False, binding_conditions=False, taints=False
)
ALL = SliceFields(counters=True, consumable_capacity=True, binding_conditions=True, taints=True)


def _devices() -> tuple[Device, ...]:
    return (
        Device(name="plain"),
        Device(name="part", consumes_counters=(DeviceCounterConsumption(counter_set="gpu"),)),
        Device(name="attach", binding_conditions=("attached",), binds_to_node=True),
        Device(name="sick", taints=(DeviceTaint(key="k", effect="NoSchedule"),)),
        Device(name="own-node", node_name="node-a"),
        Device(
            name="shared",
            allow_multiple_allocations=True,
            capacity={
                "mem": DeviceCapacity(
                    value=Quantity(8), request_policy=CapacityRequestPolicy(default=Quantity(1))
                )
            },
        ),
    )


def test_every_field_is_kept_where_the_cluster_has_every_feature() -> None:
    trimmed = trim_pool(_devices(), ALL)
    assert trimmed.devices == _devices()
    assert trimmed.counters and not trimmed.withheld


def test_devices_that_would_be_unsafe_without_their_feature_are_withheld_with_a_reason() -> None:
    trimmed = trim_pool(_devices(), NONE)
    assert [d.name for d in trimmed.devices] == ["plain", "shared"]
    assert set(trimmed.withheld) == {"part", "attach", "sick", "own-node"}
    assert "shared counters" in trimmed.withheld["part"]
    assert not trimmed.counters


def test_consumable_capacity_fields_are_left_out_so_the_device_is_exclusive() -> None:
    shared = trim_pool(_devices(), NONE).devices[1]
    assert shared.allow_multiple_allocations is None
    assert shared.capacity["mem"].request_policy is None
    assert shared.capacity["mem"].value == Quantity(8)


def test_no_detected_cluster_means_nothing_is_trimmed() -> None:
    assert trim_pool(_devices(), None).devices == _devices()
