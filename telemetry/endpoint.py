"""``/metrics`` over HTTP for one Prometheus registry, shared by the node plugin and controller.

Both may run on the host network, where a rolling update starts the new pod while the old one
still holds the port; :class:`MetricsEndpoint` waits for the port instead of failing.
"""

from __future__ import annotations

import errno
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from telemetry.address import parse_address

__all__ = ["MetricsEndpoint", "parse_address", "serve"]


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


def serve(registry: CollectorRegistry, address: str) -> MetricsEndpoint:
    """Start serving ``registry`` at ``address`` (``HOST:PORT``) in a daemon thread."""
    host, port = parse_address(address)
    return MetricsEndpoint(registry, host, port)
