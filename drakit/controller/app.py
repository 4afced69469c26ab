"""Wiring: caches, event handlers, two work queues, and the workers that sync keys.

Keys name what to sync. The *lifecycle* queue holds

- ``pod:<ns>/<name>``: generate the pod's claims, reserve claims of a pod bound elsewhere,
  or hand a finished pod's claims to the lifecycle;
- ``claim:<ns>/<name>``: the claim lifecycle;

and the *scheduling* queue holds

- ``schedule:<ns>/<name>``: one scheduling attempt for a pod that names drakit.

Each queue has workers of its own, so scheduling attempts (which may take seconds: selectors,
many nodes) never hold up claim generation or deletion. In both, namespaces take turns
(:mod:`drakit.kubeapi.fairqueue`): one namespace's backlog delays another namespace's next key by at
most one key per namespace with work waiting. An unschedulable pod backs off before its next
attempt (``drakit.controller.backoff``), also when an event wakes it.

A key is synced by one worker at a time; different keys in parallel. ``Controller.run`` starts
the informers, waits until every cache has listed (so no template looks missing and every
claim an earlier instance created is known), then starts the workers; it returns after
``stop`` is set. Run it only while holding the leader Lease (``drakit.controller.leader``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from drakit.allocator.features import Features
from drakit.controller.caches import Caches, CreatedClaims, DeletedPods
from drakit.controller.claimgen import ClaimGenerator
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.devicebook import DeviceBook
from drakit.controller.handover import MAX_RECHECK_SECONDS, GenerationGate
from drakit.controller.lifecycle import ClaimLifecycle
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import (
    claim_keys_of_pod,
    meta,
    pod_is_done,
)
from drakit.controller.noexecute.reconciler import Outcome
from drakit.controller.noexecute.runner import NoExecuteBudget
from drakit.controller.podfit.usage import NodeUsage, UsageChange
from drakit.controller.poolstatus import PoolStatusResponder
from drakit.controller.scheduler import PLACED_PODS, PodScheduler, needs_scheduling
from drakit.controller.waiting import CAPACITY, WaitingPods, claim_reason, class_reason
from drakit.kubeapi.clusterversion import features_for_cluster
from drakit.kubeapi.errors import ApiError, namespace_terminating
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.informer import EventHandlers
from drakit.kubeapi.leaseobserver import LeaseObserver, parse_lease_key
from drakit.kubeapi.objects import KubeObject, object_key, split_key
from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource
from drakit.kubeapi.workqueue import WorkQueue
from drakit.telemetry.logs import get_logger

__all__ = ["Controller"]

logger = get_logger(__name__)

POD, CLAIM, SCHEDULE = "pod", "claim", "schedule"


def key_namespace(key: str) -> str:
    """The namespace of the object a queue key names: the tenant the queues take turns by."""
    namespace, _, _ = key.partition(":")[2].partition("/")
    return namespace


def _allocator_features(api: Any, config: ControllerConfig) -> Features | None:
    """The configured features, else those of the cluster behind ``api``."""
    if config.allocator_features is not None or not config.detect_cluster:
        return config.allocator_features
    return features_for_cluster(api)


def _controller_manager_lease(api: Any, config: ControllerConfig) -> LeaseObserver | None:
    """The observer of kube-controller-manager's leader Lease (scoped mode), or None."""
    if config.claim_generation is not ClaimGeneration.SCOPED or not config.controller_manager_lease:
        return None
    namespace, name = parse_lease_key(config.controller_manager_lease)
    return LeaseObserver(api, namespace, name)


#: When the fence is closed a key waits this long; by then the replica stopped leading
#: (and exits) or renewed its Lease.
FENCED_RETRY_SECONDS = 1.0


class Controller:
    """One controller instance. ``run(stop)`` once; build a new instance to run again."""

    def __init__(
        self,
        api: Any,
        config: ControllerConfig,
        *,
        metrics: ControllerMetrics | None = None,
        events: EventRecorder | None = None,
        pods: Resource | None = None,
        claims: Resource | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or ControllerMetrics()
        self.caches = Caches(api, resync_period=config.resync_period)
        #: pod and claim keys: claim generation and lifecycle.
        self.queue: WorkQueue[str] = WorkQueue("drakit-controller", tenant_of=key_namespace)
        #: schedule keys, on workers of their own.
        self.scheduling: WorkQueue[str] = WorkQueue("drakit-scheduler", tenant_of=key_namespace)
        self.waiting = WaitingPods()
        self.events = events
        pods = pods or Resource(api, PODS)
        claims = claims or Resource(api, RESOURCE_CLAIMS)
        self.deleted_pods = DeletedPods()
        self.created = CreatedClaims()
        writer = ClaimWriter(claims)
        self.book = DeviceBook(
            list_slices=self.caches.slices.store.objects,
            list_classes=self.caches.classes.store.objects,
            get_claim=self.caches.claims.get,
            features=_allocator_features(api, config),
        )
        self.generator = ClaimGenerator(
            caches=self.caches,
            pods=pods,
            claims=claims,
            writer=writer,
            created=self.created,
            events=events,
            metrics=self.metrics,
            protect=lambda pod: config.schedules((pod.get("spec") or {}).get("schedulerName")),
        )
        self.gate = GenerationGate(config, _controller_manager_lease(api, config))
        self.lifecycle = ClaimLifecycle(
            caches=self.caches,
            pods=pods,
            claims=claims,
            writer=writer,
            deleted_pods=self.deleted_pods,
            config=config,
            metrics=self.metrics,
        )
        #: The pods placed on each node, for the scheduler's resource, port and affinity checks.
        self.usage = NodeUsage()
        self.scheduler = PodScheduler(
            caches=self.caches,
            book=self.book,
            writer=writer,
            pods=pods,
            events=events,
            metrics=self.metrics,
            waiting=self.waiting,
            config=config,
            usage=self.usage,
        )
        self._register_handlers()
        self._register_metric_handlers()
        self.metrics.watch_claims(self.caches.claims.list)
        self.metrics.watch_pools(self.caches.slices.store.objects, self.caches.claims.list)
        # Standing in for kube-controller-manager, drakit also answers its pool status API.
        self.pool_status: PoolStatusResponder | None = None
        if config.claim_generation is ClaimGeneration.ALL:
            self.pool_status = PoolStatusResponder(
                api,
                list_slices=self.caches.slices.store.objects,
                list_claims=self.caches.claims.list,
            )
        self.started = threading.Event()
        #: Whether this replica may act now (leader election sets it; default: always).
        self.fence: Callable[[], bool] = lambda: True
        # The NoExecute budget: the one decider of NoExecute for every driver's devices.
        self.noexecute: NoExecuteBudget | None = None
        if config.noexecute is not None:
            self.noexecute = NoExecuteBudget(
                api,
                config.noexecute,
                list_slices=self.caches.slices.store.objects,
                # Late-bound: leader election replaces self.fence after construction.
                fence=lambda: self.fence(),  # noqa: PLW0108
                # The rule's owner: the garbage collector deletes it with its Node.
                node_of=self.caches.nodes.store.get_by_name,
                on_outcome=self._noexecute_outcome,
            )

    # -- running -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Sync until ``stop`` is set; returns after the workers finished their current key."""
        self.scheduler.cancelled = stop.is_set
        self.caches.start()
        try:
            if not self.caches.wait_for_sync(stop):
                return
            logger.info(
                "Caches synced, starting workers",
                workers=self.config.workers,
                lifecycle_workers=self.config.lifecycle_workers,
            )
            self.queue.start(self.sync, workers=self.config.lifecycle_workers)
            self.scheduling.start(self.sync, workers=self.config.workers)
            if self.pool_status is not None:
                self.pool_status.start()
            if self.noexecute is not None:
                self.noexecute.start()
            self.started.set()
            while not stop.wait(1.0):
                self.metrics.queue_depth.set(len(self.queue) + len(self.scheduling))
        finally:
            self.queue.shutdown(wait=False)
            self.scheduling.shutdown(wait=False)
            self.queue.shutdown(wait=True, timeout=30)
            self.scheduling.shutdown(wait=True, timeout=30)
            if self.pool_status is not None:
                self.pool_status.stop()
            if self.noexecute is not None:
                self.noexecute.stop()
            self.caches.stop()
            logger.info("Controller stopped")

    def sync(self, key: str) -> float | None:
        """Sync one queue key; returns a requeue delay or None. Raises to retry with backoff.

        A write refused because the namespace is being deleted ends the key quietly: its
        objects are all going away, and a retry would only warn again.
        """
        if not self.fence():
            logger.warning("Not acting: the leader Lease may be lost", key=key)
            return FENCED_RETRY_SECONDS
        try:
            return self._sync_key(key)
        except ApiError as err:
            if not namespace_terminating(err):
                raise
            logger.debug("Namespace is terminating; dropping", key=key)
            return None

    def _sync_key(self, key: str) -> float | None:
        kind, _, object_key_ = key.partition(":")
        namespace, name = split_key(object_key_)
        assert namespace is not None
        if kind == CLAIM:
            self.lifecycle.sync_claim(namespace, name)
            return None
        pod = self.caches.pod(namespace, name)
        if pod is None:
            return None
        if kind == SCHEDULE:
            return self.scheduler.schedule(pod)
        return self._sync_pod(pod)

    def _sync_pod(self, pod: KubeObject) -> float | None:
        scheduler = (pod.get("spec") or {}).get("schedulerName")
        if pod_is_done(pod):
            if self.config.manages_claims_of(scheduler):
                for claim_key in claim_keys_of_pod(pod):
                    self.queue.add(f"{CLAIM}:{claim_key}")
            return None
        if not self.config.generates_for(scheduler):
            return None
        decision = self.gate.wait_before_generating(pod)
        if isinstance(decision, float):
            return decision
        if not self.generator.sync(pod, may_record=decision):
            return MAX_RECHECK_SECONDS  # kube-controller-manager took over: see it record them
        self.lifecycle.reserve_for_bound_pod(pod)
        return None

    # -- event handlers ------------------------------------------------------------------------

    def _register_handlers(self) -> None:
        c = self.caches
        c.pods.add_handlers(
            EventHandlers(
                on_add=lambda pod, _initial: self._pod_changed(pod),
                on_update=lambda _old, new: self._pod_changed(new),
                on_delete=self._pod_deleted,
            )
        )
        c.claims.add_handlers(
            EventHandlers(
                on_add=lambda claim, _initial: self._claim_changed(None, claim),
                on_update=self._claim_changed,
                on_delete=self._claim_deleted,
            )
        )
        c.templates.add_handlers(
            EventHandlers(
                on_add=lambda t, _initial: self._template_changed(t),
                on_update=lambda _old, new: self._template_changed(new),
            )
        )
        c.slices.add_handlers(
            EventHandlers(
                on_add=lambda _s, _initial: self._slices_changed(),
                on_update=self._slices_changed,
                on_delete=lambda _s: self.book.invalidate_inventory(),
            )
        )
        c.classes.add_handlers(
            EventHandlers(
                on_add=lambda cls, _initial: self._class_changed(cls),
                on_update=lambda _old, new: self._class_changed(new),
                on_delete=lambda _cls: self.book.invalidate_classes(),
            )
        )
        c.nodes.add_handlers(
            EventHandlers(
                on_add=lambda _n, _initial: self._wake(CAPACITY),
                on_update=self._node_changed,
            )
        )

    def _pod_changed(self, pod: KubeObject) -> None:
        self._placements_changed(self.usage.observe(pod))
        key = object_key(pod)
        spec = pod.get("spec") or {}
        if spec.get("resourceClaims") or (pod.get("status") or {}).get(
            "extendedResourceClaimStatus"
        ):
            self.queue.add(f"{POD}:{key}")
        if needs_scheduling(pod, self.config.scheduler_name):
            self._queue_attempt(key)

    def _pod_deleted(self, pod: KubeObject) -> None:
        uid = str(meta(pod).get("uid"))
        scheduler = str((pod.get("spec") or {}).get("schedulerName") or "")
        self.deleted_pods.add(uid, scheduler)
        self._placements_changed(self.usage.forget(pod))
        self.created.forget_pod(uid)
        self.waiting.unpark(object_key(pod))
        self.scheduler.backoff.forget(object_key(pod))
        if self.config.manages_claims_of(scheduler):
            for claim_key in claim_keys_of_pod(pod):
                self.queue.add(f"{CLAIM}:{claim_key}")
            # A claim generated for the pod but not yet recorded in its status (the pod went
            # between the claim's creation and the status write) is found by its owner; it
            # would otherwise wait for the next resync to be deleted.
            namespace = str(meta(pod).get("namespace") or "")
            for claim in self.caches.claims_owned_by(namespace, uid):
                self.queue.add(f"{CLAIM}:{object_key(claim)}")

    def _placements_changed(self, change: UsageChange) -> None:
        """A pod left a node (room, ports and anti-affinity domains freed) or came to one
        (another pod's affinity or spread may now be met)."""
        if change.removed:
            self._wake(CAPACITY)
        if change.added or change.removed:
            self._wake(PLACED_PODS)

    def _claim_changed(self, old: KubeObject | None, claim: KubeObject) -> None:
        self.book.claim_changed(claim)
        namespace, name = str(meta(claim).get("namespace")), str(meta(claim).get("name"))
        self.queue.add(f"{CLAIM}:{namespace}/{name}")
        for pod in self.caches.pods_using_claim(namespace, name):
            if (pod.get("spec") or {}).get("nodeName"):
                self.queue.add(f"{POD}:{object_key(pod)}")  # maybe a pod bound elsewhere
        self._wake(claim_reason(namespace, name))
        was_allocated = old is not None and (old.get("status") or {}).get("allocation")
        if was_allocated and not (claim.get("status") or {}).get("allocation"):
            self._wake(CAPACITY)  # a deallocation frees devices

    def _claim_deleted(self, claim: KubeObject) -> None:
        self.book.claim_deleted(claim)
        namespace, name = str(meta(claim).get("namespace")), str(meta(claim).get("name"))
        for pod in self.caches.pods_using_claim(namespace, name):
            self.queue.add(f"{POD}:{object_key(pod)}")  # a generated claim may be needed again
        self._wake(claim_reason(namespace, name))
        if (claim.get("status") or {}).get("allocation"):
            self._wake(CAPACITY)

    def _template_changed(self, template: KubeObject) -> None:
        namespace, name = str(meta(template).get("namespace")), str(meta(template).get("name"))
        for pod in self.caches.pods_using_template(namespace, name):
            self.queue.add(f"{POD}:{object_key(pod)}")

    def _slices_changed(self, old: KubeObject | None = None, new: KubeObject | None = None) -> None:
        if old is not None and new is not None and old.get("spec") == new.get("spec"):
            return  # a resync or a metadata-only change
        self.book.invalidate_inventory()
        self._wake(CAPACITY)
        if self.noexecute is not None:
            self.noexecute.kick()

    def _class_changed(self, device_class: KubeObject) -> None:
        self.book.invalidate_classes()
        self._wake(class_reason(str(meta(device_class).get("name"))))
        self._wake(CAPACITY)

    def _node_changed(self, old: KubeObject, new: KubeObject) -> None:
        if _scheduling_view(old) != _scheduling_view(new):
            self._wake(CAPACITY)

    def _noexecute_outcome(self, driver: str, outcome: Outcome) -> None:
        self.metrics.noexecute_held.labels(driver).set(outcome.plan.held)
        self.metrics.noexecute_waiting.labels(driver).set(len(outcome.plan.waiting))

    def _wake(self, reason: str) -> None:
        for pod_key in self.waiting.wake(reason):
            self._queue_attempt(pod_key)

    def _queue_attempt(self, pod_key: str) -> None:
        """Queue a scheduling attempt, once the pod's backoff (if any) has run out."""
        self.scheduling.add_after(
            f"{SCHEDULE}:{pod_key}", self.scheduler.backoff.remaining(pod_key)
        )

    def _register_metric_handlers(self) -> None:
        """The pool and claim gauges are recounted only after claims or slices changed."""
        changed = EventHandlers(
            on_add=lambda _obj, _initial: self.metrics.caches_changed(),
            on_update=lambda _old, _new: self.metrics.caches_changed(),
            on_delete=lambda _obj: self.metrics.caches_changed(),
        )
        self.caches.claims.add_handlers(changed)
        self.caches.slices.add_handlers(changed)


def _scheduling_view(node: KubeObject) -> tuple[Any, ...]:
    """The parts of a Node that node filtering reads."""
    conditions = [
        c.get("status")
        for c in (node.get("status") or {}).get("conditions") or ()
        if c.get("type") == "Ready"
    ]
    spec = node.get("spec") or {}
    return (meta(node).get("labels"), spec.get("taints"), spec.get("unschedulable"), conditions)
