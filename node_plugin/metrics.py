"""Prometheus metrics of one node-plugin instance.

Each :class:`PluginMetrics` owns its own registry, so two plugin instances in
one process (tests) never share counters, and ``/metrics`` shows exactly this
plugin. The core keeps ``prepared_claims`` current and may register its own
metrics on ``registry``.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_NAMESPACE = "drakit_node_plugin"

# Prepare/unprepare must finish well within the kubelet's 45 s deadline; the
# buckets resolve fast local work (ms) as well as slow API servers (seconds).
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 45)

OPERATIONS = ("prepare", "unprepare")


class PluginMetrics:
    """The node plugin's metrics; every method is thread-safe."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.claims_total = Counter(
            "claims",
            "Claims handled by NodePrepareResources/NodeUnprepareResources, by outcome.",
            ["operation", "result"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.duration_seconds = Histogram(
            "request_duration_seconds",
            "Duration of NodePrepareResources/NodeUnprepareResources calls.",
            ["operation"],
            namespace=_NAMESPACE,
            registry=self.registry,
            buckets=_DURATION_BUCKETS,
        )
        self.in_flight = Gauge(
            "requests_in_flight",
            "NodePrepareResources/NodeUnprepareResources calls being served now.",
            ["operation"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.prepared_claims = Gauge(
            "prepared_claims",
            "Claims currently prepared on this node (kept by the driver core).",
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.registered = Gauge(
            "registered",
            "1 when the kubelet reported a successful registration, 0 otherwise.",
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.registration_status_total = Counter(
            "registration_status",
            "NotifyRegistrationStatus calls from the kubelet, by reported outcome.",
            ["result"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        for operation in OPERATIONS:
            for result in ("success", "error"):
                self.claims_total.labels(operation, result)
            self.in_flight.labels(operation)
        for result in ("registered", "failed"):
            self.registration_status_total.labels(result)

    @contextmanager
    def track_call(self, operation: str) -> Iterator[None]:
        """Count the call as in flight and observe its duration."""
        self.in_flight.labels(operation).inc()
        try:
            with self.duration_seconds.labels(operation).time():
                yield
        finally:
            self.in_flight.labels(operation).dec()

    def count_claims(self, operation: str, succeeded: int, failed: int) -> None:
        self.claims_total.labels(operation, "success").inc(succeeded)
        self.claims_total.labels(operation, "error").inc(failed)

    def set_registration(self, registered: bool) -> None:
        self.registered.set(1 if registered else 0)
        self.registration_status_total.labels("registered" if registered else "failed").inc()


class MetricsEndpoint:
    """``/metrics`` over HTTP for one registry; ``close`` stops it.

    When the port is taken, the endpoint keeps trying to bind it every
    ``retry_seconds`` in the background instead of failing the plugin: on the
    host network a DaemonSet's new pod starts while its predecessor still
    holds the port (rolling update with maxSurge), and the node must not go
    without a plugin for the sake of its metrics.
    """

    def __init__(
        self, registry: CollectorRegistry, host: str, port: int, retry_seconds: float = 2.0
    ) -> None:
        self._registry = registry
        self._host = host
        self._requested_port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._retry: threading.Thread | None = None
        if not self._try_bind():
            self._retry = threading.Thread(
                target=self._bind_when_free,
                args=(retry_seconds,),
                name="metrics-bind-retry",
                daemon=True,
            )
            self._retry.start()

    @property
    def serving(self) -> bool:
        """True once the port is bound."""
        return self._server is not None

    @property
    def port(self) -> int:
        return int(self._server.server_port) if self._server else self._requested_port

    def _try_bind(self) -> bool:
        try:
            self._server, self._thread = start_http_server(
                self._requested_port, addr=self._host, registry=self._registry
            )
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                raise
            return False
        return True

    def _bind_when_free(self, retry_seconds: float) -> None:
        while not self._stop.wait(retry_seconds):
            if self._try_bind():
                return

    def close(self) -> None:
        self._stop.set()
        if self._retry is not None:
            self._retry.join(timeout=5)
        if self._server is not None and self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)


def parse_address(address: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``:PORT`` means all interfaces); ValueError if malformed."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{address!r} is not HOST:PORT (for example :8080 or 127.0.0.1:8080)")
    return host.strip("[]") or "0.0.0.0", int(port_text)


def serve_metrics(metrics: PluginMetrics, address: str) -> MetricsEndpoint:
    """Start serving ``metrics`` at ``address`` (``HOST:PORT``) in a daemon thread."""
    host, port = parse_address(address)
    return MetricsEndpoint(metrics.registry, host, port)
