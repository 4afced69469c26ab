"""Metrics of one node-plugin instance.

Each :class:`PluginMetrics` owns its own registry, so two plugin instances in
one process (tests) never share counters, and ``/metrics`` shows exactly this
plugin. The core keeps ``prepared_claims`` current and may register its own
metrics on ``registry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from drakit.telemetry.address import parse_address
from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.metrics import Registry

if TYPE_CHECKING:
    from drakit.telemetry.endpoint import MetricsEndpoint

__all__ = ["PluginMetrics", "parse_address", "serve_metrics"]

_NAMESPACE = "drakit_node_plugin"

# Prepare/unprepare must finish well within the kubelet's 45 s deadline; the
# buckets resolve fast local work (ms) as well as slow API servers (seconds).
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 45)

OPERATIONS = ("prepare", "unprepare")


class PluginMetrics:
    """The node plugin's metrics; every method is thread-safe."""

    def __init__(self) -> None:
        self.registry = Registry()
        metric = MetricFamilies(self.registry, _NAMESPACE)
        self.claims_total = metric.counter(
            "claims",
            "Claims handled by NodePrepareResources/NodeUnprepareResources, by outcome.",
            "operation",
            "result",
        )
        self.duration_seconds = metric.histogram(
            "request_duration_seconds",
            "Duration of NodePrepareResources/NodeUnprepareResources calls.",
            "operation",
            buckets=_DURATION_BUCKETS,
        )
        self.in_flight = metric.gauge(
            "requests_in_flight",
            "NodePrepareResources/NodeUnprepareResources calls being served now.",
            "operation",
        )
        self.prepared_claims = metric.gauge(
            "prepared_claims", "Claims currently prepared on this node (kept by the driver core)."
        )
        self.registered = metric.gauge(
            "registered", "1 when the kubelet reported a successful registration, 0 otherwise."
        )
        self.registration_status_total = metric.counter(
            "registration_status",
            "NotifyRegistrationStatus calls from the kubelet, by reported outcome.",
            "result",
        )
        self.claim_errors = metric.counter(
            "claim_errors",
            "Per-claim prepare/unprepare failures, by operation and reason.",
            "operation",
            "reason",
        )
        self.corrupt_checkpoints = metric.counter(
            "checkpoint_corrupt", "Checkpoint files found corrupt, moved aside and rebuilt."
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


def serve_metrics(
    metrics: PluginMetrics, address: str, routes: Mapping[str, Callable[[], bytes]] | None = None
) -> MetricsEndpoint:
    """Start serving ``metrics`` at ``address`` (``HOST:PORT``) in a daemon thread, and
    ``routes`` (path -> JSON body) beside ``/metrics``."""
    # prometheus_client loads here, only for a plugin that serves /metrics.
    from drakit.telemetry.endpoint import serve  # noqa: PLC0415

    return serve(metrics.registry, address, routes=routes)
