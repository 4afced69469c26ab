"""Wiring of one node-plugin instance and its run loop.

Order at start: metrics endpoint, driver core, DRA server, registration
server (the kubelet must find the DRA socket serving the moment it learns
about it). Order at stop, the reverse: registration socket (the kubelet
deregisters), then the DRA server drains in-flight calls, then the core.
"""

from __future__ import annotations

import importlib
import os
import signal
import threading
from types import FrameType
from typing import cast

from node_plugin.driver import CoreConfigError, CoreFactory, DriverCore, PluginConfig
from node_plugin.logging import get_logger
from node_plugin.metrics import MetricsEndpoint, PluginMetrics, serve_metrics
from node_plugin.serialize import LOCK_FILE_NAME, SerializeLock
from node_plugin.service.calls import DriverCalls
from node_plugin.service.registration import RegistrationStatus
from node_plugin.service.server import DEFAULT_GRACE_SECONDS, DraServer, RegistrationServer
from node_plugin.sockets import SocketPaths, socket_paths

_log = get_logger(__name__)

DEFAULT_CORE_FACTORY = "node_plugin.core:build_core"
# Names another factory as "module:function"; a seam for tests (a subprocess
# plugin with an in-memory core) and for replacing the whole core.
CORE_FACTORY_ENV = "DRAKIT_CORE_FACTORY"


def load_core_factory(spec: str | None = None) -> CoreFactory:
    """Import the ``module:function`` that builds the driver core."""
    spec = spec or os.environ.get(CORE_FACTORY_ENV) or DEFAULT_CORE_FACTORY
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CoreConfigError(f"core factory {spec!r} is not of the form module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CoreConfigError(f"cannot import core factory module {module_name!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise CoreConfigError(f"{module_name!r} has no callable {attr!r}")
    return cast(CoreFactory, factory)


def build_core(config: PluginConfig, metrics: PluginMetrics) -> DriverCore:
    """Build the driver core (``node_plugin.core.build_core`` unless overridden)."""
    return load_core_factory()(config, metrics)


def _kubelet_health_services(core: DriverCore) -> tuple[str, ...] | None:
    """What the node's kubelet calls, if the core can tell (test cores need not)."""
    ask = getattr(core, "kubelet_health_services", None)
    return ask() if callable(ask) else None


class NodePlugin:
    """One running plugin instance: metrics, core, and its two servers."""

    def __init__(
        self,
        config: PluginConfig,
        core: DriverCore | None = None,
        metrics: PluginMetrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or PluginMetrics()
        self.sockets: SocketPaths = socket_paths(
            config.registrar_dir, config.plugin_data_dir, config.driver_name, config.pod_uid
        )
        self._core = core
        self._metrics_endpoint: MetricsEndpoint | None = None
        self.dra_server: DraServer | None = None
        self.registration_server: RegistrationServer | None = None
        self._stopped = threading.Event()

    @property
    def core(self) -> DriverCore:
        if self._core is None:
            raise RuntimeError("the plugin has not been started")
        return self._core

    def start(self) -> None:
        """Start everything; on failure, undo what was started and re-raise."""
        try:
            self._start()
        except BaseException:
            self.stop(grace=0)
            raise

    def _start(self) -> None:
        config = self.config
        config.plugin_data_dir.mkdir(parents=True, exist_ok=True)
        if self._core is None:
            self._core = build_core(config, self.metrics)
        if config.metrics_address:
            self._metrics_endpoint = serve_metrics(self.metrics, config.metrics_address)
            if self._metrics_endpoint.serving:
                _log.info(
                    "Serving metrics",
                    address=config.metrics_address,
                    port=self._metrics_endpoint.port,
                )
            else:
                _log.warning(
                    "Metrics port in use; serving metrics once it is free",
                    address=config.metrics_address,
                )
        self._core.start()
        lock = SerializeLock(
            config.plugin_data_dir / LOCK_FILE_NAME, timeout=config.serialize_timeout_seconds
        )
        calls = DriverCalls(self._core, lock, self.metrics)
        self.dra_server = DraServer(
            self.sockets.dra,
            self._core,
            calls,
            health_resend_seconds=config.health_resend_seconds,
            health_versions=_kubelet_health_services(self._core),
        )
        self.dra_server.start()
        self.registration_server = RegistrationServer(
            self.sockets.registration,
            config.driver_name,
            self.sockets.dra,
            self.dra_server.supported_versions,
            self._on_registration_status,
        )
        self.registration_server.start()
        _log.info(
            "Node plugin started",
            driver=config.driver_name,
            node=config.node_name,
            registration_socket=str(self.sockets.registration),
            dra_socket=str(self.sockets.dra),
            supported_versions=self.dra_server.supported_versions,
            pod_uid=config.pod_uid or "",
        )

    def _on_registration_status(self, status: RegistrationStatus) -> None:
        self.metrics.set_registration(bool(status.registered))
        if self.dra_server is not None:
            self.dra_server.record_registration(status)

    def stop(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Deregister, drain in-flight calls, stop the core; idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._core is None:
            return  # nothing was started
        if self.registration_server is not None:
            self.registration_server.stop(grace=0)
        if self.dra_server is not None:
            self.dra_server.stop(grace)
        if self._core is not None:
            try:
                self._core.stop()
            except Exception:
                _log.exception("Driver core failed to stop cleanly")
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.close()
        _log.info("Node plugin stopped", driver=self.config.driver_name)


def run_until_signal(plugin: NodePlugin) -> int:
    """Start ``plugin``, serve until SIGTERM or SIGINT, then stop gracefully."""
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        plugin.start()
        while not stop.wait(timeout=1.0):
            pass
        _log.info("Shutting down", signal=signal.Signals(received[0]).name)
    finally:
        plugin.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
