"""The driver's opaque configuration: what a claim or class may say under
``opaque.parameters`` for this driver.

``GpuConfig`` (``gpu.resource.example.com/v1alpha1``) configures GPU sharing and
``NetConfig`` (``net.resource.example.com/v1alpha1``) NIC burst sizes, with upstream
dra-example-driver's fields, defaults and messages. :class:`OpaqueConfig` accepts either,
chosen by ``kind``; drakit validates parameters with it and then calls its
``validate_config()``, both in the node plugin and in ``drakit webhook``, so a bad config
is refused at admission with the same message the plugin would give
(e.g. ``unknown time-slice interval: InvalidInterval``).

Imported only when a claim carries opaque config for the driver (pydantic costs memory).
"""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic

GPU_API_VERSION = "gpu.resource.example.com/v1alpha1"
NET_API_VERSION = "net.resource.example.com/v1alpha1"

TIME_SLICING = "TimeSlicing"
SPACE_PARTITIONING = "SpacePartitioning"
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")
# Upstream's limit: a burst in bits whose byte count reaches 2^32 - 1 is refused.
_MAX_BURST_BYTES = 2**32 - 1


class _Model(pydantic.BaseModel):
    # Unknown fields are refused (a misspelt field would otherwise be silently ignored).
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class TimeSlicingConfig(_Model):
    """``interval``: Default, Short, Medium or Long."""

    interval: str = ""


class SpacePartitioningConfig(_Model):
    """``partitionCount``: how many equal slices the GPU is divided into."""

    partition_count: int = pydantic.Field(default=0, alias="partitionCount")


class GpuSharing(_Model):
    """The sharing strategy of a GPU and the settings of that strategy."""

    strategy: str = ""
    time_slicing_config: TimeSlicingConfig | None = pydantic.Field(
        default=None, alias="timeSlicingConfig"
    )
    space_partitioning_config: SpacePartitioningConfig | None = pydantic.Field(
        default=None, alias="spacePartitioningConfig"
    )


class GpuConfig(_Model):
    """Opaque config of the gpu profile. Without ``sharing`` a GPU is time-sliced with the
    Default interval (upstream's ``DefaultGpuConfig``)."""

    api_version: Literal["gpu.resource.example.com/v1alpha1"] = pydantic.Field(alias="apiVersion")
    kind: Literal["GpuConfig"]
    sharing: GpuSharing | None = None

    def normalized(self) -> GpuSharing:
        """The sharing settings with upstream's implied defaults filled in."""
        sharing = self.sharing or GpuSharing(strategy=TIME_SLICING)
        if sharing.strategy == TIME_SLICING and sharing.time_slicing_config is None:
            return sharing.model_copy(
                update={"time_slicing_config": TimeSlicingConfig(interval="Default")}
            )
        if sharing.strategy == SPACE_PARTITIONING and sharing.space_partitioning_config is None:
            return sharing.model_copy(
                update={"space_partitioning_config": SpacePartitioningConfig(partitionCount=1)}
            )
        return sharing

    def validate_config(self) -> None:
        """Raise ValueError with upstream's message when the (normalized) settings are unusable."""
        sharing = self.normalized()
        if sharing.strategy == TIME_SLICING:
            if sharing.space_partitioning_config is not None:
                raise ValueError(
                    f"cannot use SpacePartitioningConfig with the '{TIME_SLICING}' strategy"
                )
            interval = sharing.time_slicing_config.interval if sharing.time_slicing_config else ""
            if interval not in TIME_SLICE_INTERVALS:
                raise ValueError(f"unknown time-slice interval: {interval}")
        elif sharing.strategy == SPACE_PARTITIONING:
            if sharing.time_slicing_config is not None:
                raise ValueError(
                    f"cannot use TimeSlicingConfig with the '{SPACE_PARTITIONING}' strategy"
                )
            count = (
                sharing.space_partitioning_config.partition_count
                if sharing.space_partitioning_config
                else 0
            )
            if count < 0:
                raise ValueError(f"invalid partition count: {count}")
        else:
            raise ValueError(f"unknown GPU sharing strategy: {sharing.strategy}")


class BandwidthBurst(_Model):
    """Largest ingress and egress bursts in bits (0: no limit)."""

    ingress_burst: int = pydantic.Field(default=0, ge=0, alias="ingressBurst")
    egress_burst: int = pydantic.Field(default=0, ge=0, alias="egressBurst")


class NetConfig(_Model):
    """Opaque config of the net profile (upstream's ``NetConfig``)."""

    api_version: Literal["net.resource.example.com/v1alpha1"] = pydantic.Field(alias="apiVersion")
    kind: Literal["NetConfig"]
    bw_burst: BandwidthBurst | None = pydantic.Field(default=None, alias="bwBurst")

    def normalized(self) -> BandwidthBurst:
        """The burst settings; none given means no limit."""
        return self.bw_burst or BandwidthBurst()

    def validate_config(self) -> None:
        """Raise ValueError with upstream's message for a burst of 4 GB or more."""
        burst = self.normalized()
        for name, bits in (
            ("ingressBurst", burst.ingress_burst),
            ("egressBurst", burst.egress_burst),
        ):
            if bits > 0 and bits // 8 >= _MAX_BURST_BYTES:
                raise ValueError(f"invalid {name}: burst cannot be more than 4GB")


class OpaqueConfig(
    pydantic.RootModel[Annotated[GpuConfig | NetConfig, pydantic.Field(discriminator="kind")]]
):
    """The backend's ``config_model``: a GpuConfig or a NetConfig, by ``kind``."""

    model_config = pydantic.ConfigDict(frozen=True)

    def validate_config(self) -> None:
        """The chosen config's own checks (drakit calls this after validation)."""
        self.root.validate_config()
