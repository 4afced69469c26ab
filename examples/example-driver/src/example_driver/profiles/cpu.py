"""The cpu profile: NUMA-node devices whose cpu capacity is charged against the node's
allocatable cpu (nodeAllocatableResourceMappings), shareable by capacity, as upstream's
internal/profiles/cpu. Opaque config is refused."""

from __future__ import annotations

from typing import Any

from drakit.plugin import Device, DeviceStatus, DeviceToPrepare, PoolDescription


class CpuProfile:
    """``numa_nodes`` devices numa-<i> with capacity ``<driver>/cpu`` = ``cpus_per_node``.

    The capacity key carries the driver name so that several installs of the driver
    (under different names) never share a key.
    """

    cdi_class = "cpu"
    config_kind: str | None = None

    def __init__(
        self, node_name: str, driver_name: str, numa_nodes: int, cpus_per_node: int
    ) -> None:
        self.node_name = node_name
        self.capacity_key = f"{driver_name}/cpu"
        self.numa_nodes = numa_nodes
        self.cpus_per_node = cpus_per_node
        self._description = PoolDescription(
            name=node_name,
            devices=tuple(Device.from_dict(self._device(i)) for i in range(numa_nodes)),
        )

    def _device(self, index: int) -> dict[str, Any]:
        return {
            "name": f"numa-{index}",
            "allowMultipleAllocations": True,
            "attributes": {"numaNodeID": {"int": index}},
            "capacity": {self.capacity_key: {"value": str(self.cpus_per_node)}},
            "nodeAllocatableResourceMappings": {"cpu": {"capacityKey": self.capacity_key}},
        }

    def describe(self) -> PoolDescription:
        return self._description

    def device_env(self, device: DeviceToPrepare, config: Any) -> list[str]:
        """CPU_DEVICE_<i>=numa-<i> and CPU_DEVICE_<i>_CONSUMED_CPU=<amount>."""
        if config is not None:
            raise ValueError("configuration not allowed")
        key = device.device.removeprefix("numa-")
        env = [f"CPU_DEVICE_{key}={device.device}"]
        cpu = device.consumed_capacity.get(self.capacity_key)
        if cpu is not None:
            env.append(f"CPU_DEVICE_{key}_CONSUMED_CPU={cpu.canonical()}")
        return env

    def device_status(self, device: DeviceToPrepare) -> DeviceStatus | None:
        return None
