"""The node plugin's backend configuration (``--backend-config``), written by the chart
from its values (deviceProfile, kubeletPlugin.*, gpuDeviceStatus,
gpuAllowMultipleAllocations)."""

from __future__ import annotations

from typing import Literal

import pydantic


class DriverSettings(pydantic.BaseModel):
    """Which devices the driver simulates and how it publishes them.

    ``profile`` gpu: ``numDevices`` GPUs, each split into ``gpuPartitions`` partitions
    (plus a full device) sharing counters when above 0; ``allowMultipleAllocations``
    lets claims share them by memory and compute; ``bindingConditions`` publishes them
    with binding conditions; ``deviceStatus`` reports uuid/model/driverVersion in
    the claim status. ``profile`` cpu: ``numaNodes`` NUMA-node devices with
    ``cpusPerNUMANode`` cpu capacity each. ``profile`` net: ``numDevices`` NICs.
    """

    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    profile: Literal["gpu", "cpu", "net"] = "gpu"
    num_devices: int = pydantic.Field(default=8, ge=0, le=128, alias="numDevices")
    # A partition must keep at least 1Gi of memory and 1 of compute (the request policy's
    # step): 80Gi and 100 compute per GPU allow at most 80.
    gpu_partitions: int = pydantic.Field(default=0, ge=0, le=80, alias="gpuPartitions")
    device_status: bool = pydantic.Field(default=False, alias="deviceStatus")
    allow_multiple_allocations: bool = pydantic.Field(
        default=False, alias="allowMultipleAllocations"
    )
    binding_conditions: bool = pydantic.Field(default=False, alias="bindingConditions")
    numa_nodes: int = pydantic.Field(default=8, ge=0, le=128, alias="numaNodes")
    cpus_per_numa_node: int = pydantic.Field(default=4, ge=1, le=4096, alias="cpusPerNUMANode")
