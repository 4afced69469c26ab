"""The example backend's pydantic models: its ``--backend-config`` and its opaque config.

Imported only when needed (pydantic costs the plugin about 8 MiB of RSS): when a claim
carries opaque config for the driver (:class:`GpuConfig`, the backend's
``config_model``), or when ``--backend-config`` is not plainly valid
(:class:`ExampleSettings` then coerces it or names each bad field; the plain check is
``drakit.backends.example.SETTINGS``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic

from drakit.plugin import Quantity


def _quantity(value: Any) -> str:
    try:
        Quantity.parse(str(value))
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a Kubernetes quantity: {exc}") from exc
    return str(value)


QuantityText = Annotated[str, pydantic.BeforeValidator(_quantity)]


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class PartitionableOptions(_Strict):
    gpus: int = pydantic.Field(1, ge=0, le=32)
    memory: QuantityText = "40Gi"
    partitions: int = pydantic.Field(2, ge=1, le=16)


class ConsumableOptions(_Strict):
    devices: int = pydantic.Field(1, ge=0, le=32)
    memory: QuantityText = "80Gi"
    default: QuantityText = "10Gi"
    step: QuantityText = "1Gi"


class TaintOption(_Strict):
    device: str
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "NoExecute", "None"] = "NoSchedule"


class BindingConditionOption(_Strict):
    device: str
    conditions: list[str] = pydantic.Field(min_length=1)
    failure_conditions: list[str] = pydantic.Field(default_factory=list, alias="failureConditions")


class ExampleSettings(_Strict):
    """``--backend-config`` of the example backend."""

    gpus: int = pydantic.Field(8, ge=0, le=128)
    model: str = "LATEST-GPU-MODEL"
    memory: QuantityText = "80Gi"
    pool: str | None = None
    partitionable: PartitionableOptions | None = None
    consumable: ConsumableOptions | None = None
    taints: list[TaintOption] = pydantic.Field(default_factory=list)
    binding_conditions: list[BindingConditionOption] = pydantic.Field(
        default_factory=list, alias="bindingConditions"
    )
    per_device_node_selection: bool = pydantic.Field(False, alias="perDeviceNodeSelection")
    unhealthy: list[str] = pydantic.Field(default_factory=list)
    device_metadata: bool = pydantic.Field(False, alias="deviceMetadata")


class TimeSlicingConfig(_Strict):
    interval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class SpacePartitioningConfig(_Strict):
    partition_count: int = pydantic.Field(1, ge=1, le=64, alias="partitionCount")


class Sharing(_Strict):
    strategy: Literal["TimeSlicing", "SpacePartitioning"]
    time_slicing_config: TimeSlicingConfig | None = pydantic.Field(None, alias="timeSlicingConfig")
    space_partitioning_config: SpacePartitioningConfig | None = pydantic.Field(
        None, alias="spacePartitioningConfig"
    )


class GpuConfig(_Strict):
    """Opaque parameters of the example driver (``apiVersion``/``kind`` accepted, ignored)."""

    api_version: str | None = pydantic.Field(None, alias="apiVersion")
    kind: str | None = None
    sharing: Sharing | None = None
