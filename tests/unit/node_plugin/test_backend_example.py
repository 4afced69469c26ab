"""The example backend: stable UUIDs, the publisher's device options, config validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from drakit.backends.example import ExampleBackend, GpuConfig
from drakit.node_plugin.backend_loader import load_backend
from drakit.plugin import (
    BackendConfigError,
    ClaimToPrepare,
    DeviceToPrepare,
    HealthStatus,
    RequestContext,
)


class NotABackend:
    def __init__(self, context: object) -> None:
        self.context = context


def example(node: str = "n1", **config: object) -> ExampleBackend:
    backend = load_backend("example", driver_name="gpu.example.com", node_name=node, config=config)
    assert isinstance(backend, ExampleBackend)
    return backend


def uuids(backend: ExampleBackend) -> list[str]:
    return [d.attributes["uuid"].value for d in backend.discover()[0].devices]


def test_example_uuids_are_stable_per_node_and_differ_between_nodes() -> None:
    assert uuids(example("n1", gpus=3)) == uuids(example("n1", gpus=3))
    assert set(uuids(example("n1", gpus=3))).isdisjoint(uuids(example("n2", gpus=3)))


def test_example_count_model_and_memory_are_configurable() -> None:
    (pool,) = example(gpus=2, model="H9000", memory="16Gi").discover()
    assert [d.name for d in pool.devices] == ["gpu-0", "gpu-1"]
    assert pool.devices[0].attributes["model"].value == "H9000"
    assert str(pool.devices[0].capacity["memory"].value) == "16Gi"


def test_example_partitionable_gpu_has_counter_set_and_partitions_consuming_it() -> None:
    (pool,) = example(
        gpus=0, partitionable={"gpus": 1, "memory": "40Gi", "partitions": 2}
    ).discover()
    assert [c.name for c in pool.shared_counters] == ["pgpu-0-counters"]
    names = [d.name for d in pool.devices]
    assert names == ["pgpu-0", "pgpu-0-part-0", "pgpu-0-part-1"]
    part = pool.devices[1].consumes_counters[0]
    assert part.counter_set == "pgpu-0-counters"
    assert part.counters["memory"].value.value * 2 == 40 * 2**30


def test_example_consumable_tainted_binding_and_per_device_node_options() -> None:
    backend = example(
        gpus=2,
        consumable={"devices": 1},
        taints=[{"device": "gpu-1", "key": "example.com/broken", "effect": "NoExecute"}],
        bindingConditions=[{"device": "gpu-0", "conditions": ["Attached"]}],
        perDeviceNodeSelection=True,
    )
    devices = {d.name: d for d in backend.discover()[0].devices}
    shared = devices["shared-gpu-0"]
    assert shared.allow_multiple_allocations is True
    assert shared.capacity["memory"].request_policy is not None
    assert devices["gpu-1"].taints[0].effect == "NoExecute"
    assert devices["gpu-0"].binding_conditions == ("Attached",)
    assert devices["gpu-0"].binds_to_node is True
    assert all(d.node_name == "n1" for d in devices.values())


def test_example_config_errors_name_the_field_and_unknown_devices(tmp_path: Path) -> None:
    with pytest.raises(BackendConfigError, match="gpus: Input should be a valid integer"):
        example(gpus="many")
    with pytest.raises(BackendConfigError, match="memory: Value error, 'lots'"):
        example(memory="lots")
    with pytest.raises(BackendConfigError, match="do not exist: gpu-7"):
        example(gpus=1, unhealthy=["gpu-7"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: [\n")
    with pytest.raises(BackendConfigError, match=f"--backend-config {bad}: not valid YAML"):
        load_backend("example", driver_name="d", node_name="n", config_path=bad)


def test_example_config_file_is_read_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "example.yaml"
    path.write_text("gpus: 1\nmodel: A100\n")
    backend = load_backend("example", driver_name="d", node_name="n", config_path=path)
    assert [d.name for d in backend.discover()[0].devices] == ["gpu-0"]


def test_example_prepare_puts_identity_and_sharing_into_env() -> None:
    backend = example(gpus=1)
    config = GpuConfig.model_validate(
        {
            "sharing": {
                "strategy": "SpacePartitioning",
                "spacePartitioningConfig": {"partitionCount": 4},
            }
        }
    )
    claim = ClaimToPrepare("uid-1", "ns", "c", (DeviceToPrepare("gpu", "n1", "gpu-0", config),))
    (edits,) = backend.prepare(claim, RequestContext("r1")).device_edits
    assert f"GPU_0={backend.device_uuid('gpu-0')}" in edits.env
    assert "GPU_0_SHARING_STRATEGY=SpacePartitioning" in edits.env
    assert "GPU_0_PARTITION_COUNT=4" in edits.env


def test_example_health_change_reaches_subscribers() -> None:
    backend = example(gpus=2, unhealthy=["gpu-1"])
    assert [h.health for h in backend.health()] == [HealthStatus.HEALTHY, HealthStatus.UNHEALTHY]
    calls: list[int] = []
    backend.subscribe(lambda: calls.append(1))
    backend.set_health("gpu-0", HealthStatus.UNHEALTHY)
    assert calls == [1]
    assert backend.health()[0].health is HealthStatus.UNHEALTHY


def test_custom_backend_is_loaded_by_module_and_class() -> None:
    backend = load_backend("drakit.backends.example:ExampleBackend", driver_name="d", node_name="n")
    assert backend.name == "example"
    with pytest.raises(BackendConfigError, match="not a built-in backend"):
        load_backend("nosuch", driver_name="d", node_name="n")
    with pytest.raises(BackendConfigError, match="cannot import 'no_such_module'"):
        load_backend("no_such_module:X", driver_name="d", node_name="n")
    with pytest.raises(BackendConfigError, match="NotABackend does not implement Backend"):
        load_backend("test_backend_example:NotABackend", driver_name="d", node_name="n")
    with pytest.raises(BackendConfigError, match=r"PurePath\(context\) failed"):
        load_backend("pathlib:PurePath", driver_name="d", node_name="n")
