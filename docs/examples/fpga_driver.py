"""Two FPGA cards, /dev/fpga0 and /dev/fpga1, handed to containers with a bitstream name."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar

import pydantic

from drakit.plugin import (
    BackendBase,
    BackendContext,
    BackendError,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceHealth,
    DeviceNodeEdit,
    HealthStatus,
    PoolDescription,
    Quantity,
    RequestContext,
)


class FpgaConfig(pydantic.BaseModel):
    """Opaque parameters a claim (or its DeviceClass) may give for this driver."""

    model_config = pydantic.ConfigDict(extra="forbid")
    bitstream: str = "default"


class FpgaBackend(BackendBase[FpgaConfig]):
    name: ClassVar[str] = "fpga"
    config_model: ClassVar[type[pydantic.BaseModel]] = FpgaConfig

    def __init__(self, context: BackendContext) -> None:
        super().__init__(context)
        self._lock = threading.Lock()
        self._in_use: dict[str, list[str]] = {}  # claim UID -> devices (for health, below)

    def discover(self) -> tuple[PoolDescription, ...]:
        devices = tuple(
            Device(
                name=f"fpga-{i}",
                attributes={
                    "index": DeviceAttribute.of(i),
                    "family": DeviceAttribute.of("agilex"),
                },
                capacity={"logicCells": DeviceCapacity(value=Quantity.parse("2M"))},
            )
            for i in range(2)
        )
        return (PoolDescription(name=self.context.node_name, devices=devices),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits = []
        for device in claim.devices:
            index = device.device.removeprefix("fpga-")
            if not index.isdigit():
                raise BackendError(f"{device.device} is not an FPGA of this node")
            config = self.config_of(device) or FpgaConfig()
            left = context.time_left()  # None: the kubelet set no deadline
            if left is not None and left < 5.0:
                raise BackendError(f"{device.device}: {left:.1f} s left, loading takes 5 s")
            context.log.info("Loading bitstream", device=device.device, bitstream=config.bitstream)
            # Named after the device, not its place in the claim: two claims of this driver
            # may reach one container, and no two claims ever hold the same FPGA.
            edits.append(
                ContainerEdits(
                    env=(f"FPGA_{index}_BITSTREAM={config.bitstream}",),
                    device_nodes=(DeviceNodeEdit(path=f"/dev/fpga{index}"),),
                )
            )
        with self._lock:
            self._in_use[claim.uid] = [d.device for d in claim.devices]
        return BackendPrepared(tuple(edits), state={"devices": [d.device for d in claim.devices]})

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        # Also called after a restart, for a claim prepared by an earlier process:
        # everything needed is in ``state``. Unknown claims are fine (idempotent).
        context.log.info("Releasing FPGAs", devices=state.get("devices", []))
        with self._lock:
            self._in_use.pop(claim.uid, None)

    def health(self) -> list[DeviceHealth]:
        return [
            DeviceHealth(self.context.node_name, f"fpga-{i}", HealthStatus.HEALTHY, 0)
            for i in range(2)
        ]
