"""Prometheus metrics of the ResourceSlice publisher (registered on the plugin's registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["PublisherMetrics"]

_NAMESPACE = "drakit_node_plugin_publisher"


class PublisherMetrics:
    """Counters of syncs, writes and reported problems. Thread-safe."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.writes_total = Counter(
            "slice_writes",
            "ResourceSlice writes sent to the apiserver, by verb (create, update, delete).",
            ["verb"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.syncs_total = Counter(
            "pool_syncs",
            "Pool syncs, by result (unchanged, changed, invalid, error).",
            ["result"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.invalid_pools_total = Counter(
            "invalid_pools",
            "Pool descriptions from the backend that break the API's rules (reported once each).",
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.dropped_fields_total = Counter(
            "dropped_fields",
            "Writes after which the apiserver had dropped fields (a disabled feature gate).",
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.sync_seconds = Histogram(
            "pool_sync_duration_seconds",
            "Duration of one pool sync, including its API writes.",
            namespace=_NAMESPACE,
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.published_devices = Gauge(
            "published_devices",
            "Devices in the pools this plugin publishes, by pool.",
            ["pool"],
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        self.node_found = Gauge(
            "node_found",
            "1 once the Node object was found (publishing needs it), 0 before.",
            namespace=_NAMESPACE,
            registry=self.registry,
        )
        for verb in ("create", "update", "delete"):
            self.writes_total.labels(verb)
        for result in ("unchanged", "changed", "invalid", "error"):
            self.syncs_total.labels(result)
