"""The example backend, reporting a device status for each device it prepares.

Run by ``drakit node-plugin`` (``status_backend:StatusBackend``) in tests that drive the
plugin through the kubelet harness: each device gets ``data`` with its name and the
sharing strategy of its opaque config, and a ``Ready`` condition.
"""

from __future__ import annotations

from drakit.backends.example import ExampleBackend
from drakit.plugin import (
    BackendPrepared,
    ClaimToPrepare,
    DeviceStatus,
    DeviceToPrepare,
    RequestContext,
)


class StatusBackend(ExampleBackend):
    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        prepared = super().prepare(claim, context)
        status = tuple(
            DeviceStatus(
                data={"device": d.device, "strategy": _strategy(d)},
                conditions=({"type": "Ready", "status": "True", "reason": "Prepared"},),
            )
            for d in claim.devices
        )
        return BackendPrepared(prepared.device_edits, prepared.state, status)


def _strategy(device: DeviceToPrepare) -> str:
    """The sharing strategy of the device's opaque config ("none" without one)."""
    sharing = getattr(device.config, "sharing", None)
    return str(getattr(sharing, "strategy", "none"))
