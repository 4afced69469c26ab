"""The example driver's backend: ``drakit node-plugin --backend
example_driver.driver:ExampleDriver --backend-config FILE``.

One class for the three profiles of upstream dra-example-driver (gpu, cpu, net), chosen by
the backend config (:class:`example_driver.settings.DriverSettings`). Prepare hands each
container environment variables only (the devices are simulated), exactly as upstream's
kubelet plugin does, so that upstream's e2e suite reads the same ``export`` output:

* per device: the profile's variables (GPU_DEVICE_<id>=gpu-<id>, sharing settings,
  consumed capacity; CPU_DEVICE_*; NET_DEVICE_*), ``<CLASS>_DEVICE_<NAME>_RESOURCE_CLAIM``
  with the claim UID and ``DRA_ADMIN_ACCESS`` (true when any device of the claim was
  allocated with admin access);
* for every device: ``KUBERNETES_NODE_NAME`` and ``DRA_RESOURCE_DRIVER_NAME``.

Opaque config is :class:`example_driver.api.OpaqueConfig` (GpuConfig or NetConfig),
loaded only when a claim carries some.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from drakit.plugin import (
    BackendBase,
    BackendContext,
    BackendError,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    DeviceToPrepare,
    LazyConfigModel,
    PoolDescription,
    RequestContext,
    validate_settings,
)
from drakit.plugin.metrics import Registry
from example_driver.metrics import DriverMetrics
from example_driver.profiles import Profile, env_key
from example_driver.profiles.cpu import CpuProfile
from example_driver.profiles.gpu import GpuProfile
from example_driver.profiles.net import NetProfile
from example_driver.settings import DriverSettings

if TYPE_CHECKING:
    import pydantic

    from example_driver.api import OpaqueConfig  # noqa: F401 (the generic argument below)


def make_profile(settings: DriverSettings, driver_name: str, node_name: str) -> Profile:
    """The device profile the settings ask for."""
    if settings.profile == "cpu":
        return CpuProfile(node_name, driver_name, settings.numa_nodes, settings.cpus_per_numa_node)
    if settings.profile == "net":
        return NetProfile(node_name, settings.num_devices)
    return GpuProfile(
        node_name,
        settings.num_devices,
        settings.gpu_partitions,
        device_status=settings.device_status,
        binding_conditions=settings.binding_conditions,
        allow_multiple_allocations=settings.allow_multiple_allocations,
    )


class ExampleDriver(BackendBase["OpaqueConfig"]):
    """Simulated GPUs, NUMA nodes or NICs; stateless, so thread-safe. Upstream's driver
    metrics (:mod:`example_driver.metrics`) are served on the plugin's endpoint
    (drakit.plugin.MetricsReporter)."""

    name: ClassVar[str] = "example-driver"
    config_model: ClassVar[type[pydantic.BaseModel]] = LazyConfigModel(  # type: ignore[assignment]
        "example_driver.api:OpaqueConfig"
    )

    def __init__(self, context: BackendContext) -> None:
        super().__init__(context)
        self.settings = validate_settings(DriverSettings, context, self.name)
        self.profile = make_profile(self.settings, context.driver_name, context.node_name)
        self._devices = {d.name for d in self.profile.describe().devices}
        self._metrics = DriverMetrics()
        self.metrics: Registry = self._metrics.registry

    def claim_finished(self, operation: str, error: str, seconds: float) -> None:
        """Counted in upstream's prepare/unprepare claim metrics."""
        self._metrics.observe(operation, error, seconds)

    def discover(self) -> tuple[PoolDescription, ...]:
        return (self.profile.describe(),)

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        admin = any(d.admin_access for d in claim.devices)
        edits = tuple(
            ContainerEdits(env=tuple(self._env(claim.uid, d, admin))) for d in claim.devices
        )
        status = tuple(self.profile.device_status(d) for d in claim.devices)
        devices = [d.device for d in claim.devices]
        context.log.debug("Simulated devices ready", devices=devices)
        return BackendPrepared(
            device_edits=edits,
            state={"devices": devices},
            device_status=status if any(s is not None for s in status) else (),
        )

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        """Nothing to undo: prepare changed nothing on the node."""
        context.log.debug("Simulated devices released", devices=state.get("devices", []))

    def _env(self, claim_uid: str, device: DeviceToPrepare, admin: bool) -> list[str]:
        if device.device not in self._devices:
            raise BackendError(f"requested device is not allocatable: {device.device}")
        config = self._config(device)
        try:
            env = self.profile.device_env(device, config)
        except ValueError as exc:
            raise BackendError(
                f"device {device.device} (request {device.request}): error applying config: {exc}"
            ) from exc
        cls = self.profile.cdi_class.upper()
        return [
            *env,
            f"{cls}_DEVICE_{env_key(device.device)}_RESOURCE_CLAIM={claim_uid}",
            f"DRA_ADMIN_ACCESS={'true' if admin else 'false'}",
            f"KUBERNETES_NODE_NAME={self.context.node_name}",
            f"DRA_RESOURCE_DRIVER_NAME={self.context.driver_name}",
        ]

    def _config(self, device: DeviceToPrepare) -> Any:
        """The device's GpuConfig/NetConfig (None: none given); the wrong kind is an error."""
        wrapped = self.config_of(device)
        if wrapped is None:
            return None
        config = wrapped.root
        if config.kind != self.profile.config_kind:
            expected = self.profile.config_kind or "no configuration"
            raise BackendError(
                f"device {device.device} (request {device.request}): opaque config of kind "
                f"{config.kind} is not accepted by the {self.settings.profile} profile "
                f"(expected {expected})"
            )
        return config
