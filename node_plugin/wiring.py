"""The node plugin's composition root: every long-lived part is built here, once.

:func:`build` turns a validated :class:`~drakit.node_plugin.driver.PluginConfig` into the parts
:class:`~drakit.node_plugin.app.NodePlugin` runs: the backend, one API client (with the limits the
CLI read), one Event recorder shared by core and publisher, the serialize lock, the core and
the ResourceSlice publisher. ``NodePlugin`` owns their start/stop order. Tests hand
``NodePlugin`` their own :class:`Parts` (or just a core) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from drakit.kubeapi.errors import ConfigError as KubeConfigError
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.node_plugin.backends.base import (
    Backend,
    BackendConfigError,
    health_report,
    metrics_reporter,
)
from drakit.node_plugin.backends.registry import load_backend
from drakit.node_plugin.checkpoint import FILE_NAME as CHECKPOINT_FILE
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import CoreConfigError, DriverCore, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.publisher import Publisher
from drakit.node_plugin.publisher.publisher import DEFAULT_HEALTH_INTERVAL
from drakit.node_plugin.serialize import LOCK_FILE_NAME, SerializeLock

__all__ = ["Parts", "Service", "Wiring", "build", "build_publisher", "serialize_lock"]


class Service(Protocol):
    """Background work started after the core and stopped before it (the publisher)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Parts:
    """What one plugin instance runs.

    ``serialize`` is the lock every prepare/unprepare call holds while it touches local
    state; ``closers`` run last, after the core stopped (backend, Event recorder).
    """

    core: DriverCore
    serialize: AbstractContextManager[object]
    services: Sequence[Service] = ()
    closers: Sequence[Callable[[], None]] = field(default_factory=tuple)


Wiring = Callable[[PluginConfig, PluginMetrics], Parts]


def serialize_lock(config: PluginConfig) -> SerializeLock:
    return SerializeLock(
        config.plugin_data_dir / LOCK_FILE_NAME, timeout=config.serialize_timeout_seconds
    )


def build_publisher(
    config: PluginConfig,
    backend: Backend,
    api: Any,
    metrics: PluginMetrics,
    events: EventRecorder | None = None,
) -> Publisher:
    """The ResourceSlice publisher of ``config``'s driver and node, metrics on ``metrics``;
    devices the backend reports Unhealthy (if it reports health) get the taint of
    ``config``'s health policy."""
    return Publisher(
        api,
        config.driver_name,
        config.node_name,
        backend,
        registry=metrics.registry,
        events=events,
        health=health_report(backend),
        health_policy=getattr(config, "health_policy", None),
        health_interval=getattr(config, "health_check_seconds", DEFAULT_HEALTH_INTERVAL),
        detect_cluster=True,
    )


def build_crosscheck(
    config: PluginConfig, metrics: PluginMetrics, events: EventRecorder | None
) -> tuple[Service, ...]:
    """The PodResources cross-check when ``config`` enables it (else nothing); gRPC and the
    generated PodResources code are imported only then."""
    if config.podresources is None:
        return ()
    from drakit.node_plugin.crosscheck_service import CrossCheck  # noqa: PLC0415
    from drakit.node_plugin.podresources import PodResourcesClient  # noqa: PLC0415

    return (
        CrossCheck(
            config.podresources,
            driver=config.driver_name,
            node=config.node_name,
            checkpoint_path=config.plugin_data_dir / CHECKPOINT_FILE,
            kubelet=PodResourcesClient(config.podresources.socket, config.driver_name),
            registry=metrics.registry,
            events=events,
        ),
    )


def build(config: PluginConfig, metrics: PluginMetrics) -> Parts:
    """The real parts; CoreConfigError names the flag or file and the reason."""
    try:
        backend = load_backend(
            config.backend,
            driver_name=config.driver_name,
            node_name=config.node_name,
            config_path=config.backend_config,
        )
    except BackendConfigError as exc:
        raise CoreConfigError(str(exc)) from exc
    reporter = metrics_reporter(backend)
    if reporter is not None:  # the backend's own metrics, served on the plugin's endpoint
        metrics.registry.register(reporter.metrics)
    try:
        # The light client: the plugin needs GET and a few writes, not the kubernetes
        # package's every API model (about 14 MiB of resident memory).
        api = load_light_client(
            config.kubeconfig,
            user_agent=f"drakit-node-plugin/{config.driver_name}",
            qps=config.kube_api_qps,
            burst=config.kube_api_burst,
        )
    except KubeConfigError as exc:
        backend.close()
        raise CoreConfigError(f"--kubeconfig: {exc}") from exc
    events = EventRecorder(
        api,
        reporting_controller=config.driver_name,
        reporting_instance=f"{config.driver_name}-{config.node_name}",
    )
    lock = serialize_lock(config)
    core = PrepareCore(
        config, metrics, backend, Resource(api, RESOURCE_CLAIMS), events=events, serialize=lock
    )
    publisher = build_publisher(config, backend, api, metrics, events)
    return Parts(
        core=core,
        serialize=lock,
        services=(publisher, *build_crosscheck(config, metrics, events)),
        closers=(backend.close, lambda: events.stop(timeout=5)),
    )
