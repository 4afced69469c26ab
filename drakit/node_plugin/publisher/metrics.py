"""Metrics of the ResourceSlice publisher (registered on the plugin's registry)."""

from __future__ import annotations

from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.metrics import Registry

__all__ = ["PublisherMetrics"]

_NAMESPACE = "drakit_node_plugin_publisher"


class PublisherMetrics:
    """Counters of syncs, writes and reported problems. Thread-safe."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or Registry()
        metric = MetricFamilies(self.registry, _NAMESPACE)
        self.writes_total = metric.counter(
            "slice_writes",
            "ResourceSlice writes sent to the apiserver, by verb (create, update, delete).",
            "verb",
        )
        self.syncs_total = metric.counter(
            "pool_syncs", "Pool syncs, by result (unchanged, changed, invalid, error).", "result"
        )
        self.invalid_pools_total = metric.counter(
            "invalid_pools",
            "Pool descriptions from the backend that break the API's rules (reported once each).",
        )
        self.dropped_fields_total = metric.counter(
            "dropped_fields",
            "Writes after which the apiserver had dropped fields (a disabled feature gate).",
        )
        self.sync_seconds = metric.histogram(
            "pool_sync_duration_seconds",
            "Duration of one pool sync, including its API writes.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.published_devices = metric.gauge(
            "published_devices", "Devices in the pools this plugin publishes, by pool.", "pool"
        )
        self.node_found = metric.gauge(
            "node_found", "1 once the Node object was found (publishing needs it), 0 before."
        )
        for verb in ("create", "update", "delete"):
            self.writes_total.labels(verb)
        for result in ("unchanged", "changed", "invalid", "error"):
            self.syncs_total.labels(result)
