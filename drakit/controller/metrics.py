"""Metrics of the controller, on a registry of its own (exposed for Prometheus).

Names follow Kubernetes where it has them:
``dynamic_resource_allocation_resourceclaim_creates_total`` (counter, labels ``status``,
``admin_access``) and ``dynamic_resource_allocation_resource_claims`` (gauge computed from the
claim cache at scrape time, labels ``allocated``, ``admin_access``, ``source``). drakit adds
scheduling attempts and latencies under ``drakit_controller_*``.

Pool metrics (computed from the slice and claim caches, counted by ``drakit.allocator.usage``
exactly as ``drakit devices --summary`` counts them, for every driver):

- ``drakit_pool_devices{driver,pool,node,state}``: devices by state (free, allocated, shared,
  admin-access, tainted, unhealthy); every state is exported for every pool, 0 included;
- ``drakit_pool_counter_consumed`` / ``drakit_pool_counter_total{driver,pool,node,counter}``:
  shared counters (``counterSet/counter``) used by allocated partitionable devices vs total;
- ``drakit_pool_capacity_consumed`` / ``drakit_pool_capacity_total{driver,pool,node,capacity}``:
  consumable capacity of multi-allocatable devices, used vs total;
- ``drakit_resource_claims{namespace,state}``: claims ``allocated`` or ``pending`` (no
  allocation yet). Label cardinality is bounded: the ``top_namespaces`` namespaces with the
  most claims keep their name, all others are summed under ``namespace="_other"`` (a name no
  namespace can have: namespaces cannot contain ``_``). So the series count is at most
  ``2 * (top_namespaces + 1)``, whatever the number of namespaces.

The gauges counted from the caches are not recounted per scrape: a scrape serves the values
last counted, which are recounted only after ``caches_changed()`` (the controller calls it on
every claim and slice event), at most every ``GAUGE_REFRESH_SECONDS``
(:class:`drakit.telemetry.cachedcollector.CachedCollector`). Scraping in a loop therefore costs the
controller no decoding, and the values lag the caches by at most that long.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from drakit.allocator.model import ResourceSlice
from drakit.allocator.usage import STATES, build_usage
from drakit.controller.naming import POD_CLAIM_NAME_ANNOTATION, meta
from drakit.kubeapi.objects import KubeObject, decodable, held_claims
from drakit.telemetry.cachedcollector import CachedCollector
from drakit.telemetry.families import MetricFamilies
from drakit.telemetry.metrics import Collector, GaugeFamily, Registry

__all__ = [
    "DEFAULT_TOP_NAMESPACES",
    "OTHER_NAMESPACES",
    "ControllerMetrics",
    "claim_uses_admin_access",
]

DEFAULT_TOP_NAMESPACES = 20
OTHER_NAMESPACES = "_other"
POOL_LABELS = ["driver", "pool", "node"]
# "unknown" only exists for users who cannot see every claim; the controller sees them all.
POOL_STATES = tuple(s for s in STATES if s != "unknown")

#: Cache-derived gauges are recounted at most this often (and only after a change).
GAUGE_REFRESH_SECONDS = 5.0

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


class _ClaimGauge:
    """``dynamic_resource_allocation_resource_claims`` counted from the cache when scraped."""

    def __init__(self, list_claims: Callable[[], Iterable[KubeObject]]) -> None:
        self._list_claims = list_claims

    def collect(self) -> Iterator[GaugeFamily]:
        family = GaugeFamily(
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


class _PoolCollector:
    """Device, counter, capacity and claim gauges, counted from the caches when scraped."""

    def __init__(self, top_namespaces: int) -> None:
        self.top_namespaces = top_namespaces
        self.list_slices: Callable[[], Iterable[KubeObject]] = list
        self.list_claims: Callable[[], Iterable[KubeObject]] = list

    def collect(self) -> Iterator[GaugeFamily]:
        claims = list(self.list_claims())
        usage = build_usage(decodable(ResourceSlice, self.list_slices()), held_claims(claims))
        devices = GaugeFamily(
            "drakit_pool_devices",
            "Devices per pool and node by state (free, allocated, shared, admin-access, "
            "tainted, unhealthy, exhausted: a partition whose shared counters are used up).",
            labels=[*POOL_LABELS, "state"],
        )
        tally: Tally[tuple[str, str, str, str]] = Tally(
            (u.driver, u.pool, u.node, u.state) for u in usage.devices
        )
        for p in usage.pools:
            for state in POOL_STATES:
                devices.add_metric(
                    [p.driver, p.pool, p.node, state], tally[(p.driver, p.pool, p.node, state)]
                )
        yield devices
        yield from self._uses(usage.pools, "counter", "shared counters (counterSet/counter)")
        yield from self._uses(usage.pools, "capacity", "consumable capacity of shared devices")
        yield self._claims(claims)

    @staticmethod
    def _uses(pools: Any, kind: str, what: str) -> Iterator[GaugeFamily]:
        consumed = GaugeFamily(
            f"drakit_pool_{kind}_consumed", f"Amount of {what} used by allocations.",
            labels=[*POOL_LABELS, kind],
        )  # fmt: skip
        total = GaugeFamily(
            f"drakit_pool_{kind}_total", f"Amount of {what} the pool offers.",
            labels=[*POOL_LABELS, kind],
        )  # fmt: skip
        for p in pools:
            for use in p.counters if kind == "counter" else p.capacity:
                labels = [p.driver, p.pool, p.node, use.name]
                consumed.add_metric(labels, float(use.used.value))
                total.add_metric(labels, float(use.total.value))
        yield consumed
        yield total

    def _claims(self, claims: list[KubeObject]) -> GaugeFamily:
        family = GaugeFamily(
            "drakit_resource_claims",
            "ResourceClaims by namespace and state (allocated or pending); namespaces beyond "
            "the largest --metrics-claim-namespaces are summed under namespace=_other.",
            labels=["namespace", "state"],
        )
        tally: Tally[tuple[str, str]] = Tally()
        for claim in claims:
            state = "allocated" if (claim.get("status") or {}).get("allocation") else "pending"
            tally[(str(meta(claim).get("namespace") or ""), state)] += 1
        per_namespace: Tally[str] = Tally()
        for (namespace, _), count in tally.items():
            per_namespace[namespace] += count
        ranked = sorted(per_namespace, key=lambda ns: (-per_namespace[ns], ns))
        kept = set(ranked[: self.top_namespaces])
        out: Tally[tuple[str, str]] = Tally()
        for (namespace, state), count in tally.items():
            out[(namespace if namespace in kept else OTHER_NAMESPACES, state)] += count
        for labels, count in sorted(out.items()):
            family.add_metric(list(labels), count)
        return family


class ControllerMetrics:
    """All metrics of one controller instance."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        top_namespaces: int = DEFAULT_TOP_NAMESPACES,
        refresh_seconds: float = GAUGE_REFRESH_SECONDS,
    ) -> None:
        self.registry = registry or Registry()
        self._refresh_seconds = refresh_seconds
        self._pools = _PoolCollector(top_namespaces)
        self._cached: list[CachedCollector] = []
        self._register_cached(self._pools)
        # The claim-create counter keeps kube-controller-manager's name (no drakit prefix).
        metric = MetricFamilies(self.registry)
        self.claim_creates = metric.counter(
            "dynamic_resource_allocation_resourceclaim_creates_total",
            "ResourceClaims the controller tried to create from templates, by outcome.",
            "status",
            "admin_access",
        )
        self.scheduling_attempts = metric.counter(
            "drakit_controller_scheduling_attempts_total",
            "Scheduling attempts of pods that name drakit, by result "
            "(scheduled, unschedulable, waiting, error).",
            "result",
        )
        self.scheduling_attempt_duration = metric.histogram(
            "drakit_controller_scheduling_attempt_duration_seconds",
            "Duration of one scheduling attempt: node filtering, allocation, claim writes, bind.",
            "result",
            buckets=LATENCY_BUCKETS,
        )
        self.pod_scheduling_latency = metric.histogram(
            "drakit_controller_pod_scheduling_latency_seconds",
            "Time from pod creation to the successful bind by drakit.",
            buckets=LATENCY_BUCKETS,
        )
        self.reservations_removed = metric.counter(
            "drakit_controller_reservations_removed_total",
            "reservedFor entries removed because their pod is done or gone.",
        )
        self.deallocations = metric.counter(
            "drakit_controller_deallocations_total",
            "Claims deallocated after their last consumer went away.",
        )
        self.claims_deleted = metric.counter(
            "drakit_controller_generated_claims_deleted_total",
            "Generated claims deleted because their pod is done or gone.",
        )
        self.queue_depth = metric.gauge(
            "drakit_controller_workqueue_depth", "Keys waiting in the work queue."
        )
        self.noexecute_held = metric.gauge(
            "drakit_controller_noexecute_held_devices",
            "Devices holding NoExecute through the budget's DeviceTaintRules (those being "
            "created or deleted counted), by driver.",
            "driver",
        )
        self.noexecute_waiting = metric.gauge(
            "drakit_controller_noexecute_waiting_devices",
            "Devices whose node plugin requests NoExecute but that hold NoSchedule because "
            "the eviction budget (per node or cluster-wide) is used up, by driver.",
            "driver",
        )

    def watch_claims(self, list_claims: Callable[[], Iterable[KubeObject]]) -> None:
        """Export the claim gauge counted from ``list_claims`` (recounted after changes)."""
        self._register_cached(_ClaimGauge(list_claims))

    def caches_changed(self) -> None:
        """Claims or slices changed: the next scrape (after the refresh interval) recounts."""
        for cached in self._cached:
            cached.changed()

    def _register_cached(self, collector: Collector) -> None:
        cached = CachedCollector(collector, min_interval=self._refresh_seconds)
        self._cached.append(cached)
        self.registry.register(cached)

    def watch_pools(
        self,
        list_slices: Callable[[], Iterable[KubeObject]],
        list_claims: Callable[[], Iterable[KubeObject]],
    ) -> None:
        """Export the pool and claim-by-namespace gauges from these caches at scrape time.

        Replaces the previous sources, so a controller rebuilt after a new leader election
        can call it again on the same registry.
        """
        self._pools.list_slices = list_slices
        self._pools.list_claims = list_claims
        self.caches_changed()
