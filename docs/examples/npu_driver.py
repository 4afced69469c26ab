"""Two NPUs of 32 GiB and 8 cores, each offered whole, as two halves and as four quarters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import pydantic

from drakit.plugin import (
    BackendBase,
    BackendError,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Counter,
    CounterSet,
    Device,
    DeviceAttribute,
    DeviceCounterConsumption,
    DeviceStatus,
    PoolDescription,
    Quantity,
    RequestContext,
)

NPUS = 2
MEMORY_GI = 32
CORES = 8
#: Partition kind -> how many of them one NPU offers (each takes that share of it).
PARTITIONS = {"whole": 1, "half": 2, "quarter": 4}


class NpuConfig(pydantic.BaseModel):
    """Opaque parameters a claim may give: the clock of its partitions."""

    model_config = pydantic.ConfigDict(extra="forbid")
    clock: Literal["base", "boost"] = "base"


def npu_counters(share: int) -> dict[str, Counter]:
    """What ``1/share`` of an NPU is: its memory and its cores."""
    return {
        "memory": Counter(Quantity.parse(f"{MEMORY_GI // share}Gi")),
        "cores": Counter(Quantity(CORES // share)),
    }


def partition(npu: int, kind: str, index: int) -> Device:
    """One offer of NPU ``npu``, drawing on the NPU's counter set."""
    return Device(
        name=f"npu-{npu}" if kind == "whole" else f"npu-{npu}-{kind}-{index}",
        attributes={"npu": DeviceAttribute.of(npu), "partition": DeviceAttribute.of(kind)},
        consumes_counters=(
            DeviceCounterConsumption(
                counter_set=f"npu-{npu}", counters=npu_counters(PARTITIONS[kind])
            ),
        ),
    )


def env_name(text: str) -> str:
    """``npu-0-half-1`` -> ``NPU_0_HALF_1``: a name an environment variable may carry."""
    return re.sub(r"[^A-Z0-9]", "_", text.upper())


class NpuBackend(BackendBase[NpuConfig]):
    name: ClassVar[str] = "npu"
    config_model: ClassVar[type[pydantic.BaseModel]] = NpuConfig

    def discover(self) -> tuple[PoolDescription, ...]:
        # One counter set per NPU: the scheduler allocates its partitions only while the
        # counters last, so a half and two quarters go out together, a whole and a half never.
        npus = tuple(CounterSet(name=f"npu-{n}", counters=npu_counters(1)) for n in range(NPUS))
        devices = tuple(
            partition(npu, kind, index)
            for npu in range(NPUS)
            for kind, count in PARTITIONS.items()
            for index in range(count)
        )
        return (PoolDescription(self.context.node_name, devices, shared_counters=npus),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits, status = [], []
        for device in claim.devices:
            if not device.device.startswith("npu-"):
                raise BackendError(f"{device.device} is not an NPU partition of this node")
            config = self.config_of(device) or NpuConfig()
            context.log.info("Setting the clock", device=device.device, clock=config.clock)
            # Per device, named after it: no two claims ever hold the same partition.
            edits.append(ContainerEdits(env=(f"{env_name(device.device)}_CLOCK={config.clock}",)))
            status.append(
                DeviceStatus(
                    data={"clock": config.clock},
                    conditions=({"type": "Ready", "status": "True", "reason": "Clocked"},),
                )
            )
        # Once per claim, however many of its partitions a container uses; named after the
        # claim, so that two claims in one container each keep their own list.
        visible = ",".join(d.device for d in claim.devices)
        claim_env = f"NPU_VISIBLE_DEVICES_{env_name(claim.name)}={visible}"
        return BackendPrepared(
            tuple(edits),
            state={"devices": [d.device for d in claim.devices]},
            device_status=tuple(status),
            claim_edits=ContainerEdits(env=(claim_env,)),
        )

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        # Also after a restart, from ``state`` alone; a claim never prepared is fine.
        context.log.info("Clock back to base", devices=state.get("devices", []))
