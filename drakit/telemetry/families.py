"""Metrics of one component: one registry, one name prefix.

The node plugin, its slice publisher and the controller each declare a dozen metrics; this
keeps each declaration to its name, help text and label names.
"""

from __future__ import annotations

from collections.abc import Sequence

from drakit.telemetry.metrics import Counter, Gauge, Histogram, Registry

__all__ = ["MetricFamilies"]


class MetricFamilies:
    """Makes metrics registered on ``registry`` whose names start with ``prefix`` + ``_``
    (Prometheus' ``namespace``; none when ``prefix`` is empty)."""

    def __init__(self, registry: Registry, prefix: str = "") -> None:
        self.registry = registry
        self.prefix = prefix

    def counter(self, name: str, documentation: str, *labels: str) -> Counter:
        """A counter (its exposed name ends in ``_total``)."""
        return Counter(name, documentation, labels, namespace=self.prefix, registry=self.registry)

    def gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        """A gauge."""
        return Gauge(name, documentation, labels, namespace=self.prefix, registry=self.registry)

    def histogram(
        self, name: str, documentation: str, *labels: str, buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(
            name,
            documentation,
            labels,
            namespace=self.prefix,
            registry=self.registry,
            buckets=buckets,
        )
