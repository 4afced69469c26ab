"""Prometheus metrics of the controller, on a registry of its own.

Names follow Kubernetes where it has them:
``dynamic_resource_allocation_resourceclaim_creates_total`` (counter, labels ``status``,
``admin_access``) and ``dynamic_resource_allocation_resource_claims`` (gauge computed from the
claim cache at scrape time, labels ``allocated``, ``admin_access``, ``source``). drakit adds
scheduling attempts and latencies under ``drakit_controller_*``.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.naming import POD_CLAIM_NAME_ANNOTATION, meta
from kubeapi.objects import KubeObject

__all__ = ["ControllerMetrics", "claim_uses_admin_access"]

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# 1 ms to ~65 s: allocation attempts are short, end-to-end latencies under load are long.
LATENCY_BUCKETS = tuple(0.001 * 2**i for i in range(17))


def claim_uses_admin_access(claim_spec: dict[str, Any]) -> bool:
    """True when a claim (or template) spec asks for admin access in any request."""
    for request in (claim_spec.get("devices") or {}).get("requests") or ():
        if (request.get("exactly") or {}).get("adminAccess"):
            return True
        if any(sub.get("adminAccess") for sub in request.get("firstAvailable") or ()):
            return True
    return False


def _claim_source(claim: KubeObject) -> str:
    annotations = meta(claim).get("annotations") or {}
    if POD_CLAIM_NAME_ANNOTATION in annotations:
        return "resource_claim_template"
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
        return "extended_resource"
    return ""


class _ClaimGauge(Collector):
    """``dynamic_resource_allocation_resource_claims`` counted from the cache when scraped."""

    def __init__(self, list_claims: Callable[[], Iterable[KubeObject]]) -> None:
        self._list_claims = list_claims

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "dynamic_resource_allocation_resource_claims",
            "Number of ResourceClaims, by allocation state, admin access and source.",
            labels=["allocated", "admin_access", "source"],
        )
        tally: Tally[tuple[str, str, str]] = Tally()
        for claim in self._list_claims():
            allocated = bool((claim.get("status") or {}).get("allocation"))
            admin = claim_uses_admin_access(claim.get("spec") or {})
            tally[(str(allocated).lower(), str(admin).lower(), _claim_source(claim))] += 1
        for labels, count in sorted(tally.items()):
            family.add_metric(list(labels), count)
        yield family


class ControllerMetrics:
    """All metrics of one controller instance."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.claim_creates = Counter(
            "dynamic_resource_allocation_resourceclaim_creates_total",
            "ResourceClaims the controller tried to create from templates, by outcome.",
            ["status", "admin_access"],
            registry=r,
        )
        self.scheduling_attempts = Counter(
            "drakit_controller_scheduling_attempts_total",
            "Scheduling attempts of pods that name drakit, by result "
            "(scheduled, unschedulable, waiting, error).",
            ["result"],
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "drakit_controller_scheduling_attempt_duration_seconds",
            "Duration of one scheduling attempt: node filtering, allocation, claim writes, bind.",
            ["result"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_latency = Histogram(
            "drakit_controller_pod_scheduling_latency_seconds",
            "Time from pod creation to the successful bind by drakit.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reservations_removed = Counter(
            "drakit_controller_reservations_removed_total",
            "reservedFor entries removed because their pod is done or gone.",
            registry=r,
        )
        self.deallocations = Counter(
            "drakit_controller_deallocations_total",
            "Claims deallocated after their last consumer went away.",
            registry=r,
        )
        self.claims_deleted = Counter(
            "drakit_controller_generated_claims_deleted_total",
            "Generated claims deleted because their pod is done or gone.",
            registry=r,
        )
        self.queue_depth = Gauge(
            "drakit_controller_workqueue_depth", "Keys waiting in the work queue.", registry=r
        )

    def watch_claims(self, list_claims: Callable[[], Iterable[KubeObject]]) -> None:
        """Export the claim gauge computed from ``list_claims`` at scrape time."""
        self.registry.register(_ClaimGauge(list_claims))
