"""Answering ResourcePoolStatusRequests (KEP-5677, resource.k8s.io/v1alpha3) without
kube-controller-manager.

In Kubernetes 1.37 kube-controller-manager's ``resourcepoolstatusrequest-controller`` (feature
gate ``DRAResourcePoolStatus``, alpha, off by default) fills in ``status`` of each request once;
the request is then complete and immutable. drakit's controller in ``--claim-generation all``
mode stands in for kube-controller-manager's DRA controllers, so it answers these requests too:
a user who creates one expects an answer, and without kube-controller-manager nobody else gives
it. Answering next to a running kube-controller-manager is harmless: whoever writes the status
first wins, the other's write fails (status is immutable once set) and it skips the request.

The status has upstream's shape and counts (checked against kube-controller-manager v1.37.2 by
tests/integration/devices/test_pool_status_agreement.py): per driver/pool, newest generation
only, ``totalDevices``, ``allocatedDevices`` (devices named by non-admin results, a shared
device once), ``unavailableDevices`` (NoSchedule/NoExecute taints, allocated or not),
``availableDevices = max(0, total - allocated - unavailable)``, ``nodeName`` when all slices
name the same node, ``shareableSummary`` for pools with multi-allocatable devices; an
incomplete pool gets a ``validationError`` and the request is retried until the driver has
published every slice. Not done: ``partitionSummary`` (needs ``partitionTypeAttribute``,
feature gate DRAPartitionableDevicesType), DeviceTaintRules, and the 1-hour deletion of
answered requests.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import Any

from drakit.allocator.model import ResourceSlice
from drakit.allocator.usage import DeviceUsage, UsageView, build_usage, capacity_use
from drakit.kubeapi.errors import ApiError, Conflict, Invalid, NotFound
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject, decodable, held_claims
from drakit.kubeapi.resources import RESOURCE_POOL_STATUS_REQUESTS, Resource
from drakit.kubeapi.workqueue import WorkQueue
from drakit.telemetry.logs import get_logger

__all__ = ["PoolStatusResponder", "pool_status"]

logger = get_logger(__name__)

DEFAULT_LIMIT = 100
INCOMPLETE_PREFIX = "PoolIncomplete:"
RETRY_INCOMPLETE_SECONDS = 2.0
MAX_MESSAGE = 256


def pool_status(
    spec: dict[str, Any], slices: Iterable[KubeObject], claims: Iterable[KubeObject]
) -> tuple[dict[str, Any], bool]:
    """The status for a request ``spec`` and whether a pool is still incomplete (retry)."""
    driver = str(spec.get("driver") or "")
    pool_filter = spec.get("poolName")
    limit = int(spec.get("limit") or DEFAULT_LIMIT)
    chosen = [
        s
        for s in decodable(ResourceSlice, slices)
        if s.driver == driver and (not pool_filter or s.pool.name == pool_filter)
    ]
    view = build_usage(chosen, held_claims(claims))
    pools = [_pool(driver, name, view, chosen) for name in sorted({s.pool.name for s in chosen})]
    incomplete = any(str(p.get("validationError", "")).startswith(INCOMPLETE_PREFIX) for p in pools)
    shown = pools[:limit]
    flagged = sum(1 for p in shown if "validationError" in p)
    message = f"Calculated status for {len(shown)} pools"
    if flagged:
        message += f" ({flagged} incomplete)"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {
        "poolCount": len(pools),
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "CalculationComplete",
                "message": message,
            }
        ],
    }
    if shown:
        status["pools"] = shown
    return status, incomplete


def _pool(driver: str, name: str, view: UsageView, slices: list[ResourceSlice]) -> dict[str, Any]:
    own = [s for s in slices if s.pool.name == name]
    generation = max(s.pool.generation for s in own)
    current = [s for s in own if s.pool.generation == generation]
    out: dict[str, Any] = {"driver": driver, "poolName": name, "generation": generation}
    nodes = {s.spec.node_name or "" for s in current}
    if len(nodes) == 1 and "" not in nodes:
        out["nodeName"] = nodes.pop()
    expected = max(s.pool.resource_slice_count for s in current)
    if len(current) < expected:
        message = (
            f"{INCOMPLETE_PREFIX} pool {driver}/{name} is incomplete: observed "
            f"{len(current)}/{expected} slices at generation {generation}"
        )
        out["validationError"] = message[:MAX_MESSAGE]
        return out
    devices = [u for u in view.devices if u.pool == name]
    allocated = sum(1 for u in devices if u.state in ("allocated", "shared"))
    unavailable = sum(1 for u in devices if u.blocked)
    out.update(
        resourceSliceCount=len(current),
        totalDevices=len(devices),
        allocatedDevices=allocated,
        availableDevices=max(0, len(devices) - allocated - unavailable),
        unavailableDevices=unavailable,
    )
    shared = [u for u in devices if u.capacity or _multi(u.device, current)]
    if shared:
        out["shareableSummary"] = _shareable(shared)
    return out


def _multi(device: str, slices: list[ResourceSlice]) -> bool:
    return any(d.name == device and d.multi_allocatable for s in slices for d in s.devices)


def _shareable(shared: list[DeviceUsage]) -> dict[str, Any]:
    capacity = [
        {
            "name": use.name,
            "total": str(use.total),
            "consumed": str(use.used),
            # zero, never negative, once everything is consumed
            "available": str(use.left if use.used < use.total else use.total - use.total),
        }
        for use in capacity_use(shared)
    ]
    busy = sum(1 for u in shared if u.state == "shared")
    out: dict[str, Any] = {
        "fullyAvailableDevices": len(shared) - busy,
        "partiallyAvailableDevices": busy,
    }
    if capacity:
        out["capacity"] = capacity
    return out


class PoolStatusResponder:
    """Watches ResourcePoolStatusRequests and fills in the status of unanswered ones."""

    def __init__(
        self,
        api: Any,
        *,
        list_slices: Callable[[], Iterable[KubeObject]],
        list_claims: Callable[[], Iterable[KubeObject]],
    ) -> None:
        self.requests = Resource(api, RESOURCE_POOL_STATUS_REQUESTS)
        self._list_slices = list_slices
        self._list_claims = list_claims
        self._informer: Informer | None = None
        self.queue: WorkQueue[str] = WorkQueue("drakit-pool-status")

    def start(self) -> bool:
        """Start answering; False (nothing started) when the apiserver does not serve the API."""
        try:
            self.requests.list(page_size=1)
        except NotFound:
            logger.info(
                "ResourcePoolStatusRequest API not served (feature gate DRAResourcePoolStatus "
                "and resource.k8s.io/v1alpha3 are off); not answering pool status requests"
            )
            return False
        except ApiError as err:
            logger.warning(
                "Cannot read ResourcePoolStatusRequests; not answering them", cause=str(err)
            )
            return False
        informer = Informer(self.requests, name="pool-status-requests")
        informer.add_handlers(
            EventHandlers(
                on_add=lambda obj, _initial: self._enqueue(obj),
                on_update=lambda _old, new: self._enqueue(new),
            )
        )
        informer.start()
        self._informer = informer
        self.queue.start(self.sync, workers=1)
        logger.info("Answering ResourcePoolStatusRequests")
        return True

    def stop(self) -> None:
        self.queue.shutdown(wait=True, timeout=10)
        if self._informer is not None:
            self._informer.stop()

    def _enqueue(self, request: KubeObject) -> None:
        if not request.get("status"):
            self.queue.add(str((request.get("metadata") or {}).get("name")))

    def sync(self, name: str) -> float | None:
        """Answer one request; returns a retry delay while a pool is incomplete."""
        assert self._informer is not None
        request = self._informer.store.get_by_name(name)
        if request is None or request.get("status"):
            return None
        status, incomplete = pool_status(
            request.get("spec") or {}, self._list_slices(), self._list_claims()
        )
        if incomplete:
            return RETRY_INCOMPLETE_SECONDS
        answered = {**request, "status": status}
        try:
            self.requests.update_status(answered)
        except (Conflict, Invalid, NotFound) as err:
            # Someone else (kube-controller-manager) answered first, or the request is gone.
            logger.info("Pool status request not answered by drakit", request=name, cause=str(err))
        return None
