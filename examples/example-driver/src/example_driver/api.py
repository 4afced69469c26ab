"""The driver's opaque configuration: what a claim or class may say under
``opaque.parameters`` for this driver.

``GpuConfig`` (``gpu.resource.example.com/v1alpha1``) configures GPU sharing and
``NetConfig`` (``net.resource.example.com/v1alpha1``) NIC burst sizes, with upstream
dra-example-driver's fields, defaults and messages. :class:`OpaqueConfig` accepts either,
chosen by ``kind``: it is the node plugin's model, whose ``validate_config()`` is what
upstream's kubelet plugin checks at prepare (normalise, validate, then the chosen strategy's
settings). Admission is stricter in one way and has its own models
(:mod:`example_driver.admission`).

The fields decode as upstream's Go types do under its strict decoder: names exactly as
written here (no other case), no unknown field, ``null`` for a field leaves its zero value
(``""``, ``0``, no settings), integers must fit the Go type (``int``: 64 bits signed,
``uint64``: 64 bits unsigned) and be written as integers. drakit adds the rest of the strict
decoding (exact JSON types; duplicate keys are refused at admission).

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


def _null_is(zero: object) -> pydantic.BeforeValidator:
    """Go's decoder leaves a field at its zero value for a JSON ``null``."""
    return pydantic.BeforeValidator(lambda value: zero if value is None else value)


#: Go ``string``.
GoString = Annotated[str, _null_is("")]
#: Go ``int`` (64 bits on every platform the driver runs on).
GoInt = Annotated[int, _null_is(0), pydantic.Field(ge=-(2**63), le=2**63 - 1)]
#: Go ``uint64``.
GoUint64 = Annotated[int, _null_is(0), pydantic.Field(ge=0, le=2**64 - 1)]


class _Model(pydantic.BaseModel):
    # Unknown fields are refused (a misspelt field would otherwise be silently ignored).
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class TimeSlicingConfig(_Model):
    """``interval``: Default, Short, Medium or Long."""

    interval: GoString = ""


class SpacePartitioningConfig(_Model):
    """``partitionCount``: how many equal slices the GPU is divided into."""

    partition_count: GoInt = pydantic.Field(default=0, alias="partitionCount")


class GpuSharing(_Model):
    """The sharing strategy of a GPU and the settings of that strategy."""

    strategy: GoString = ""
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
        """The sharing settings with upstream's implied defaults filled in (``Normalize``)."""
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
        """What upstream's kubelet plugin checks at prepare, with its messages (ValueError):
        ``Normalize``, ``Validate``, then the strategy's settings, which must not come with
        the other strategy's (``GetTimeSlicingConfig``/``GetSpacePartitioningConfig``)."""
        _check_prepare(self.normalized())

    def validate_admission(self) -> None:
        """What admission refuses: upstream's webhook refuses a config without ``sharing``
        (it validates before normalising), and everything the kubelet plugin would refuse
        at prepare (:meth:`validate_config`)."""
        if self.sharing is None:
            raise ValueError("no sharing strategy set")
        _check_prepare(self.normalized())


def _check_prepare(sharing: GpuSharing) -> None:
    """Upstream's ``GpuSharing.Validate`` of normalised settings, then the check of its
    ``Get*Config`` accessors."""
    _check_sharing(sharing)
    if sharing.strategy == TIME_SLICING and sharing.space_partitioning_config is not None:
        raise ValueError(f"cannot use SpacePartitioningConfig with the '{TIME_SLICING}' strategy")
    if sharing.strategy == SPACE_PARTITIONING and sharing.time_slicing_config is not None:
        raise ValueError(f"cannot use TimeSlicingConfig with the '{SPACE_PARTITIONING}' strategy")


def _check_sharing(sharing: GpuSharing) -> None:
    """Upstream's ``GpuSharing.Validate`` of normalised settings."""
    if sharing.strategy not in (TIME_SLICING, SPACE_PARTITIONING):
        raise ValueError(f"unknown GPU sharing strategy: {sharing.strategy}")
    if sharing.strategy == TIME_SLICING:
        interval = sharing.time_slicing_config.interval if sharing.time_slicing_config else ""
        if interval not in TIME_SLICE_INTERVALS:
            raise ValueError(f"unknown time-slice interval: {interval}")
    else:
        config = sharing.space_partitioning_config
        count = config.partition_count if config else 0
        if count < 0:
            raise ValueError(f"invalid partition count: {count}")


class BandwidthBurst(_Model):
    """Largest ingress and egress bursts in bits (0: no limit)."""

    ingress_burst: GoUint64 = pydantic.Field(default=0, alias="ingressBurst")
    egress_burst: GoUint64 = pydantic.Field(default=0, alias="egressBurst")


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
        _check_burst(self.normalized())

    def validate_admission(self) -> None:
        """As upstream's ``NetConfig.Validate`` (before normalising): ``bwBurst`` is needed."""
        if self.bw_burst is None:
            raise ValueError("no burst set")
        _check_burst(self.bw_burst)


def _check_burst(burst: BandwidthBurst) -> None:
    for name, bits in (("ingressBurst", burst.ingress_burst), ("egressBurst", burst.egress_burst)):
        if bits > 0 and bits // 8 >= _MAX_BURST_BYTES:
            raise ValueError(f"invalid {name}: burst cannot be more than 4GB")


class OpaqueConfig(
    pydantic.RootModel[Annotated[GpuConfig | NetConfig, pydantic.Field(discriminator="kind")]]
):
    """The node plugin's ``config_model``: a GpuConfig or a NetConfig, by ``kind`` (the
    driver refuses the kind of another profile at prepare)."""

    model_config = pydantic.ConfigDict(frozen=True)

    def validate_config(self) -> None:
        """The chosen config's prepare-time checks (drakit calls this after validation)."""
        self.root.validate_config()
