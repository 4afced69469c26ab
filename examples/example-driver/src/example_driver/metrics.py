"""Upstream dra-example-driver's driver metrics (its ``pkg/metrics``), with the same names,
labels, help and buckets, served on the node plugin's ``/metrics`` endpoint.

- ``dra_example_driver_prepare_claims_total{result}`` and
  ``dra_example_driver_unprepare_claims_total{result}``: claims handled, ``result`` success
  or error; both series exist at 0 from the start, as upstream creates them.
- ``dra_example_driver_prepare_claim_duration_seconds{result}`` and
  ``dra_example_driver_unprepare_claim_duration_seconds{result}``: Prometheus' default
  buckets. Upstream times each claim's own prepare; drakit prepares the claims of one call
  together, so each claim is given the time of its call (drakit.plugin.MetricsReporter).
- ``dra_example_driver_fatal_background_errors_total``: upstream counts the errors of its
  kubelet-plugin helper's background work that end the process; drakit's node plugin has no
  such error (its background work retries), so it stays 0.

Help texts carry ``[BETA]``, as Kubernetes' metrics library writes them for BETA metrics.
"""

from __future__ import annotations

from drakit.plugin import Counter, Histogram, Registry

NAMESPACE = "dra_example_driver"
#: Prometheus' (and Kubernetes' metrics library's) DefBuckets.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RESULTS = ("success", "error")
OPERATIONS = ("prepare", "unprepare")


class DriverMetrics:
    """The five metrics in their own registry (one per backend instance)."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.claims_total: dict[str, Counter] = {}
        self.duration_seconds: dict[str, Histogram] = {}
        for operation in OPERATIONS:
            self.claims_total[operation] = Counter(
                f"{operation}_claims_total",
                f"[BETA] Total number of resource claim {operation} operations handled by "
                "the driver.",
                ["result"],
                namespace=NAMESPACE,
                registry=self.registry,
            )
            self.duration_seconds[operation] = Histogram(
                f"{operation}_claim_duration_seconds",
                f"[BETA] Latency in seconds of resource claim {operation} operations handled "
                "by the driver.",
                ["result"],
                buckets=DEFAULT_BUCKETS,
                namespace=NAMESPACE,
                registry=self.registry,
            )
            for result in RESULTS:
                self.claims_total[operation].labels(result)
        self.fatal_background_errors_total = Counter(
            "fatal_background_errors_total",
            "[BETA] Total number of fatal background errors reported by the driver.",
            namespace=NAMESPACE,
            registry=self.registry,
        )

    def observe(self, operation: str, error: str, seconds: float) -> None:
        """One claim's outcome (``operation`` prepare or unprepare; ``error`` "" on success)."""
        result = "error" if error else "success"
        self.claims_total[operation].labels(result).inc()
        self.duration_seconds[operation].labels(result).observe(seconds)
