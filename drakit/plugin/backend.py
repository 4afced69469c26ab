"""The interface between the node plugin and a device backend.

A backend knows the hardware; the plugin knows Kubernetes. The plugin reads
claims, resolves and validates opaque config, guards against double use, keeps
the checkpoint and writes CDI specs; the backend only

* describes the node's devices as :class:`~drakit.plugin.Device` objects,
  grouped into pools (:class:`PoolDescription`), and says when that
  description or device health would change (``subscribe``);
* reports device health (``health``, :class:`~drakit.plugin.HealthReporter`);
* prepares the devices of one claim and returns the CDI container edits each
  device needs (``prepare``), and undoes that (``unprepare``); both get the
  kubelet call they run for as a :class:`~drakit.plugin.RequestContext` (request id, a
  logger bound to the call and the claim, the caller's deadline).

A driver author adds a backend without touching the plugin: implement :class:`Backend` in
any importable module and run it with ``drakit node-plugin --backend mypkg.mod:MyBackend``
(the class is constructed with one :class:`~drakit.plugin.BackendContext` argument), or from
the driver's own program with :class:`~drakit.plugin.KubeletPlugin`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from drakit.allocator.model import CounterSet, Device
from drakit.plugin.claims import ClaimRef, ClaimToPrepare, DeviceToPrepare
from drakit.plugin.context import BackendContext, RequestContext
from drakit.plugin.errors import BackendError
from drakit.plugin.prepared import BackendPrepared

if TYPE_CHECKING:
    # pydantic is imported only when a config model is used (about 8 MiB of RSS):
    # the node plugin's core and the built-in backends start without it.
    import pydantic


@dataclass(frozen=True)
class PoolDescription:
    """One pool of devices as the backend sees it now (the publisher owns slicing).

    ``name`` is the pool name; backends use the node name for node-local pools.
    ``shared_counters`` are the pool's counter sets (partitionable devices): each
    :class:`~drakit.plugin.CounterSet` names :class:`~drakit.plugin.Counter` values, and a
    device draws on them through its ``consumes_counters``
    (:class:`~drakit.plugin.DeviceCounterConsumption`).

    ``needs_node_preparation`` False: the pool's devices need nothing done on the node for a
    claim (no CDI edits, no setup, nothing to undo), so the kubelet may skip
    NodePrepareResources and NodeUnprepareResources for claims of only such devices
    (KEP-5945, alpha in Kubernetes 1.37). The publisher then writes the pool's slices with
    ``spec.skipNodeOperations`` where the cluster keeps the field (gate
    ``DRAOptionalNodeOperations`` on) and the Node declares the feature
    (``status.declaredFeatures``); elsewhere nothing changes and the kubelet prepares as
    usual, so ``prepare`` must still work for these devices.
    """

    name: str
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...] = ()
    needs_node_preparation: bool = True


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


@runtime_checkable
class Backend(Protocol):
    """A device backend. Implementations must be thread-safe for ``health``/``discover``.

    ``prepare`` and ``unprepare`` are called with the plugin's serialize lock
    held (never concurrently with each other), must be idempotent, and
    ``unprepare`` must succeed for a claim it does not know. Both should finish
    before ``context.deadline``. The one exception to "never concurrently": an
    ``unprepare`` still running when the plugin's wait for it ends
    (``--unprepare-timeout``) goes on outside the lock, and meanwhile the other
    methods may be called for other claims (never for the same claim).
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


class ChangeListeners:
    """The callbacks a backend's ``subscribe`` was given, for a backend to keep and call.

    ``add`` from ``subscribe``; ``notify`` whenever ``discover`` or ``health`` would answer
    differently (the plugin then re-reads both and publishes what changed); ``clear`` from
    ``close``. Thread-safe: ``notify`` calls every callback on its caller's thread, outside
    the lock (a callback may call back into the backend), in the order they were added.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def add(self, on_change: Callable[[], None]) -> None:
        """Keep ``on_change``: every later ``notify`` calls it."""
        with self._lock:
            self._callbacks.append(on_change)

    def notify(self) -> None:
        """Call every kept callback now."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def clear(self) -> None:
        """Forget every callback (the backend is closing): ``notify`` calls none after this."""
        with self._lock:
            self._callbacks.clear()


ConfigT = TypeVar("ConfigT", bound="pydantic.BaseModel")


class BackendBase(Generic[ConfigT]):
    """A starting point for a :class:`Backend`: set ``name`` and ``config_model``, implement
    ``discover``, ``prepare`` and ``unprepare``.

    ``subscribe`` and ``close`` are no-ops (devices that never change, no background
    work); override them when that is not so. Add ``health`` to report device health
    (:class:`~drakit.plugin.HealthReporter`). Generic over the opaque-config model, so
    ``config_of`` hands ``prepare`` the device's validated config with its real type.
    """

    name: ClassVar[str]
    #: :class:`EmptyConfig` (no opaque parameters accepted), imported when first read.
    config_model: ClassVar[type[pydantic.BaseModel]] = LazyConfigModel(  # type: ignore[assignment]
        "drakit.plugin.models:EmptyConfig"
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
