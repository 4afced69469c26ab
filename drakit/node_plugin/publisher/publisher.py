"""The ResourceSlice publisher: keeps this node's slices equal to what the backend reports.

    publisher = Publisher(api, driver="gpu.example.com", node_name=node, backend=backend)
    publisher.start()      # returns at once; waits for the Node object in the background
    ...
    publisher.stop()       # slices stay: the kubelet wipes them when the driver is gone

How it works:

* A work queue keyed by pool name, one worker. A sync compares the backend's pool with the
  published slices (:class:`~drakit.node_plugin.publisher.sync.PoolSyncer`) and writes only the
  difference; a pool that matches costs no API call at all.
* The backend's ``on_change`` callback queues a re-discovery; only pools whose content changed
  are synced, and within a pool only slices whose content changed are written.
* With ``health``, every re-discovery (one every ``health_interval`` seconds, one when a
  dwell of the health policy ends, and one per change notice of the backend) is a health
  report for the health policy (:mod:`drakit.node_plugin.health`): devices it declares
  unhealthy get a ``<driver>/unhealthy`` taint with the policy's effect (value: the health
  reason), lifted when they recover. A node plugin never puts NoExecute on a device: where
  the policy says NoExecute the device carries NoSchedule and the request taint
  ``<driver>/noexecute-request`` (effect None), which the controller's NoExecute budget
  grants with a DeviceTaintRule (docs/health.md).
* Informers watch the driver's slices on this node (field selector ``spec.driver`` and
  ``spec.nodeName``; pools with per-device node selection by a label). Every event queues its
  pool after ``repair_delay`` seconds (default 0.5; the Go controller waits 30 s): an outside
  change or deletion, including the kubelet wiping the node's slices, is repaired within about
  a second, and a burst of events within the delay coalesces into one sync.
* An invalid pool description is reported once (log, metric, Event on the Node) and not
  retried until the backend reports a change; fields the apiserver drops are reported once
  and then accepted as stored, so they cause no update loop. API failures are retried with
  per-pool exponential backoff.
* Every such failure (a sync that failed, an invalid pool, dropped fields, a list or watch of
  the informers that failed) also goes to ``on_error`` as a recoverable
  :class:`~drakit.plugin.BackgroundError`: the error hook of an embedding program.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from drakit.allocator.model import TAINT_EFFECT_NONE, CounterSet, Device, DeviceTaint
from drakit.kubeapi.clusterversion import SliceFields, detect, slice_fields
from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.kubeapi.workqueue import RateLimiter, WorkQueue
from drakit.node_plugin.health.engine import DeviceTaintDecision, HealthEngine, PublishedTaint
from drakit.node_plugin.health.hysteresis import DeviceKey
from drakit.node_plugin.health.policy import HealthPolicy
from drakit.node_plugin.publisher.layout import InvalidPoolError
from drakit.node_plugin.publisher.metrics import PublisherMetrics
from drakit.node_plugin.publisher.node import NodeIdentity, read_node, wait_for_node
from drakit.node_plugin.publisher.sync import (
    PER_DEVICE_NODE_LABEL,
    PoolState,
    PoolSyncer,
    SyncResult,
)
from drakit.node_plugin.publisher.versionfields import trim_pool
from drakit.node_plugin.publisher.view import POOL_INDEX, SliceView, pool_index
from drakit.plugin.errors import BackgroundError, ErrorHandler
from drakit.telemetry.logs import get_logger
from drakit.telemetry.metrics import Registry

__all__ = ["DroppedFieldsError", "PoolDescriptionLike", "PoolSource", "Publisher"]

_log = get_logger(__name__)

#: The Node's declared feature (``status.declaredFeatures``) of KEP-5945, and what a pool
#: whose devices need no node preparation skips.
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"
SKIP_NODE_PREPARATION = ("NodePrepareResources", "NodeUnprepareResources")

#: Queue key that means "ask the backend again" (a pool name is never empty).
_RESCAN = ""
DEFAULT_REPAIR_DELAY = 0.5
DEFAULT_HEALTH_INTERVAL = 10.0


class DroppedFieldsError(Exception):
    """The apiserver stored less of a slice than was sent (what ``on_error`` gets for it)."""


class PoolDescriptionLike(Protocol):
    """What the publisher reads of a backend's pool.

    ``drakit.plugin.PoolDescription`` has this shape.
    """

    @property
    def name(self) -> str: ...

    @property
    def devices(self) -> Sequence[Device]: ...

    @property
    def shared_counters(self) -> Sequence[CounterSet]: ...


class HealthReport(Protocol):
    """One device's health (``drakit.plugin.DeviceHealth`` has this shape)."""

    @property
    def pool_name(self) -> str: ...

    @property
    def device_name(self) -> str: ...

    @property
    def health(self) -> Any: ...


class PoolSource(Protocol):
    """A backend: reports its pools and calls ``on_change`` when they may have changed."""

    def discover(self) -> Sequence[PoolDescriptionLike]: ...

    def subscribe(self, on_change: Callable[[], None]) -> Any: ...


class Publisher:
    """Publishes the backend's pools as ResourceSlices of ``driver`` on ``node_name``.

    ``start``/``stop`` may each be called once; ``resync`` asks the backend again and syncs
    every pool. ``on_error`` gets every failure to publish or watch (see above). Thread-safe.
    """

    def __init__(
        self,
        api: Any,
        driver: str,
        node_name: str,
        backend: PoolSource,
        *,
        registry: Registry | None = None,
        events: EventRecorder | None = None,
        repair_delay: float = DEFAULT_REPAIR_DELAY,
        node_retry_max_seconds: float = 10.0,
        health: Callable[[], Sequence[HealthReport]] | None = None,
        health_policy: HealthPolicy | None = None,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        slice_fields: SliceFields | None = None,
        detect_cluster: bool = False,
        clock: Callable[[], float] = time.monotonic,
        queue: WorkQueue[str] | None = None,
        on_error: ErrorHandler | None = None,
    ) -> None:
        """``slice_fields``: the optional fields this cluster keeps (None: all). With
        ``detect_cluster`` the publisher asks the apiserver at start instead
        (``drakit.kubeapi.clusterversion``); if that fails every field is published.

        ``clock`` times repair delays, retry backoff and the view of the publisher's own
        writes; ``queue`` (default: one made with ``clock``) holds the pools to sync. Tests
        pass both to step through the publisher's decisions (``WorkQueue.run_pending``).

        ``health_policy`` (default: NoSchedule at the first Unhealthy report, lifted once the
        device has been reported Healthy for 30 s) decides the taints of unhealthy devices;
        ``health`` is read at every re-discovery, every ``health_interval`` seconds (0: only
        on changes) and when a dwell of the policy ends. ``clock`` also times the dwells."""
        self.driver = driver
        self.slice_fields = slice_fields
        self._detect_cluster = detect_cluster
        self._withheld_reported: dict[str, str] = {}
        self.node_name = node_name
        self.metrics = PublisherMetrics(registry)
        self._api = api
        self._backend = backend
        self._slices = Resource(api, RESOURCE_SLICES)
        self._nodes = Resource(api, NODES)
        self._own_events = events is None
        self._events = events or EventRecorder(
            api,
            reporting_controller=f"{driver}/node-plugin",
            reporting_instance=f"{driver}-{node_name}",
        )
        self._repair_delay = repair_delay
        self._health = health
        self._health_interval = health_interval
        self.health = HealthEngine(
            driver,
            node_name,
            health_policy or HealthPolicy(),
            registry=self.metrics.registry,
            notify=self._note,
            clock=clock,
        )
        self.unhealthy_taint_key = self.health.taint_key
        self.noexecute_request_key = self.health.request_key
        self._health_seeded = False
        self._node_retry_max = node_retry_max_seconds
        self._informers = [
            Informer(
                self._slices,
                field_selector=f"spec.driver={driver},spec.nodeName={node_name}",
                indexers={POOL_INDEX: pool_index},
                name=f"resourceslices-{node_name}",
            ),
            Informer(
                self._slices,
                field_selector=f"spec.driver={driver},spec.nodeName=",
                label_selector=f"{PER_DEVICE_NODE_LABEL}={node_name}",
                indexers={POOL_INDEX: pool_index},
                name=f"resourceslices-{node_name}-per-device",
            ),
        ]
        self.view = SliceView(self._informers, clock=clock)
        # Retries back off to at most 30 s: a Node that comes back is published soon after.
        if queue is None:  # (not `queue or ...`: an empty queue is falsy)
            queue = WorkQueue(
                f"publisher-{driver}",
                rate_limiter=RateLimiter(max_delay=30.0, clock=clock),
                clock=clock,
            )
        self._queue: WorkQueue[str] = queue
        self._on_error = on_error
        self._lock = threading.Lock()
        self._desired: dict[str, PoolState] = {}
        self._invalid: dict[str, PoolState] = {}  # reported and not retried until it changes
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._scanned = threading.Event()  # the backend was asked at least once
        self._starter: threading.Thread | None = None
        self._syncer: PoolSyncer | None = None
        self.node: NodeIdentity | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Begin publishing; returns at once. Waits for the Node object in the background."""
        self._starter = threading.Thread(
            target=self._run_start, name="publisher-start", daemon=True
        )
        self._starter.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """True once the Node was found, the informers synced and the first sync was queued."""
        return self._ready.wait(timeout)

    def stop(self) -> None:
        """Stop watching and syncing. The published slices stay (the kubelet owns wiping)."""
        self._stop.set()
        self._queue.shutdown(wait=True, timeout=30.0)
        for informer in self._informers:
            informer.stop()
        if self._starter is not None and self._starter is not threading.current_thread():
            self._starter.join(timeout=30.0)
        if self._own_events:
            self._events.stop(timeout=5.0)

    def resync(self) -> None:
        """Ask the backend for its pools again and sync every pool (the changed ones write)."""
        self._queue.add(_RESCAN)

    def _detect_slice_fields(self) -> None:
        """Decide once, from the apiserver's version and gates, which fields to publish."""
        try:
            info = detect(self._api)
        except Exception as err:
            _log.warning("Cannot tell the cluster's Kubernetes version", error=str(err))
            return
        self.slice_fields = slice_fields(info)
        _log.info(
            "Publishing for the cluster's Kubernetes",
            version=info.git_version,
            counters=self.slice_fields.counters,
            consumable_capacity=self.slice_fields.consumable_capacity,
            binding_conditions=self.slice_fields.binding_conditions,
            taints=self.slice_fields.taints,
        )

    def _run_start(self) -> None:
        if self._detect_cluster:
            self._detect_slice_fields()
        node = wait_for_node(
            self._nodes, self.node_name, self._stop, max_delay=self._node_retry_max
        )
        if node is None:
            return
        self.node = node
        self.metrics.node_found.set(1)
        self._syncer = PoolSyncer(
            self._slices,
            self.driver,
            node,
            on_written=self.view.record_written,
            on_deleted=self.view.record_deleted,
            refresh_node=self._refresh_node,
        )
        for informer in self._informers:
            informer.add_handlers(
                EventHandlers(
                    on_add=lambda obj, _initial: self.slice_changed(obj),
                    on_update=lambda _old, new: self.slice_changed(new),
                    on_delete=lambda obj: self.slice_changed(obj, deleted=True),
                    on_error=lambda err: self._report("watch ResourceSlices", err),
                )
            )
            informer.start()
        for informer in self._informers:
            while not informer.wait_for_sync(timeout=1.0):
                if self._stop.is_set():
                    return
        self._queue.start(self._handle)
        self._backend.subscribe(self._on_backend_change)
        self._queue.add(_RESCAN)
        for pool in self.view.pool_names():
            self._queue.add(pool)
        self._ready.set()

    def _refresh_node(self) -> NodeIdentity:
        node = read_node(self._nodes, self.node_name)
        if self.node is not None and node.uid != self.node.uid:
            _log.warning(
                "The Node object was re-created; owning slices by its new UID",
                node=self.node_name,
                old_uid=self.node.uid,
                uid=node.uid,
            )
        self.node = node
        return node

    # -- events --------------------------------------------------------------------------------

    def _skippable_node_operations(self) -> tuple[str, ...]:
        """``spec.skipNodeOperations`` for a pool whose devices need no node preparation:
        both operations where the cluster keeps the field and this Node's kubelet declares
        the feature (the scheduler allocates such devices only there), else none (the
        kubelet then prepares them as any other)."""
        fields, node = self.slice_fields, self.node
        if fields is not None and not fields.skip_node_operations:
            return ()
        if node is None or OPTIONAL_NODE_OPERATIONS not in node.declared_features:
            return ()
        return SKIP_NODE_PREPARATION

    def _on_backend_change(self) -> None:
        self._queue.add(_RESCAN)

    def slice_changed(self, obj: KubeObject, deleted: bool = False) -> None:
        """An informer saw ``obj`` change (or go): unless it is the echo of the publisher's
        own write, its pool is synced after ``repair_delay`` (a burst is one sync)."""
        if self.view.observe(obj, deleted=deleted):
            return  # the echo of our own write
        for pool in pool_index(obj):
            self._queue.add_after(pool, self._repair_delay)

    # -- work ----------------------------------------------------------------------------------

    def _handle(self, key: str) -> None:
        try:
            if key == _RESCAN:
                self._rescan()
            else:
                self._sync_pool(key)
        except Exception as err:
            self._report("publish ResourceSlices", err)
            raise  # the queue logs it and retries the key with backoff

    def _report(self, what: str, err: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(BackgroundError(what, err, recoverable=True))

    def _rescan(self) -> None:
        pools = self._backend.discover()
        taints = self._health_taints()
        fresh: dict[str, PoolState] = {}
        for p in pools:
            devices = tuple(
                self._with_health_taint(d, taints.get((p.name, d.name))) for d in p.devices
            )
            trimmed = trim_pool(devices, self.slice_fields)
            self._report_withheld(p.name, trimmed.withheld)
            counters = tuple(p.shared_counters) if trimmed.counters else ()
            # Read as an optional attribute: a PoolDescriptionLike need not have it.
            prepared = getattr(p, "needs_node_preparation", True) is not False
            skip = () if prepared else self._skippable_node_operations()
            fresh[p.name] = PoolState(p.name, trimmed.devices, counters, skip)
        with self._lock:
            old = self._desired
            self._desired = fresh
        changed = {name for name in fresh if old.get(name) != fresh[name]}
        changed |= set(old) - set(fresh)
        for name in changed:
            self.metrics.published_devices.labels(name).set(
                len(fresh[name].devices) if name in fresh else 0
            )
            if self._syncer is not None:
                self._syncer.forget_pool(name)
        self._scanned.set()
        for name in sorted(changed):
            self._queue.add(name)
        self._schedule_health_report()

    def _schedule_health_report(self) -> None:
        """Read health again after the interval, or sooner when a dwell ends sooner."""
        if self._health is None:
            return
        delays = [self._health_interval] if self._health_interval > 0 else []
        due = self.health.next_due()
        if due is not None:
            delays.append(due)
        if delays:
            # One pending report at a time: add_after keeps the earlier of two due times.
            self._queue.add_after(_RESCAN, min(delays))

    def _report_withheld(self, pool: str, withheld: dict[str, str]) -> None:
        """Warn once per device and reason about devices this cluster cannot hold."""
        for device, reason in sorted(withheld.items()):
            key = f"{pool}/{device}"
            if self._withheld_reported.get(key) == reason:
                continue
            self._withheld_reported[key] = reason
            _log.warning("Device not published", pool=pool, device=device, reason=reason)

    def _health_taints(self) -> dict[DeviceKey, DeviceTaintDecision]:
        """The health policy's taint per device for the backend's current health report."""
        if self._health is None:
            return {}
        published = self._published_health_taints()
        if not self._health_seeded:
            self.health.seed(published)
            self._health_seeded = True
        return self.health.evaluate(self._health(), published)

    def _published_health_taints(self) -> dict[DeviceKey, PublishedTaint]:
        """The health taints this node's slices carry now (its own view: no API call)."""
        found: dict[DeviceKey, PublishedTaint] = {}
        for pool in self.view.pool_names():
            for obj in self.view.pool_slices(pool):
                for device in obj.get("spec", {}).get("devices") or ():
                    taints = [t for t in device.get("taints") or () if isinstance(t, dict)]
                    requested = any(t.get("key") == self.noexecute_request_key for t in taints)
                    for taint in taints:
                        if taint.get("key") == self.unhealthy_taint_key:
                            found[(pool, device.get("name", ""))] = PublishedTaint(
                                str(taint.get("value") or ""),
                                str(taint.get("effect") or ""),
                                str(taint.get("timeAdded") or ""),
                                noexecute_requested=requested,
                            )
        return found

    def _with_health_taint(self, device: Device, decision: DeviceTaintDecision | None) -> Device:
        """Add the policy's health taint, and the NoExecute request where the policy says
        NoExecute (a backend's own taint of the health key wins: then neither is added).
        The request's ``timeAdded`` is left to the apiserver, and kept by the sync while the
        request stays the same (key, value, effect): the controller ranks requests by it."""
        if decision is None or any(t.key == self.unhealthy_taint_key for t in device.taints):
            return device
        taints = [
            DeviceTaint(
                key=self.unhealthy_taint_key,
                value=decision.value,
                effect=decision.effect,
                time_added=decision.time_added,
            )
        ]
        if decision.noexecute_requested:
            taints.append(
                DeviceTaint(
                    key=self.noexecute_request_key,
                    value=decision.value,
                    effect=TAINT_EFFECT_NONE,
                )
            )
        return replace(device, taints=(*device.taints, *taints))

    def _sync_pool(self, pool: str) -> None:
        syncer = self._syncer
        if syncer is None or not self._scanned.is_set():
            return  # the first rescan queues every pool that needs a sync
        with self._lock:
            desired = self._desired.get(pool)
            if desired is not None and self._invalid.get(pool) == desired:
                return  # reported already; waits for the backend to change it
        try:
            with self.metrics.sync_seconds.time():
                result = syncer.sync(pool, desired, self.view.pool_slices(pool))
        except InvalidPoolError as err:
            self._report_invalid(pool, desired, err)
            return
        except ApiError:
            self.metrics.syncs_total.labels("error").inc()
            raise
        with self._lock:
            self._invalid.pop(pool, None)
        self._record(result)

    def _record(self, result: SyncResult) -> None:
        self.metrics.writes_total.labels("create").inc(result.created)
        self.metrics.writes_total.labels("update").inc(result.updated)
        self.metrics.writes_total.labels("delete").inc(result.deleted)
        self.metrics.syncs_total.labels("changed" if result.writes else "unchanged").inc()
        if result.writes:
            _log.info(
                "Published pool",
                pool=result.pool,
                generation=result.generation,
                slices=result.slice_count,
                created=result.created,
                updated=result.updated,
                deleted=result.deleted,
            )
        for dropped in result.dropped:
            self.metrics.dropped_fields_total.inc()
            _log.warning("ResourceSlice fields dropped by the apiserver", detail=str(dropped))
            self._warn("DroppedResourceSliceFields", str(dropped))
            self._report("publish ResourceSlices", DroppedFieldsError(str(dropped)))

    def _report_invalid(self, pool: str, desired: PoolState | None, err: InvalidPoolError) -> None:
        self.metrics.syncs_total.labels("invalid").inc()
        self.metrics.invalid_pools_total.inc()
        if desired is not None:
            with self._lock:
                self._invalid[pool] = desired
        _log.error(
            "Invalid device description from the backend; not publishing this pool until it "
            "changes",
            pool=pool,
            problems=list(err.reasons),
        )
        self._warn("InvalidDeviceDescription", str(err))
        self._report("publish ResourceSlices", err)

    def _warn(self, reason: str, note: str) -> None:
        node = self.node
        if node is None:
            return
        regarding = {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}
        self._events.warning(regarding, reason, "PublishResourceSlices", note)

    def _note(self, warning: bool, reason: str, note: str) -> None:
        """An Event of the health policy on the Node (where operators look for node trouble)."""
        node = self.node
        if node is None:
            return
        regarding = {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}
        record = self._events.warning if warning else self._events.normal
        record(regarding, reason, "DeviceHealthPolicy", note)
