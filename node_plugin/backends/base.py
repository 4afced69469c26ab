"""The small interface between the node plugin's core and a device backend.

A backend knows the hardware; the core knows Kubernetes. The core reads
claims, resolves and validates opaque config, guards against double use, keeps
the checkpoint and writes CDI specs; the backend only

* describes the node's devices as allocator model objects (``discover``),
  grouped into pools (:class:`PoolDescription`), and says when that
  description or device health would change (``subscribe``);
* reports device health (``health``);
* prepares the devices of one claim and returns the CDI container edits each
  device needs (``prepare``), and undoes that (``unprepare``); both get the
  kubelet call they run for as a :class:`RequestContext` (request id, a logger
  bound to the call and the claim, the caller's deadline).

A driver author adds a backend without touching the core: implement
:class:`Backend` in any importable module and start the plugin with
``--backend mypkg.mod:MyBackend``. The class is constructed with one
:class:`BackendContext` argument.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from drakit.allocator.model import CounterSet, Device, DeviceAttribute
from drakit.allocator.quantity import Quantity
from drakit.node_plugin.driver import ClaimRef, DeviceHealth
from drakit.telemetry.logs import StructuredLogger, get_logger
from drakit.telemetry.metrics import Registry

if TYPE_CHECKING:
    # pydantic is imported only when a config model is used (about 8 MiB of RSS):
    # the node plugin's core and the built-in backends start without it.
    import pydantic

else:

    def __getattr__(name: str) -> Any:
        """``EmptyConfig`` is imported on first use (it is a pydantic model)."""
        if name == "EmptyConfig":
            from drakit.node_plugin.backends.models import EmptyConfig  # noqa: PLC0415

            return EmptyConfig
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BackendError(Exception):
    """A backend could not prepare or unprepare; the message names device and reason.

    The core turns it into a per-claim error (and an Event on the claim).
    """


class BackendConfigError(Exception):
    """The backend's own configuration (``--backend-config``) is unusable.

    The message must name the file, the field and the reason; the plugin
    prints it and exits non-zero.
    """


@dataclass(frozen=True)
class BackendContext:
    """What a backend is constructed with.

    ``config`` is the parsed ``--backend-config`` document (YAML or JSON; an
    empty mapping when the flag is absent); the backend validates it itself,
    typically with a pydantic model, and raises :class:`BackendConfigError`.
    """

    driver_name: str
    node_name: str
    config: Mapping[str, Any] = field(default_factory=dict)
    config_path: Path | None = None


@dataclass(frozen=True)
class PoolDescription:
    """One pool of devices as the backend sees it now (the publisher owns slicing).

    ``name`` is the pool name; backends use the node name for node-local pools.
    """

    name: str
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...] = ()


class LazyConfigModel:
    """A ``config_model`` class attribute whose pydantic model is imported on first use.

    ``config_model = LazyConfigModel("mypkg.config:MyConfig")``: reading
    ``Backend.config_model`` (or ``backend.config_model``) imports ``mypkg.config`` and
    returns ``MyConfig``. The core reads it only for a claim that carries opaque config
    for the driver, so a plugin whose claims carry none never loads pydantic.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._model: type[pydantic.BaseModel] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> type[pydantic.BaseModel]:
        if self._model is None:
            module, _, attr = self.target.partition(":")
            self._model = getattr(importlib.import_module(module), attr)
        return self._model


@dataclass(frozen=True)
class DeviceToPrepare:
    """One allocated device of a claim, for this driver.

    ``request`` is the full request name (``req`` or ``req/subrequest``).
    ``config`` is the resolved opaque config for that request, already
    validated against the backend's ``config_model`` (None: no config given).
    ``share_id`` and ``consumed_capacity`` are set for consumable-capacity
    allocations (devices with ``allowMultipleAllocations``).
    """

    request: str
    pool: str
    device: str
    config: pydantic.BaseModel | None = None
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)
    admin_access: bool = False


@dataclass(frozen=True)
class ClaimToPrepare:
    """A claim's devices of this driver, in allocation-result order."""

    uid: str
    namespace: str
    name: str
    devices: tuple[DeviceToPrepare, ...]

    @property
    def ref(self) -> ClaimRef:
        """The claim's reference: what ``unprepare`` gets for it later."""
        return ClaimRef(namespace=self.namespace, uid=self.uid, name=self.name)


@dataclass(frozen=True)
class RequestContext:
    """The kubelet call a ``prepare`` or ``unprepare`` runs for.

    ``request_id`` is in every log line of the call (the plugin's and, through ``log``,
    the backend's). ``log`` is bound to the request id and the claim
    (``claim="<namespace>/<name>"``, ``claim_uid``): ``context.log.info("Flashed", slot=3)``.
    ``deadline`` is the :func:`time.monotonic` time at which the kubelet stops waiting
    (its gRPC deadline, 45 s after the call began); None when the caller set none. Work
    that outlives it is wasted: the kubelet has given up and will call again.

    A backend's own tests make one with ``RequestContext("test-1")`` (an unbound logger,
    no deadline).
    """

    request_id: str
    log: StructuredLogger = field(default_factory=lambda: get_logger("drakit.backend"))
    deadline: float | None = None

    def time_left(self) -> float | None:
        """Seconds until the deadline (0 once it has passed); None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        """True once the deadline has passed (never without one)."""
        left = self.time_left()
        return left is not None and left <= 0


@dataclass(frozen=True)
class DeviceNodeEdit:
    """A CDI ``deviceNodes`` entry: ``path`` in the container, ``host_path`` on the host."""

    path: str
    host_path: str | None = None
    type: str | None = None
    major: int | None = None
    minor: int | None = None
    permissions: str | None = None


@dataclass(frozen=True)
class MountEdit:
    """A CDI ``mounts`` entry."""

    host_path: str
    container_path: str
    options: tuple[str, ...] = ()
    type: str | None = None


@dataclass(frozen=True)
class ContainerEdits:
    """CDI container edits for one device (``env`` entries are ``NAME=value``)."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNodeEdit, ...] = ()
    mounts: tuple[MountEdit, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.env or self.device_nodes or self.mounts)


@dataclass(frozen=True)
class NetworkData:
    """A device's network identity: ``status.devices[].networkData`` of the claim.

    ``ips`` are CIDRs (``"10.9.8.0/24"``, ``"2001:db8::1/64"``); ``hardware_address`` is the
    MAC address. The apiserver limits ``interface_name`` to 256 and ``hardware_address`` to
    128 characters and ``ips`` to 16 entries.
    """

    interface_name: str = ""
    ips: tuple[str, ...] = ()
    hardware_address: str = ""


@dataclass(frozen=True)
class DeviceStatus:
    """What the driver reports about one prepared device in the claim's ``status.devices``.

    ``data`` is any JSON object (at most 10 KiB serialized, the apiserver's limit);
    ``conditions`` are ``metav1.Condition`` dicts (``type``, ``status``, ``reason``,
    ``message``; the kit fills ``lastTransitionTime`` and ``observedGeneration`` is left
    out unless given). The kit adds ``driver``, ``pool``, ``device`` and ``shareID``.
    """

    data: Mapping[str, Any] | None = None
    network_data: NetworkData | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class DeviceMetadata:
    """What a backend tells the containers about one prepared device (KEP-5304).

    The plugin writes it into the request's metadata file, which every container using
    the claim reads at
    ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json``
    (``resourceclaimtemplates/<pod's claim name>/...`` for claims made from a template).
    ``attributes`` (at most 32; names and values as in a ResourceSlice, e.g.
    ``{"model": DeviceAttribute.of("a100")}``) and ``network_data`` are the device's entry.
    """

    attributes: Mapping[str, DeviceAttribute] = field(default_factory=dict)
    network_data: NetworkData | None = None


@dataclass(frozen=True)
class BackendPrepared:
    """What ``prepare`` returns.

    ``device_edits`` has one entry per ``ClaimToPrepare.devices`` entry, in
    the same order. ``state`` is JSON-serializable data the core keeps in its
    checkpoint and hands back to ``unprepare`` (also after a restart).
    ``device_status`` is empty (report nothing) or, like ``device_edits``, one entry per
    device (None: nothing for that device); the plugin writes the entries into the claim's
    ``status.devices`` after a successful prepare and removes them on unprepare.
    ``device_metadata`` is empty (no metadata files: the default) or one entry per device
    (None: the device is listed with driver, pool and name only); the plugin then mounts
    one metadata file per request into the claim's containers (:class:`DeviceMetadata`).
    """

    device_edits: tuple[ContainerEdits, ...]
    state: Mapping[str, Any] = field(default_factory=dict)
    device_status: tuple[DeviceStatus | None, ...] = ()
    device_metadata: tuple[DeviceMetadata | None, ...] = ()


@runtime_checkable
class Backend(Protocol):
    """A device backend. Implementations must be thread-safe for ``health``/``discover``.

    ``prepare`` and ``unprepare`` are called with the plugin's serialize lock
    held (never concurrently with each other), must be idempotent, and
    ``unprepare`` must succeed for a claim it does not know. Both should finish
    before ``context.deadline``.
    """

    name: ClassVar[str]
    config_model: ClassVar[type[pydantic.BaseModel]]

    def discover(self) -> tuple[PoolDescription, ...]:
        """Describe the node's devices now; pure (no side effects), cheap enough to call often."""
        ...

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` (from any thread) whenever ``discover`` or ``health`` would change.

        May be called more than once (the core and the ResourceSlice publisher
        both subscribe); every callback is called on every change.
        """
        ...

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        """Make the claim's devices usable; raise :class:`BackendError` on failure."""
        ...

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        """Undo ``prepare`` for ``claim``; ``state`` is what ``prepare`` returned.

        ``claim.uid`` is the key. ``claim.namespace``/``claim.name`` are those recorded
        when the claim was prepared (what the kubelet's call names, where the checkpoint
        recorded none). Only claims this plugin recorded come here: a claim the kubelet
        unprepares that was never prepared on this node is answered without the backend.
        The claim may be gone from the API by now: do not fetch it.
        """
        ...

    def close(self) -> None:
        """Stop background work (watchers, pollers); idempotent."""
        ...


@runtime_checkable
class HealthReporter(Protocol):
    """A backend that reports device health implements this as well as :class:`Backend`.

    Then the plugin advertises the kubelet's health services, streams changes (announced
    through ``subscribe``) and taints devices reported Unhealthy in its ResourceSlices.
    A backend without ``health`` simply reports none.
    """

    def health(self) -> Sequence[DeviceHealth]:
        """Health of every device the backend reports on; thread-safe."""
        ...


def health_report(backend: object) -> Callable[[], Sequence[DeviceHealth]] | None:
    """``backend.health`` when it reports health (:class:`HealthReporter`), else None."""
    return backend.health if isinstance(backend, HealthReporter) else None


@runtime_checkable
class MetricsReporter(Protocol):
    """A backend with metrics of its own implements this as well as :class:`Backend`.

    ``metrics`` is a :class:`~drakit.telemetry.metrics.Registry` holding them (counters,
    gauges and histograms of ``drakit.plugin``); the plugin serves them on its ``/metrics``
    endpoint (``--metrics-address``) next to its own, so their names must not start with
    ``drakit_``. ``claim_finished`` is called once for every claim of every
    NodePrepareResources and NodeUnprepareResources call, once the claim's outcome is known:
    ``operation`` is ``prepare`` or ``unprepare``, ``error`` the claim's error (``""`` on
    success, including a claim prepared already), ``seconds`` the time the plugin spent on
    the call (the claims of one call are prepared together: one read of the claims, one
    lock, one checkpoint save per phase). It runs on the call's thread before the reply: it
    must be quick, and an exception it raises is logged and ignored.
    """

    metrics: Registry

    def claim_finished(self, operation: str, error: str, seconds: float) -> None:
        """Record one claim's outcome."""
        ...


def metrics_reporter(backend: object) -> MetricsReporter | None:
    """The backend when it reports metrics of its own (:class:`MetricsReporter`), else None."""
    return backend if isinstance(backend, MetricsReporter) else None


class ChangeListeners:
    """The callbacks a backend's ``subscribe`` was given: told of every change until the
    backend closes. Thread-safe; ``notify`` calls them on its caller's thread, outside the
    lock (a callback may call back into the backend)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def add(self, on_change: Callable[[], None]) -> None:
        with self._lock:
            self._callbacks.append(on_change)

    def notify(self) -> None:
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def clear(self) -> None:
        with self._lock:
            self._callbacks.clear()


ConfigT = TypeVar("ConfigT", bound="pydantic.BaseModel")


class BackendBase(Generic[ConfigT]):
    """A starting point for a :class:`Backend`: set ``name`` and ``config_model``, implement
    ``discover``, ``prepare`` and ``unprepare``.

    ``subscribe`` and ``close`` are no-ops (devices that never change, no background
    work); override them when that is not so. Add ``health`` to report device health
    (:class:`HealthReporter`). Generic over the opaque-config model, so ``config_of``
    hands ``prepare`` the device's validated config with its real type.
    """

    name: ClassVar[str]
    #: :class:`EmptyConfig` (no opaque parameters accepted), imported when first read.
    config_model: ClassVar[type[pydantic.BaseModel]] = LazyConfigModel(  # type: ignore[assignment]
        "drakit.node_plugin.backends.models:EmptyConfig"
    )

    def __init__(self, context: BackendContext) -> None:
        self.context = context

    def subscribe(self, on_change: Callable[[], None]) -> None:
        """No-op: the devices never change."""

    def close(self) -> None:
        """No-op: no background work to stop."""

    def config_of(self, device: DeviceToPrepare) -> ConfigT | None:
        """The device's opaque config as ``config_model`` (None: no config was given).

        Merged before this: the ``parameters`` objects of every opaque config entry for
        this driver that applies to the request, in the order of the claim's
        ``status.allocation.devices.config`` (the class's entries first, then the
        claim's), top-level keys of a later entry replacing those of an earlier one.
        """
        config = device.config
        if config is not None and not isinstance(config, self.config_model):
            raise BackendError(f"device {device.device}: config is not {self.config_model}")
        return config  # type: ignore[return-value]
