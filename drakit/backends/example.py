"""The ``example`` backend: simulated GPUs, for demos, tests and benchmarks.

Devices are described from ``--backend-config`` (YAML or JSON; every field
optional)::

    gpus: 8                  # plain GPUs gpu-0 .. gpu-7
    model: LATEST-GPU-MODEL
    memory: 80Gi
    pool: node-a             # pool name; default: the node name
    partitionable:           # GPUs with shared counters and partitions consuming them
      gpus: 1                #   pgpu-0: the whole GPU; pgpu-0-part-0..N-1: slices of it
      memory: 40Gi
      partitions: 4
    consumable:              # devices many claims may share, by capacity
      devices: 1             #   shared-gpu-0 with allowMultipleAllocations
      memory: 80Gi
      default: 10Gi          #   requestPolicy: default and valid range step
      step: 1Gi
    taints:                  # device taints
      - {device: gpu-1, key: example.com/broken, value: "true", effect: NoSchedule}
    bindingConditions:       # devices with binding conditions
      - {device: gpu-2, conditions: [Attached], failureConditions: [AttachFailed]}
    perDeviceNodeSelection: false   # each device carries nodeName itself
    unhealthy: [gpu-3]       # devices reported Unhealthy
    deviceMetadata: true     # containers read each device's attributes (KEP-5304)

UUIDs derive from the node and device names, so they survive restarts.
Prepare hands each device's identity and sharing settings to the container
as environment variables (``GPU_0=<uuid>``, ``GPU_0_RESOURCE_CLAIM``,
``GPU_0_SHARING_STRATEGY`` ...); opaque config is :class:`GpuConfig`. With
``deviceMetadata`` it also fills the device metadata (the device's published
attributes), which the plugin mounts into the containers as a file per request.

Neither model loads pydantic at start: plainly valid settings are checked without it
(:data:`SETTINGS`), and :class:`GpuConfig` is imported when a claim carries opaque config.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from drakit.plugin import (
    BackendConfigError,
    BackendContext,
    BackendPrepared,
    ChangeListeners,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    CounterSet,
    Device,
    DeviceHealth,
    DeviceMetadata,
    DeviceToPrepare,
    HealthStatus,
    LazyConfigModel,
    PoolDescription,
    Quantity,
    RequestContext,
)
from drakit.plugin import plainconfig as plain

if TYPE_CHECKING:
    import pydantic

else:
    _MODELS = frozenset(
        {
            "BindingConditionOption",
            "ConsumableOptions",
            "ExampleSettings",
            "GpuConfig",
            "PartitionableOptions",
            "Sharing",
            "SpacePartitioningConfig",
            "TaintOption",
            "TimeSlicingConfig",
        }
    )

    def __getattr__(name: str) -> Any:
        """The pydantic models, imported on first use (see ``example_models``)."""
        if name in _MODELS:
            from drakit.backends import example_models  # noqa: PLC0415

            return getattr(example_models, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_UUID_NAMESPACE = uuid.UUID("6b0d1c52-6a43-4f0e-9d53-2f7b5e0cf0a1")
DRIVER_VERSION = "1.0.0"


@dataclass(frozen=True)
class PartitionableSettings:
    gpus: int
    memory: str
    partitions: int


@dataclass(frozen=True)
class ConsumableSettings:
    devices: int
    memory: str
    default: str
    step: str


@dataclass(frozen=True)
class TaintSettings:
    device: str
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class BindingSettings:
    device: str
    conditions: tuple[str, ...]
    failure_conditions: tuple[str, ...]


@dataclass(frozen=True)
class Settings:
    """The example backend's ``--backend-config``, validated (see ``ExampleSettings``)."""

    gpus: int
    model: str
    memory: str
    pool: str | None
    partitionable: PartitionableSettings | None
    consumable: ConsumableSettings | None
    taints: tuple[TaintSettings, ...]
    binding_conditions: tuple[BindingSettings, ...]
    per_device_node_selection: bool
    unhealthy: tuple[str, ...]
    device_metadata: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        """From validated settings in the shape of ``ExampleSettings.model_dump()``."""
        partitionable, consumable = data["partitionable"], data["consumable"]
        return cls(
            gpus=data["gpus"],
            model=data["model"],
            memory=data["memory"],
            pool=data["pool"],
            partitionable=PartitionableSettings(**partitionable) if partitionable else None,
            consumable=ConsumableSettings(**consumable) if consumable else None,
            taints=tuple(TaintSettings(**t) for t in data["taints"]),
            binding_conditions=tuple(
                BindingSettings(b["device"], tuple(b["conditions"]), tuple(b["failure_conditions"]))
                for b in data["binding_conditions"]
            ),
            per_device_node_selection=data["per_device_node_selection"],
            unhealthy=tuple(data["unhealthy"]),
            device_metadata=data["device_metadata"],
        )


#: ``ExampleSettings`` (drakit.backends.example_models) as a plain check: what it
#: accepts without coercion. Keep the two in step (a test compares them).
SETTINGS = plain.obj(
    plain.Field("gpus", plain.integer(0, 128), 8),
    plain.Field("model", plain.text, "LATEST-GPU-MODEL"),
    plain.Field("memory", plain.quantity, "80Gi"),
    plain.Field("pool", plain.optional(plain.text), None),
    plain.Field(
        "partitionable",
        plain.optional(
            plain.obj(
                plain.Field("gpus", plain.integer(0, 32), 1),
                plain.Field("memory", plain.quantity, "40Gi"),
                plain.Field("partitions", plain.integer(1, 16), 2),
            )
        ),
        None,
    ),
    plain.Field(
        "consumable",
        plain.optional(
            plain.obj(
                plain.Field("devices", plain.integer(0, 32), 1),
                plain.Field("memory", plain.quantity, "80Gi"),
                plain.Field("default", plain.quantity, "10Gi"),
                plain.Field("step", plain.quantity, "1Gi"),
            )
        ),
        None,
    ),
    plain.Field(
        "taints",
        plain.list_of(
            plain.obj(
                plain.Field("device", plain.text),
                plain.Field("key", plain.text),
                plain.Field("value", plain.text, ""),
                plain.Field(
                    "effect", plain.one_of("NoSchedule", "NoExecute", "None"), "NoSchedule"
                ),
            )
        ),
        [],
    ),
    plain.Field(
        "binding_conditions",
        plain.list_of(
            plain.obj(
                plain.Field("device", plain.text),
                plain.Field("conditions", plain.list_of(plain.text, min_length=1)),
                plain.Field(
                    "failure_conditions", plain.list_of(plain.text), [], alias="failureConditions"
                ),
            )
        ),
        [],
        alias="bindingConditions",
    ),
    plain.Field("per_device_node_selection", plain.boolean, False, alias="perDeviceNodeSelection"),
    plain.Field("unhealthy", plain.list_of(plain.text), []),
    plain.Field("device_metadata", plain.boolean, False, alias="deviceMetadata"),
)


def env_prefix(device_name: str) -> str:
    """``gpu-0`` -> ``GPU_0``: the environment-variable prefix of a device."""
    return re.sub(r"[^A-Za-z0-9]", "_", device_name).upper()


class ExampleBackend:
    """Simulated GPUs; thread-safe."""

    name: ClassVar[str] = "example"
    config_model: ClassVar[type[pydantic.BaseModel]] = LazyConfigModel(  # type: ignore[assignment]
        "drakit.backends.example_models:GpuConfig"
    )

    def __init__(self, context: BackendContext) -> None:
        settings = Settings.from_dict(
            plain.settings(
                SETTINGS,
                "drakit.backends.example_models:ExampleSettings",
                context,
                self.name,
            )
        )
        self.settings = settings
        self.node_name = context.node_name
        self.pool_name = settings.pool or context.node_name
        self._uuids: dict[str, str] = {}  # device name -> UUID (thread-safe: same value)
        self._lock = threading.Lock()
        self._listeners = ChangeListeners()
        self._health = dict.fromkeys(settings.unhealthy, HealthStatus.UNHEALTHY)
        self._health_reasons: dict[str, str] = {}
        self._updated = int(time.time())
        self._description = self._describe()
        known = {d.name for d in self._description.devices}
        named = (
            {t.device for t in settings.taints}
            | {b.device for b in settings.binding_conditions}
            | set(settings.unhealthy)
        )
        unknown = sorted(named - known)
        if unknown:
            raise BackendConfigError(
                f"backend config names devices that do not exist: {', '.join(unknown)} "
                f"(devices: {', '.join(sorted(known))})"
            )

    # -- description ---------------------------------------------------------------------

    def device_uuid(self, device_name: str) -> str:
        """The device's stable UUID (a name-based UUID: the same on every call, so kept)."""
        known = self._uuids.get(device_name)
        if known is None:
            known = f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self.node_name}/{device_name}')}"
            self._uuids[device_name] = known
        return known

    def _attributes(self, name: str, index: int, model: str) -> dict[str, Any]:
        return {
            "index": {"int": index},
            "uuid": {"string": self.device_uuid(name)},
            "model": {"string": model},
            "driverVersion": {"version": DRIVER_VERSION},
        }

    def _device(self, name: str, index: int, **fields: Any) -> dict[str, Any]:
        s = self.settings
        device: dict[str, Any] = {
            "name": name,
            "attributes": self._attributes(name, index, s.model),
            "capacity": {"memory": {"value": s.memory}},
        }
        device.update(fields)
        taints = [t for t in s.taints if t.device == name]
        if taints:
            device["taints"] = [
                {"key": t.key, "value": t.value, "effect": t.effect} for t in taints
            ]
        for b in s.binding_conditions:
            if b.device == name:
                device["bindingConditions"] = list(b.conditions)
                device["bindingFailureConditions"] = list(b.failure_conditions) or ["Failed"]
                device["bindsToNode"] = True
        if s.per_device_node_selection:
            device["nodeName"] = self.node_name
        return device

    def _describe(self) -> PoolDescription:
        s = self.settings
        devices = [self._device(f"gpu-{i}", i) for i in range(s.gpus)]
        counter_sets: list[dict[str, Any]] = []
        if s.partitionable:
            devices += self._partitionable(s.partitionable, counter_sets)
        if s.consumable:
            c = s.consumable
            for i in range(c.devices):
                devices.append(
                    self._device(
                        f"shared-gpu-{i}",
                        i,
                        allowMultipleAllocations=True,
                        capacity={
                            "memory": {
                                "value": c.memory,
                                "requestPolicy": {
                                    "default": c.default,
                                    "validRange": {"min": c.step, "max": c.memory, "step": c.step},
                                },
                            }
                        },
                    )
                )
        return PoolDescription(
            name=self.pool_name,
            devices=tuple(Device.from_dict(d) for d in devices),
            shared_counters=tuple(CounterSet.from_dict(c) for c in counter_sets),
        )

    def _partitionable(
        self, p: PartitionableSettings, counter_sets: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        total = Quantity.parse(p.memory)
        part_text = str(Quantity(int(total.value) // p.partitions))
        devices = []
        for g in range(p.gpus):
            counter_set = f"pgpu-{g}-counters"
            counter_sets.append({"name": counter_set, "counters": {"memory": {"value": p.memory}}})
            consumes = [{"counterSet": counter_set, "counters": {"memory": {"value": p.memory}}}]
            devices.append(
                self._device(
                    f"pgpu-{g}",
                    g,
                    capacity={"memory": {"value": p.memory}},
                    consumesCounters=consumes,
                )
            )
            for j in range(p.partitions):
                consumes = [
                    {"counterSet": counter_set, "counters": {"memory": {"value": part_text}}}
                ]
                devices.append(
                    self._device(
                        f"pgpu-{g}-part-{j}",
                        j,
                        capacity={"memory": {"value": part_text}},
                        consumesCounters=consumes,
                    )
                )
        return devices

    def discover(self) -> tuple[PoolDescription, ...]:
        return (self._description,)

    def subscribe(self, on_change: Callable[[], None]) -> None:
        self._listeners.add(on_change)

    # -- health --------------------------------------------------------------------------

    def health(self) -> Sequence[DeviceHealth]:
        with self._lock:
            health = dict(self._health)
            reasons = dict(self._health_reasons)
            updated = self._updated
        return [
            DeviceHealth(
                pool_name=self.pool_name,
                device_name=d.name,
                health=health.get(d.name, HealthStatus.HEALTHY),
                last_updated=updated,
                reason=reasons.get(d.name, ""),
            )
            for d in self._description.devices
        ]

    def set_health(self, device_name: str, status: HealthStatus, reason: str = "") -> None:
        """Simulate a health change (tests, demos), with the reason the health policy maps to
        a taint effect; listeners are told."""
        with self._lock:
            self._health[device_name] = status
            self._health_reasons[device_name] = reason
            self._updated = int(time.time())
        self._listeners.notify()

    # -- prepare -------------------------------------------------------------------------

    def _env(self, claim_uid: str, device: DeviceToPrepare) -> tuple[str, ...]:
        prefix = env_prefix(device.device)
        env = [
            f"{prefix}={self.device_uuid(device.device)}",
            f"{prefix}_RESOURCE_CLAIM={claim_uid}",
            f"{prefix}_REQUEST={device.request}",
        ]
        if device.share_id:
            env.append(f"{prefix}_SHARE_ID={device.share_id}")
        for name, amount in sorted(device.consumed_capacity.items()):
            env.append(f"{prefix}_{env_prefix(name)}={amount}")
        if device.config is not None:
            env.extend(self._sharing_env(prefix, device.config))
        return tuple(env)

    @staticmethod
    def _sharing_env(prefix: str, config: pydantic.BaseModel) -> list[str]:
        """The sharing variables of a device's opaque config (the model is loaded by now:
        the config was validated with it)."""
        from drakit.backends import example_models as m  # noqa: PLC0415

        if not isinstance(config, m.GpuConfig) or config.sharing is None:
            return []
        sharing = config.sharing
        env = [f"{prefix}_SHARING_STRATEGY={sharing.strategy}"]
        if sharing.strategy == "TimeSlicing":
            interval = (sharing.time_slicing_config or m.TimeSlicingConfig()).interval
            env.append(f"{prefix}_TIMESLICE_INTERVAL={interval}")
        else:
            count = sharing.space_partitioning_config or m.SpacePartitioningConfig.model_validate(
                {}
            )
            env.append(f"{prefix}_PARTITION_COUNT={count.partition_count}")
        return env

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        edits = tuple(ContainerEdits(env=self._env(claim.uid, d)) for d in claim.devices)
        devices = [d.device for d in claim.devices]
        context.log.debug("Simulated GPUs ready", devices=devices)
        return BackendPrepared(
            device_edits=edits, state={"devices": devices}, device_metadata=self._metadata(claim)
        )

    def _metadata(self, claim: ClaimToPrepare) -> tuple[DeviceMetadata | None, ...]:
        """Each device's published attributes, for the containers (with ``deviceMetadata``)."""
        if not self.settings.device_metadata:
            return ()
        published = {d.name: d for d in self._description.devices}
        return tuple(
            DeviceMetadata(attributes=dict(published[d.device].attributes))
            if d.device in published
            else None
            for d in claim.devices
        )

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        context.log.debug("Simulated GPUs released", devices=state.get("devices", []))

    def close(self) -> None:
        self._listeners.clear()
