"""Device profiles: the shape of the simulated devices and what a container gets for one.

A profile describes its devices (:meth:`Profile.describe`) and turns one allocated device
and its opaque config into environment variables (:meth:`Profile.device_env`), as
upstream's internal/profiles do. The driver (:mod:`example_driver.driver`) adds what every
profile shares (claim UID, admin access, node and driver names).
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from drakit.plugin import DeviceStatus, DeviceToPrepare, PoolDescription

DRIVER_VERSION = "1.0.0"
# A fixed namespace: the same node and device always get the same UUID.
_UUID_NAMESPACE = uuid.UUID("6f1d6a0e-5b0b-4c3e-9a53-3e0f6b0c2d11")


class Profile(Protocol):
    """What the driver needs from a device profile."""

    #: The CDI class and the env prefix of the per-device claim variable (gpu, cpu, net).
    cdi_class: str
    #: The kind of opaque config accepted (GpuConfig, NetConfig) or None: config refused.
    config_kind: str | None

    def describe(self) -> PoolDescription:
        """The node's devices (pure, cheap: called often)."""
        ...

    def device_env(self, device: DeviceToPrepare, config: Any) -> list[str]:
        """``NAME=value`` entries for one allocated device; ``config`` is the device's
        GpuConfig/NetConfig or None (defaults). Raise ValueError for unusable config."""
        ...

    def device_status(self, device: DeviceToPrepare) -> DeviceStatus | None:
        """What to report in the claim's status.devices for the device (None: nothing)."""
        ...


def stable_uuid(node: str, kind: str, index: int) -> str:
    """``<kind>-<uuid>``, the same for the same node and index on every start."""
    return f"{kind}-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{kind}/{index}')}"


def env_key(name: str) -> str:
    """``gpu-0-partition-1`` -> ``GPU_0_PARTITION_1``: a device name as an env-name part."""
    return re.sub(r"\W", "_", name).upper()
