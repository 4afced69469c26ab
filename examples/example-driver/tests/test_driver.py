"""The backend's devices and container environment, per profile, as upstream's e2e suite
reads them: it runs ``export`` in the container and parses bash's ``declare -x`` lines with
the regular expressions of test/e2e/e2e_setup_test.go, copied here verbatim."""

from __future__ import annotations

import re
from typing import Any

import pytest
from example_driver.driver import ExampleDriver

from drakit.plugin import (
    BackendConfigError,
    BackendContext,
    BackendError,
    ClaimToPrepare,
    DeviceToPrepare,
    Quantity,
    RequestContext,
)
from drakit.testing import validate_config

DRIVER = "dra-abc123.example.com"
NODE = "node-a"

# test/e2e/e2e_setup_test.go
GPU_DEVICE = re.compile(r'(?m)^declare -x GPU_DEVICE_[A-Z0-9_]+="(gpu-.+)"$')
GPU_ID = re.compile(r"^gpu-(.+)$")
NET_DEVICE_RATE = re.compile(r'(?m)^declare -x NET_DEVICE_(\d+)_(INGRESS|EGRESS)_RATE="(\d+)"$')


def gpu_id(gpu: str) -> str:
    match = GPU_ID.match(gpu)
    assert match is not None
    return match.group(1).replace("-", "_").upper()


def gpu_property(logs: str, gpu: str, name: str) -> str:
    if name == "DRA_ADMIN_ACCESS":
        pattern = rf'(?m)^declare -x {name}="(.+)"$'
    else:
        pattern = rf'(?m)^declare -x GPU_DEVICE_{gpu_id(gpu)}_{name}="(.+)"$'
    match = re.search(pattern, logs)
    return match.group(1) if match else ""


def export(env: list[str]) -> str:
    """What ``export`` prints in bash for these variables (sorted by name, as bash does)."""
    pairs = dict(e.split("=", 1) for e in env)
    return "".join(f'declare -x {k}="{v}"\n' for k, v in sorted(pairs.items()))


def driver(**config: Any) -> ExampleDriver:
    return ExampleDriver(BackendContext(DRIVER, NODE, config))


def prepare(backend: ExampleDriver, *devices: DeviceToPrepare) -> tuple[list[list[str]], Any]:
    claim = ClaimToPrepare(uid="uid-1", namespace="ns", name="claim", devices=devices)
    prepared = backend.prepare(claim, RequestContext("test-1"))
    return [list(e.env) for e in prepared.device_edits], prepared


def config(params: dict[str, Any]) -> Any:
    """Opaque parameters validated as the node plugin and the webhook do."""
    return validate_config(ExampleDriver, params)


def gpu_config(sharing: dict[str, Any] | None = None) -> Any:
    params: dict[str, Any] = {
        "apiVersion": "gpu.resource.example.com/v1alpha1",
        "kind": "GpuConfig",
    }
    if sharing is not None:
        params["sharing"] = sharing
    return config(params)


def devices_of(backend: ExampleDriver) -> dict[str, dict[str, Any]]:
    (pool,) = backend.discover()
    assert pool.name == NODE
    return {d.name: d.to_dict() for d in pool.devices}


# -- gpu: devices ---------------------------------------------------------------------------


def test_gpus_are_published_with_upstreams_attributes_and_capacity() -> None:
    devices = devices_of(driver(numDevices=2))
    assert sorted(devices) == ["gpu-0", "gpu-1"]
    gpu = devices["gpu-1"]
    attrs = gpu["attributes"]
    assert attrs["index"] == {"int": 1}
    assert attrs["model"] == {"string": "LATEST-GPU-MODEL"}
    assert attrs["driverVersion"] == {"version": "1.0.0"}
    assert attrs["uuid"]["string"].startswith("gpu-")
    assert gpu["capacity"] == {"memory": {"value": "80Gi"}, "compute": {"value": "100"}}
    for key in ("allowMultipleAllocations", "bindingConditions", "consumesCounters"):
        assert key not in gpu
    # Stable across restarts: the same node gets the same UUIDs.
    assert devices_of(driver(numDevices=2))["gpu-1"]["attributes"] == attrs


def test_partitioned_gpus_consume_shared_counters() -> None:
    backend = driver(numDevices=2, gpuPartitions=4)
    devices = devices_of(backend)
    assert len(devices) == 2 * 5
    (pool,) = backend.discover()
    assert [c.to_dict() for c in pool.shared_counters][1] == {
        "name": "gpu-1-counters",
        "counters": {"memory": {"value": "80Gi"}, "compute": {"value": "100"}},
    }
    part = devices["gpu-1-partition-3"]
    assert part["capacity"] == {"memory": {"value": "20Gi"}, "compute": {"value": "25"}}
    assert part["consumesCounters"] == [
        {
            "counterSet": "gpu-1-counters",
            "counters": {"memory": {"value": "20Gi"}, "compute": {"value": "25"}},
        }
    ]
    assert part["attributes"]["partition"] == {"int": 3}
    full = devices["gpu-1-full"]
    assert full["attributes"]["full"] == {"bool": True}
    assert full["consumesCounters"][0]["counters"]["memory"] == {"value": "80Gi"}


@pytest.mark.parametrize("partitions", [0, 4])
def test_shareable_gpus_get_a_request_policy_on_memory_and_compute(partitions: int) -> None:
    devices = devices_of(
        driver(numDevices=2, gpuPartitions=partitions, allowMultipleAllocations=True)
    )
    for gpu in devices.values():
        assert gpu["allowMultipleAllocations"] is True
        memory, compute = gpu["capacity"]["memory"], gpu["capacity"]["compute"]
        assert memory["requestPolicy"]["validRange"] == {
            "min": "1Gi",
            "step": "1Gi",
            "max": memory["value"],
        }
        assert compute["requestPolicy"]["validRange"] == {
            "min": "1",
            "step": "1",
            "max": compute["value"],
        }


def test_binding_conditions_are_published_on_every_gpu() -> None:
    for gpu in devices_of(driver(numDevices=2, gpuPartitions=2, bindingConditions=True)).values():
        assert gpu["bindingConditions"] == ["BindingConditions"]
        assert gpu["bindingFailureConditions"] == ["BindingFailureConditions"]


def test_bad_backend_config_names_the_field() -> None:
    with pytest.raises(BackendConfigError, match="numDevices"):
        driver(numDevices=-1)
    with pytest.raises(BackendConfigError, match="profile"):
        driver(profile="tpu")


# -- gpu: prepare ---------------------------------------------------------------------------


def test_gpu_env_is_what_the_suite_parses_with_default_time_slicing() -> None:
    (env,), prepared = prepare(
        driver(numDevices=2), DeviceToPrepare(request="gpu", pool=NODE, device="gpu-1")
    )
    logs = export(env)
    assert GPU_DEVICE.findall(logs) == ["gpu-1"]
    assert gpu_property(logs, "gpu-1", "SHARING_STRATEGY") == "TimeSlicing"
    assert gpu_property(logs, "gpu-1", "TIMESLICE_INTERVAL") == "Default"
    assert gpu_property(logs, "gpu-1", "DRA_ADMIN_ACCESS") == "false"
    assert "GPU_DEVICE_GPU_1_RESOURCE_CLAIM=uid-1" in env
    assert f"DRA_RESOURCE_DRIVER_NAME={DRIVER}" in env
    assert f"KUBERNETES_NODE_NAME={NODE}" in env
    assert prepared.device_status == ()


def test_two_gpus_in_one_container_are_both_found() -> None:
    edits, _ = prepare(
        driver(numDevices=2),
        DeviceToPrepare(request="gpu0", pool=NODE, device="gpu-0"),
        DeviceToPrepare(request="gpu1", pool=NODE, device="gpu-1"),
    )
    assert sorted(GPU_DEVICE.findall(export(edits[0] + edits[1]))) == ["gpu-0", "gpu-1"]


@pytest.mark.parametrize(
    ("sharing", "prop", "value"),
    [
        (
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
            "TIMESLICE_INTERVAL",
            "Long",
        ),
        (
            {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 10}},
            "PARTITION_COUNT",
            "10",
        ),
        ({"strategy": "SpacePartitioning"}, "PARTITION_COUNT", "1"),
        (None, "TIMESLICE_INTERVAL", "Default"),
    ],
)
def test_gpu_config_sets_the_sharing_variables(
    sharing: dict[str, Any] | None, prop: str, value: str
) -> None:
    device = DeviceToPrepare(
        request="ts-gpu", pool=NODE, device="gpu-0", config=gpu_config(sharing)
    )
    (env,), _ = prepare(driver(), device)
    logs = export(env)
    strategy = (sharing or {}).get("strategy", "TimeSlicing")
    assert gpu_property(logs, "gpu-0", "SHARING_STRATEGY") == strategy
    assert gpu_property(logs, "gpu-0", prop) == value


def test_admin_access_is_announced_to_the_container() -> None:
    device = DeviceToPrepare(request="gpu", pool=NODE, device="gpu-0", admin_access=True)
    (env,), _ = prepare(driver(), device)
    assert gpu_property(export(env), "gpu-0", "DRA_ADMIN_ACCESS") == "true"


def test_a_share_gets_its_consumed_memory_and_compute() -> None:
    device = DeviceToPrepare(
        request="gpu",
        pool=NODE,
        device="gpu-0-partition-1",
        share_id="s-1",
        consumed_capacity={"memory": Quantity.parse("10Gi"), "compute": Quantity.parse("10")},
    )
    (env,), _ = prepare(
        driver(numDevices=1, gpuPartitions=4, allowMultipleAllocations=True), device
    )
    logs = export(env)
    assert GPU_DEVICE.findall(logs) == ["gpu-0-partition-1"]
    assert gpu_property(logs, "gpu-0-partition-1", "MEMORY") == "10Gi"
    assert gpu_property(logs, "gpu-0-partition-1", "COMPUTE") == "10"


def test_device_status_reports_uuid_model_and_driver_version_as_attributes() -> None:
    backend = driver(numDevices=2, deviceStatus=True)
    _, prepared = prepare(backend, DeviceToPrepare(request="gpu", pool=NODE, device="gpu-1"))
    (status,) = prepared.device_status
    assert status.data == {
        "uuid": devices_of(backend)["gpu-1"]["attributes"]["uuid"],
        "model": {"string": "LATEST-GPU-MODEL"},
        "driverVersion": {"version": "1.0.0"},
    }


def test_a_device_the_node_does_not_have_is_refused() -> None:
    with pytest.raises(BackendError, match="requested device is not allocatable: gpu-9"):
        prepare(driver(numDevices=2), DeviceToPrepare(request="gpu", pool=NODE, device="gpu-9"))


def test_config_of_another_profile_is_refused() -> None:
    net = config({"apiVersion": "net.resource.example.com/v1alpha1", "kind": "NetConfig"})
    device = DeviceToPrepare(request="gpu", pool=NODE, device="gpu-0", config=net)
    with pytest.raises(BackendError, match="NetConfig is not accepted by the gpu profile"):
        prepare(driver(), device)


# -- cpu ------------------------------------------------------------------------------------


def test_numa_devices_map_their_cpu_capacity_to_node_allocatable_cpu() -> None:
    devices = devices_of(driver(profile="cpu", numaNodes=2, cpusPerNUMANode=3))
    assert sorted(devices) == ["numa-0", "numa-1"]
    numa = devices["numa-1"]
    key = f"{DRIVER}/cpu"
    assert numa["allowMultipleAllocations"] is True
    assert numa["attributes"] == {"numaNodeID": {"int": 1}}
    assert numa["capacity"] == {key: {"value": "3"}}
    assert numa["nodeAllocatableResourceMappings"] == {"cpu": {"capacityKey": key}}


def test_two_shares_of_one_numa_device_each_get_their_cpus() -> None:
    key = f"{DRIVER}/cpu"
    shares = [
        DeviceToPrepare(
            request=f"cpu{i}",
            pool=NODE,
            device="numa-0",
            share_id=f"s-{i}",
            consumed_capacity={key: Quantity.parse("1")},
        )
        for i in range(2)
    ]
    edits, _ = prepare(driver(profile="cpu", numaNodes=1, cpusPerNUMANode=2), *shares)
    for env in edits:
        assert "CPU_DEVICE_0=numa-0" in env
        assert "CPU_DEVICE_0_CONSUMED_CPU=1" in env
        assert "CPU_DEVICE_NUMA_0_RESOURCE_CLAIM=uid-1" in env


def test_cpu_profile_refuses_opaque_config() -> None:
    device = DeviceToPrepare(request="cpu", pool=NODE, device="numa-0", config=gpu_config())
    with pytest.raises(BackendError, match="GpuConfig is not accepted by the cpu profile"):
        prepare(driver(profile="cpu", numaNodes=1), device)


# -- net ------------------------------------------------------------------------------------


def test_nics_offer_consumable_bandwidth_and_one_vf_per_share() -> None:
    devices = devices_of(driver(profile="net", numDevices=4))
    assert sorted(devices) == ["nic-0", "nic-1", "nic-2", "nic-3"]
    nic = devices["nic-2"]
    assert nic["allowMultipleAllocations"] is True
    assert nic["attributes"]["model"] == {"string": "LATEST-NET-MODEL"}
    assert nic["capacity"]["vfs"] == {
        "value": "100",
        "requestPolicy": {"default": "1", "validValues": ["1"]},
    }
    for direction in ("ingressBandwidth", "egressBandwidth"):
        assert nic["capacity"][direction] == {
            "value": "100G",
            "requestPolicy": {
                "default": "1G",
                "validRange": {"min": "100M", "max": "100G", "step": "1M"},
            },
        }


def test_nic_share_gets_rates_the_suite_parses_and_bursts_from_config() -> None:
    net = config(
        {
            "apiVersion": "net.resource.example.com/v1alpha1",
            "kind": "NetConfig",
            "bwBurst": {"ingressBurst": 1000, "egressBurst": 0},
        }
    )
    device = DeviceToPrepare(
        request="nic",
        pool=NODE,
        device="nic-3",
        config=net,
        share_id="s-1",
        consumed_capacity={
            "ingressBandwidth": Quantity.parse("10G"),
            "egressBandwidth": Quantity.parse("5G"),
            "vfs": Quantity.parse("1"),
        },
    )
    (env,), _ = prepare(driver(profile="net", numDevices=4), device)
    assert NET_DEVICE_RATE.findall(export(env)) == [
        ("3", "EGRESS", "5000000000"),
        ("3", "INGRESS", "10000000000"),
    ]
    assert "NET_DEVICE_3_INGRESS_BURST=1000" in env
    assert not [e for e in env if e.startswith("NET_DEVICE_3_EGRESS_BURST")]
