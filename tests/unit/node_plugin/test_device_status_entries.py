"""The pure parts of device status: checking a backend's entries and merging them in."""

from __future__ import annotations

import pytest

from drakit.node_plugin.device_status import (
    DeviceStatusError,
    build_entries,
    keys_from_checkpoint,
    keys_of,
    merged_devices,
    without_devices,
)
from drakit.plugin import DeviceStatus, DeviceToPrepare, NetworkData

DRIVER = "gpu.example.com"
NOW = "2026-12-03T10:00:00Z"
GPU0 = DeviceToPrepare(request="gpu", pool="node-a", device="gpu-0")
SHARE = DeviceToPrepare(request="s", pool="node-a", device="shared-0", share_id="abc-123")


def test_entries_carry_driver_pool_device_share_data_network_and_stamped_conditions() -> None:
    status = DeviceStatus(
        data={"uuid": "u-1"},
        network_data=NetworkData("eth0", ("10.0.0.1/24",), "aa:bb:cc:dd:ee:ff"),
        conditions=({"type": "Ready", "status": "True", "reason": "Prepared"},),
    )
    (entry,) = build_entries(DRIVER, [SHARE], [status], NOW)
    assert entry == {
        "driver": DRIVER,
        "pool": "node-a",
        "device": "shared-0",
        "shareID": "abc-123",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Prepared",
                "message": "",
                "lastTransitionTime": NOW,
            }
        ],
        "data": {"uuid": "u-1"},
        "networkData": {
            "interfaceName": "eth0",
            "ips": ["10.0.0.1/24"],
            "hardwareAddress": "aa:bb:cc:dd:ee:ff",
        },
    }


def test_no_status_means_no_entries_and_none_skips_a_device() -> None:
    assert build_entries(DRIVER, [GPU0], []) == []
    assert build_entries(DRIVER, [GPU0, SHARE], [None, DeviceStatus()], NOW)[0]["device"] == (
        "shared-0"
    )


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (DeviceStatus(data={"x": "y" * 10_300}), "device node-a/gpu-0: data: 10"),
        (DeviceStatus(data=["not", "an", "object"]), "data: must be a JSON object"),  # type: ignore[arg-type]
        (DeviceStatus(data={"f": object()}), "data: not JSON-serializable"),
        (DeviceStatus(conditions=({"status": "True", "reason": "R"},)), "conditions[0].type"),
        (
            DeviceStatus(conditions=({"type": "A", "status": "yes", "reason": "R"},)),
            "conditions[0].status: 'yes' is not one of True, False, Unknown",
        ),
        (
            DeviceStatus(conditions=({"type": "A", "status": "True", "reason": "no spaces"},)),
            "conditions[0].reason",
        ),
        (
            DeviceStatus(
                conditions=tuple(
                    {"type": f"T{i}", "status": "True", "reason": "R"} for i in range(9)
                )
            ),
            "9 given, the apiserver allows 8",
        ),
        (DeviceStatus(network_data=NetworkData(ips=("10.0.0.1/32",) * 17)), "network_data.ips"),
        (DeviceStatus(network_data=NetworkData(interface_name="e" * 257)), "interface_name"),
    ],
)
def test_bad_status_is_refused_naming_device_field_and_reason(
    status: DeviceStatus, message: str
) -> None:
    with pytest.raises(DeviceStatusError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_entries(DRIVER, [GPU0], [status], NOW)


def test_a_count_other_than_one_per_device_is_refused() -> None:
    with pytest.raises(DeviceStatusError, match="2 entries for 1 devices"):
        build_entries(DRIVER, [GPU0], [None, None])


def test_data_of_exactly_10_kib_as_sent_is_accepted_and_one_byte_more_is_not() -> None:
    padding = 10 * 1024 - len('{"x": ""}')
    (entry,) = build_entries(DRIVER, [GPU0], [DeviceStatus(data={"x": "y" * padding})], NOW)
    assert len(entry["data"]["x"]) == padding
    with pytest.raises(DeviceStatusError, match="10241 bytes as JSON"):
        build_entries(DRIVER, [GPU0], [DeviceStatus(data={"x": "y" * (padding + 1)})], NOW)


def _entry(driver: str, device: str, **extra: object) -> dict[str, object]:
    return {"driver": driver, "pool": "node-a", "device": device, **extra}


def test_merge_keeps_other_drivers_and_other_conditions_and_unchanged_transition_times() -> None:
    existing = [
        _entry("net.example.com", "gpu-0", data={"other": 1}),
        _entry(
            DRIVER,
            "gpu-0",
            conditions=[
                {"type": "Bound", "status": "True", "lastTransitionTime": "T0"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "T1"},
            ],
        ),
    ]
    new = [
        _entry(
            DRIVER,
            "gpu-0",
            conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": NOW}],
        ),
        _entry(DRIVER, "gpu-1", conditions=[]),
    ]
    merged = merged_devices(existing, DRIVER, new)
    assert merged[0] == existing[0]
    assert merged[1]["conditions"] == [
        {"type": "Bound", "status": "True", "lastTransitionTime": "T0"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "T1"},
    ]
    assert merged[2]["device"] == "gpu-1"


def test_a_changed_condition_status_gets_the_new_transition_time() -> None:
    existing = [
        _entry(
            DRIVER,
            "gpu-0",
            conditions=[{"type": "Ready", "status": "False", "lastTransitionTime": "T1"}],
        )
    ]
    new = [
        _entry(
            DRIVER,
            "gpu-0",
            conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": NOW}],
        )
    ]
    assert merged_devices(existing, DRIVER, new)[0]["conditions"][0]["lastTransitionTime"] == NOW


def test_removal_drops_only_this_drivers_entries_of_the_keys() -> None:
    existing = [
        _entry("net.example.com", "gpu-0"),
        _entry(DRIVER, "gpu-0"),
        _entry(DRIVER, "gpu-0", shareID="s1"),
        _entry(DRIVER, "gpu-9"),
    ]
    keys = keys_from_checkpoint(keys_of([existing[1], existing[2]]))
    assert without_devices(existing, DRIVER, keys) == [existing[0], existing[3]]


def test_malformed_checkpoint_keys_are_ignored() -> None:
    assert keys_from_checkpoint([["p", "d", ""], ["bad"], "x", [1, 2, 3]]) == {("p", "d", "")}
    assert keys_from_checkpoint({"not": "a list"}) == set()
