"""One node-plugin instance: its parts started and stopped in order.

The parts come from :func:`drakit.node_plugin.wiring.build` (or a test's own). Order at
start: metrics endpoint, driver core, background services (the ResourceSlice
publisher), DRA server, registration server (the kubelet must find the DRA
socket serving the moment it learns about it). Order at stop, the reverse:
registration socket (the kubelet deregisters), the DRA server drains in-flight
calls, services, the core, then the closers (backend, Event recorder).

:class:`NodePlugin` is the instance; :mod:`drakit.node_plugin.embedded` wraps it into the
handle ``drakit node-plugin`` and an embedding program (``drakit.plugin.KubeletPlugin``) run.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from drakit.node_plugin import wiring
from drakit.node_plugin.driver import DriverCore, PluginConfig
from drakit.node_plugin.metrics import PluginMetrics, serve_metrics
from drakit.node_plugin.service.calls import DriverCalls
from drakit.node_plugin.service.registration import RegistrationStatus
from drakit.node_plugin.service.server import DEFAULT_GRACE_SECONDS, DraServer, RegistrationServer
from drakit.node_plugin.sockets import SocketPaths, socket_paths
from drakit.plugin.errors import BackgroundError, ErrorHandler
from drakit.telemetry.logs import get_logger

if TYPE_CHECKING:
    from drakit.telemetry.endpoint import MetricsEndpoint

_log = get_logger(__name__)


def _kubelet_health_services(core: DriverCore) -> tuple[str, ...] | None:
    """What the node's kubelet calls, if the core can tell (test cores need not)."""
    ask = getattr(core, "kubelet_health_services", None)
    return ask() if callable(ask) else None


def _debug_routes(services: Sequence[object]) -> dict[str, Callable[[], bytes]]:
    """Read-only JSON paths the services offer beside /metrics (``debug_routes()``: the
    PodResources cross-check's ``/debug/node-view``)."""
    routes: dict[str, Callable[[], bytes]] = {}
    for service in services:
        offer = getattr(service, "debug_routes", None)
        if callable(offer):
            routes.update(offer())
    return routes


class RegistrationRefusedError(Exception):
    """The kubelet refused to register the plugin; the message is the kubelet's reason."""


class NodePlugin:
    """One running plugin instance: metrics, core, and its two servers."""

    def __init__(
        self,
        config: PluginConfig,
        core: DriverCore | None = None,
        metrics: PluginMetrics | None = None,
        *,
        build: wiring.Wiring = wiring.build,
        on_error: ErrorHandler | None = None,
    ) -> None:
        """Runs ``core`` when given (with the plugin's own serialize lock), else the parts
        ``build(config, metrics)`` returns at ``start``. ``on_error`` hears of failed health
        streams and of the kubelet refusing the registration (the parts' own failures reach
        it through ``build``)."""
        self.config = config
        self.metrics = metrics or PluginMetrics()
        self.sockets: SocketPaths = socket_paths(
            config.registrar_dir, config.plugin_data_dir, config.driver_name, config.pod_uid
        )
        self._core = core
        self._build = build
        self._parts: wiring.Parts | None = None
        self._metrics_endpoint: MetricsEndpoint | None = None
        self.dra_server: DraServer | None = None
        self._calls: DriverCalls | None = None
        self.registration_server: RegistrationServer | None = None
        self._stopped = threading.Event()
        self._on_error = on_error

    def started_up(self) -> bool:
        """True once start-up work is done: :meth:`start` returned and every background
        service that reports readiness (the publisher: Node found, informers synced, first
        sync queued) is ready. Does not wait."""
        if self._core is None or self._parts is None:
            return False
        for service in self._parts.services:
            # Readiness is optional for a Service (the cross-check has none).
            wait_ready: Callable[[float], bool] | None = getattr(service, "wait_ready", None)
            if wait_ready is not None and not wait_ready(0):
                return False
        return True

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
            self._parts = self._build(config, self.metrics)
        else:
            self._parts = wiring.Parts(self._core, wiring.serialize_lock(config))
        self._core = self._parts.core
        if config.metrics_address:
            self._metrics_endpoint = serve_metrics(
                self.metrics, config.metrics_address, _debug_routes(self._parts.services)
            )
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
        for service in self._parts.services:
            service.start()
        self._calls = DriverCalls(self._core, self._parts.serialize, self.metrics)
        self.dra_server = DraServer(
            self.sockets.dra,
            self._core,
            self._calls,
            health_resend_seconds=config.health_resend_seconds,
            health_versions=_kubelet_health_services(self._core),
            on_error=self._on_error,
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
        if status.registered is False and self._on_error is not None:
            refused = RegistrationRefusedError(status.error or "no reason given")
            self._on_error(BackgroundError("register with the kubelet", refused))

    @property
    def registration(self) -> RegistrationStatus | None:
        """What the kubelet last said about the registration; None before the plugin serves."""
        server = self.registration_server
        return server.servicer.status if server is not None else None

    def publish_now(self) -> bool:
        """Have every service that publishes (``resync``: the ResourceSlice publisher) ask the
        backend again; False when the plugin is not running."""
        parts = self._parts
        if parts is None or self._stopped.is_set():
            return False
        for service in parts.services:
            resync: Callable[[], None] | None = getattr(service, "resync", None)
            if resync is not None:
                resync()
        return True

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
        if self._calls is not None:
            self._calls.close()
        parts = self._parts
        for service in reversed(parts.services if parts else ()):
            try:
                service.stop()
            except Exception:
                _log.exception("Background service failed to stop", service=type(service).__name__)
        try:
            self._core.stop()
        except Exception:
            _log.exception("Driver core failed to stop cleanly")
        for close in parts.closers if parts else ():
            try:
                close()
            except Exception:
                _log.exception("A plugin part failed to close")
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.close()
        _log.info("Node plugin stopped", driver=self.config.driver_name)


def settle_heap() -> None:
    """Collect start-up garbage once and move what survives (modules, classes, the
    parts built at start: tens of thousands of objects) out of the collector's view.

    Without it every full collection walks all of them again (20-40 ms on a loaded
    node), and such a pause lands inside whichever prepare call triggered it: the
    tail of NodePrepareResources. Objects created later are collected as usual.
    """
    gc.collect()
    gc.freeze()
