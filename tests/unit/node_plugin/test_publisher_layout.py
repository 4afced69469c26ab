"""The publisher's slice layout: limits, counter-set slices, stickiness, pool checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from drakit.allocator.model import CounterSet, Device
from drakit.node_plugin.publisher.layout import (
    InvalidPoolError,
    SliceContent,
    check_pool,
    fresh_layout,
    plan_layout,
)


def devices(count: int, prefix: str = "dev") -> tuple[Device, ...]:
    return tuple(Device(name=f"{prefix}-{i}") for i in range(count))


def tainted(device: Device) -> Device:
    return Device.from_dict(
        {**device.to_dict(), "taints": [{"key": "unhealthy", "effect": "NoSchedule"}]}
    )


def counter_set(name: str) -> CounterSet:
    return CounterSet.from_dict({"name": name, "counters": {"memory": {"value": "80Gi"}}})


def partition(name: str, counter_set_name: str) -> Device:
    return Device.from_dict(
        {
            "name": name,
            "consumesCounters": [
                {"counterSet": counter_set_name, "counters": {"memory": {"value": "10Gi"}}}
            ],
        }
    )


def sizes(layout: tuple[SliceContent, ...]) -> list[int]:
    return [len(s.devices) for s in layout]


def test_plain_devices_fill_slices_of_128() -> None:
    assert sizes(fresh_layout(devices(1000), ())) == [128] * 7 + [104]


def test_a_slice_with_a_tainted_device_holds_at_most_64() -> None:
    devs = list(devices(200))
    devs[10] = tainted(devs[10])
    layout = fresh_layout(devs, ())
    assert all(len(s.devices) <= 64 for s in layout if any(d.taints for d in s.devices))
    assert sum(sizes(layout)) == 200


def test_devices_consuming_counters_get_64_per_slice_and_counter_sets_their_own_slices() -> None:
    sets = [counter_set(f"gpu-{i}") for i in range(10)]
    parts = [partition(f"part-{i}", f"gpu-{i % 10}") for i in range(100)]
    layout = fresh_layout(parts, sets)
    assert [len(s.shared_counters) for s in layout[:2]] == [8, 2]
    assert all(not s.devices for s in layout[:2])
    assert sizes(layout[2:]) == [64, 36]
    assert all(not s.shared_counters for s in layout[2:])


def test_an_empty_pool_gets_one_empty_slice() -> None:
    assert fresh_layout((), ()) == (SliceContent(),)


def test_without_published_slices_the_layout_is_the_fresh_one() -> None:
    assert plan_layout(devices(300), (), []) == fresh_layout(devices(300), ())


def test_removing_a_device_changes_only_its_slice() -> None:
    before = fresh_layout(devices(1000), ())
    remaining = [d for d in devices(1000) if d.name != "dev-5"]
    after = plan_layout(remaining, (), before)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [0]
    assert "dev-5" not in {d.name for d in after[0].devices}


def test_a_new_device_fills_the_first_gap() -> None:
    before = fresh_layout(devices(1000), ())
    remaining = [d for d in devices(1000) if d.name != "dev-300"]
    gapped = plan_layout(remaining, (), before)
    after = plan_layout([*remaining, Device(name="new")], (), gapped)
    changed = [i for i, (a, b) in enumerate(zip(gapped, after, strict=True)) if a != b]
    assert changed == [2]
    assert after[2].devices[-1].name == "new"


def test_changing_one_device_changes_only_its_slice() -> None:
    before = fresh_layout(devices(1000), ())
    devs = list(devices(1000))
    devs[700] = replace(devs[700], binds_to_node=True)
    after = plan_layout(devs, (), before)
    assert [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == [5]


def test_tainting_a_device_in_a_full_slice_moves_the_overflow_to_a_new_slice_at_the_end() -> None:
    before = fresh_layout(devices(256), ())
    devs = list(devices(256))
    devs[3] = tainted(devs[3])
    after = plan_layout(devs, (), before)
    assert sizes(after) == [64, 128, 64]
    assert after[1] == before[1]
    assert {d.name for d in after[0].devices} | {d.name for d in after[2].devices} == {
        d.name for d in before[0].devices
    }


def test_a_layout_wasting_more_than_one_slice_is_repacked() -> None:
    before = fresh_layout(devices(1024), ())
    every_other = [d for i, d in enumerate(devices(1024)) if i % 2 == 0]
    after = plan_layout(every_other, (), before)
    assert sizes(after) == [128] * 4


def test_removed_trailing_devices_drop_their_slices() -> None:
    before = fresh_layout(devices(1000), ())
    after = plan_layout(devices(300), (), before)
    assert sizes(after) == [128, 128, 44]


def test_the_layout_is_deterministic() -> None:
    before = fresh_layout(devices(500), ())
    devs = [d for d in devices(600) if d.name != "dev-7"]
    assert plan_layout(devs, (), before) == plan_layout(devs, (), before)


def test_duplicate_devices_and_unknown_counters_make_the_pool_invalid() -> None:
    with pytest.raises(InvalidPoolError) as err:
        check_pool(
            "pool-a",
            [Device(name="a"), Device(name="a"), partition("p", "missing")],
            [counter_set("gpu-0"), counter_set("gpu-0")],
        )
    text = str(err.value)
    assert "pool 'pool-a'" in text
    assert "duplicate device 'a'" in text
    assert "duplicate counter set 'gpu-0'" in text
    assert "unknown counter set 'missing'" in text


def test_a_counter_missing_from_its_set_makes_the_pool_invalid() -> None:
    device = Device.from_dict(
        {
            "name": "p",
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"cores": {"value": "1"}}}],
        }
    )
    with pytest.raises(InvalidPoolError, match="counter 'cores' is not in counter set 'gpu-0'"):
        check_pool("pool-a", [device], [counter_set("gpu-0")])
