"""The gpu profile: simulated GPUs with memory and compute, optionally partitionable
(shared counters), shareable by capacity (allowMultipleAllocations) or published with
binding conditions, as upstream's internal/profiles/gpu."""

from __future__ import annotations

from typing import Any

from drakit.plugin import (
    CounterSet,
    Device,
    DeviceStatus,
    DeviceToPrepare,
    PoolDescription,
    Quantity,
)
from example_driver.profiles import DRIVER_VERSION, env_key, stable_uuid

MODEL = "LATEST-GPU-MODEL"
MEMORY_PER_GPU = 80 * 2**30  # 80Gi
COMPUTE_PER_GPU = 100
BINDING_CONDITION = "BindingConditions"
BINDING_FAILURE_CONDITION = "BindingFailureConditions"


class GpuProfile:
    """``num_gpus`` GPUs named gpu-<i>; with ``partitions`` > 0, gpu-<i>-partition-<j>
    and gpu-<i>-full instead, all consuming the counter set gpu-<i>-counters."""

    cdi_class = "gpu"
    config_kind: str | None = "GpuConfig"

    def __init__(
        self,
        node_name: str,
        num_gpus: int,
        partitions: int = 0,
        *,
        device_status: bool = False,
        binding_conditions: bool = False,
        allow_multiple_allocations: bool = False,
    ) -> None:
        self.node_name = node_name
        self.num_gpus = num_gpus
        self.partitions = partitions
        self.device_status_enabled = device_status
        self.binding_conditions = binding_conditions
        self.allow_multiple_allocations = allow_multiple_allocations
        self.uuids = [stable_uuid(node_name, "gpu", i) for i in range(num_gpus)]
        self._description = self._describe()
        self._by_name = {d.name: d for d in self._description.devices}

    # -- description ----------------------------------------------------------------------

    def _capacity(self, memory: int, compute: int) -> dict[str, Any]:
        """memory and compute; shareable devices get a request policy of 1Gi and 1 steps
        up to the whole device (any number of partitions stays expressible)."""
        capacity: dict[str, Any] = {
            "memory": {"value": _binary(memory)},
            "compute": {"value": str(compute)},
        }
        if self.allow_multiple_allocations:
            capacity["memory"]["requestPolicy"] = {
                "default": _binary(memory),
                "validRange": {"min": "1Gi", "step": "1Gi", "max": _binary(memory)},
            }
            capacity["compute"]["requestPolicy"] = {
                "default": str(compute),
                "validRange": {"min": "1", "step": "1", "max": str(compute)},
            }
        return capacity

    def _device(
        self,
        name: str,
        attributes: dict[str, Any],
        memory: int,
        compute: int,
        counter_set: str | None = None,
    ) -> dict[str, Any]:
        device: dict[str, Any] = {
            "name": name,
            "attributes": attributes,
            "capacity": self._capacity(memory, compute),
        }
        if self.allow_multiple_allocations:
            device["allowMultipleAllocations"] = True
        if counter_set is not None:
            device["consumesCounters"] = [
                {
                    "counterSet": counter_set,
                    "counters": {
                        "memory": {"value": _binary(memory)},
                        "compute": {"value": str(compute)},
                    },
                }
            ]
        if self.binding_conditions:
            device["bindingConditions"] = [BINDING_CONDITION]
            device["bindingFailureConditions"] = [BINDING_FAILURE_CONDITION]
        return device

    def _describe(self) -> PoolDescription:
        devices: list[dict[str, Any]] = []
        counter_sets: list[dict[str, Any]] = []
        for i, gpu_uuid in enumerate(self.uuids):
            attrs: dict[str, Any] = {
                "index": {"int": i},
                "uuid": {"string": gpu_uuid},
                "model": {"string": MODEL},
                "driverVersion": {"version": DRIVER_VERSION},
            }
            if self.partitions == 0:
                devices.append(self._device(f"gpu-{i}", attrs, MEMORY_PER_GPU, COMPUTE_PER_GPU))
                continue
            counter_set = f"gpu-{i}-counters"
            counter_sets.append(
                {
                    "name": counter_set,
                    "counters": {
                        "memory": {"value": _binary(MEMORY_PER_GPU)},
                        "compute": {"value": str(COMPUTE_PER_GPU)},
                    },
                }
            )
            memory = MEMORY_PER_GPU // self.partitions
            compute = COMPUTE_PER_GPU // self.partitions
            for j in range(self.partitions):
                part = {**attrs, "partition": {"int": j}, "partitionable": {"bool": True}}
                devices.append(
                    self._device(f"gpu-{i}-partition-{j}", part, memory, compute, counter_set)
                )
            full = {**attrs, "partitionable": {"bool": True}, "full": {"bool": True}}
            devices.append(
                self._device(f"gpu-{i}-full", full, MEMORY_PER_GPU, COMPUTE_PER_GPU, counter_set)
            )
        return PoolDescription(
            name=self.node_name,
            devices=tuple(Device.from_dict(d) for d in devices),
            shared_counters=tuple(CounterSet.from_dict(c) for c in counter_sets),
        )

    def describe(self) -> PoolDescription:
        return self._description

    # -- prepare --------------------------------------------------------------------------

    def device_env(self, device: DeviceToPrepare, config: Any) -> list[str]:
        """GPU_DEVICE_<id>=<device>, the sharing settings and the consumed capacity, where
        <id> is the device name after ``gpu-`` (``0``, ``0_PARTITION_1``, ``0_FULL``)."""
        key = env_key(device.device.removeprefix("gpu-"))
        env = [f"GPU_DEVICE_{key}={device.device}"]
        if config is not None:
            config.validate_config()
            sharing = config.normalized()
        else:
            from example_driver.api import GpuSharing, TimeSlicingConfig  # noqa: PLC0415

            sharing = GpuSharing(
                strategy="TimeSlicing", timeSlicingConfig=TimeSlicingConfig(interval="Default")
            )
        env.append(f"GPU_DEVICE_{key}_SHARING_STRATEGY={sharing.strategy}")
        if sharing.time_slicing_config is not None:
            env.append(
                f"GPU_DEVICE_{key}_TIMESLICE_INTERVAL={sharing.time_slicing_config.interval}"
            )
        if sharing.space_partitioning_config is not None:
            count = sharing.space_partitioning_config.partition_count
            env.append(f"GPU_DEVICE_{key}_PARTITION_COUNT={count}")
        for name in ("memory", "compute"):
            amount = device.consumed_capacity.get(name)
            if amount is not None:
                env.append(f"GPU_DEVICE_{key}_{name.upper()}={amount.canonical()}")
        return env

    def device_status(self, device: DeviceToPrepare) -> DeviceStatus | None:
        """uuid, model and driverVersion as DeviceAttribute JSON (gpuDeviceStatus)."""
        if not self.device_status_enabled:
            return None
        known = self._by_name.get(device.device)
        if known is None:
            return None
        data = {
            name: known.attributes[name].to_dict()
            for name in ("uuid", "model", "driverVersion")
            if name in known.attributes
        }
        return DeviceStatus(data=data)


def _binary(value: int) -> str:
    """A byte count in Kubernetes' canonical binary form (80Gi, 20Gi, 1536Mi)."""
    return Quantity(value, "BinarySI").canonical()
