"""``/metrics`` over HTTP for one :class:`telemetry.metrics.Registry`, shared by the node plugin
and the controller.

The only module that imports prometheus_client: import it when an endpoint is started, not
before (a node plugin without ``--metrics-address`` never loads it). A drakit registry is
served through one prometheus_client collector that turns each drakit family into a
prometheus_client ``Metric`` with the same samples, so the text format, escaping and content
negotiation are prometheus_client's own.

Both programs may run on the host network, where a rolling update starts the new pod while the
old one still holds the port; :class:`MetricsEndpoint` waits for the port instead of failing.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from telemetry.address import parse_address
from telemetry.metrics import Registry

__all__ = ["MetricsEndpoint", "exposition_registry", "parse_address", "render_text", "serve"]


class _RegistryCollector(Collector):
    """Every family of a drakit registry, as prometheus_client metric families.

    ``Metric`` with ``add_sample`` rather than ``CounterMetricFamily`` and friends: those
    cannot carry a histogram's ``_created`` sample, and the samples are already complete.
    """

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            metric = Metric(family.name, family.documentation, family.type)
            for sample in family.samples:
                metric.add_sample(sample.name, sample.labels, sample.value)
            yield metric


def exposition_registry(registry: Registry) -> CollectorRegistry:
    """A prometheus_client registry that exposes ``registry`` (and nothing else)."""
    exposed = CollectorRegistry(auto_describe=False)
    exposed.register(_RegistryCollector(registry))
    return exposed


def render_text(registry: Registry) -> str:
    """``registry`` in the Prometheus text format, as ``/metrics`` serves it."""
    return generate_latest(exposition_registry(registry)).decode()


class MetricsEndpoint:
    """``/metrics`` over HTTP for one registry; ``close`` stops it.

    When the port is taken, the endpoint keeps trying to bind it every
    ``retry_seconds`` in the background instead of failing the plugin: on the
    host network a DaemonSet's new pod starts while its predecessor still
    holds the port (rolling update with maxSurge), and the node must not go
    without a plugin for the sake of its metrics.
    """

    def __init__(
        self, registry: Registry, host: str, port: int, retry_seconds: float = 2.0
    ) -> None:
        self._registry = exposition_registry(registry)
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


def serve(registry: Registry, address: str) -> MetricsEndpoint:
    """Start serving ``registry`` at ``address`` (``HOST:PORT``) in a daemon thread."""
    host, port = parse_address(address)
    return MetricsEndpoint(registry, host, port)
