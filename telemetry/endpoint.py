"""``/metrics`` over HTTP for one :class:`drakit.telemetry.metrics.Registry`, shared by the
node plugin and the controller.

The only module that imports prometheus_client: import it when an endpoint is started, not
before (a node plugin without ``--metrics-address`` never loads it). A drakit registry is
served through one prometheus_client collector that turns each drakit family into a
prometheus_client ``Metric`` with the same samples, so the text format, escaping and content
negotiation are prometheus_client's own.

The HTTP server is :class:`drakit.telemetry.boundedhttp.BoundedHTTPServer` (fixed threads that
never wait on a client, connections bounded per address and in total, a deadline per request)
with prometheus_client's request handler, not prometheus_client's ``start_http_server``, which
spends an unbounded thread per connection and never times out.

Both programs may run on the host network, where a rolling update starts the new pod while the
old one still holds the port; :class:`MetricsEndpoint` waits for the port instead of failing.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import urlparse

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from drakit.telemetry.address import parse_address
from drakit.telemetry.boundedhttp import BoundedHTTPServer, Limits
from drakit.telemetry.metrics import Registry

__all__ = [
    "Limits",
    "MetricsEndpoint",
    "exposition_registry",
    "parse_address",
    "render_text",
    "serve",
]


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


#: Extra read-only paths of an endpoint: path -> function returning a JSON body.
Routes = Mapping[str, Callable[[], bytes]]


def _handler(registry: Registry, routes: Routes) -> type[MetricsHandler]:
    """prometheus_client's handler for ``registry``, answering ``routes`` with JSON first."""
    base: type[MetricsHandler] = MetricsHandler.factory(exposition_registry(registry))
    if not routes:
        return base

    class _WithRoutes(base):  # type: ignore[misc,valid-type]
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            produce = routes.get(urlparse(self.path).path)
            if produce is None:
                super().do_GET()
                return
            body = produce()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return _WithRoutes


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
        self,
        registry: Registry,
        host: str,
        port: int,
        retry_seconds: float = 2.0,
        limits: Limits | None = None,
        *,
        routes: Routes | None = None,
    ) -> None:
        self._handler = _handler(registry, routes or {})
        self._limits = limits
        self._host = host
        self._requested_port = port
        self._server: BoundedHTTPServer | None = None
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
        return self._server.server_port if self._server else self._requested_port

    @property
    def host(self) -> str:
        """The address listened on (the requested one until the port is bound)."""
        return self._server.server_name if self._server else self._host

    @property
    def connections(self) -> int:
        """Connections open now."""
        return self._server.connections if self._server else 0

    @property
    def busy(self) -> int:
        """Connections open now on which a request has begun."""
        return self._server.busy if self._server else 0

    def _try_bind(self) -> bool:
        try:
            self._server = BoundedHTTPServer(
                self._host, self._requested_port, self._handler, self._limits
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
        if self._server is not None:
            self._server.close()


def serve(
    registry: Registry, address: str, limits: Limits | None = None, routes: Routes | None = None
) -> MetricsEndpoint:
    """Start serving ``registry`` at ``address`` (``HOST:PORT``; ``:PORT`` binds
    ``drakit.telemetry.address.default_host()``) on background threads; ``routes`` adds
    read-only JSON paths (the node plugin's ``/debug/node-view``)."""
    host, port = parse_address(address)
    return MetricsEndpoint(registry, host, port, limits=limits, routes=routes)
