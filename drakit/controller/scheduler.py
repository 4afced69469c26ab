"""Allocation and binding for pods whose ``spec.schedulerName`` names drakit.

One scheduling attempt for a pod whose claims all exist:

1. **decide**: read the claims and snapshot the allocated state under the device book's
   lock; outside it, filter nodes (readiness, taints, selector, affinity, host ports,
   resource requests, topology spread, pod affinity: ``drakit.controller.nodefilter``; the node
   selectors of claims that are already allocated), then try nodes in turn, starting after
   the node the previous pod got, until the allocator fits every unallocated claim on one;
   under the lock again, confirm the choice against the live state (devices and the placed
   pods), count the pod on the node (*assumed*, so two decisions never overfill a node) and
   register the allocations as *in flight* (so two decisions never hand out one device);
2. **write** (outside the lock, pods in parallel): for each new allocation, finalizer then
   allocation + reservation in one status write that tests for the finalizer; for claims that
   were already allocated, append the pod to ``reservedFor``; assume each written claim, then
   end its in-flight period;
3. **bind** the pod (``pods/binding`` with its UID as precondition).

A claim that another pod is allocating right now makes this pod wait for that claim instead of
allocating it twice. A pod that fits nowhere gets ``PodScheduled=False`` with a message that
counts the reasons per node, and waits for an event that may help. A pod that uses a feature
kube-scheduler's filters check and drakit does not (``drakit.controller.podfit.unsupported``) gets
``PodScheduled=False`` naming the feature and is never bound.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from drakit.allocator.allocate import (
    AllocationCancelledError,
    AllocationError,
    AllocationTimeoutError,
    Allocator,
    NodeUnsuitableError,
)
from drakit.allocator.allocated import AllocatedState
from drakit.allocator.model import ModelError, Node, NodeSelector, ResourceClaim
from drakit.allocator.nodeselector import NodeSelectorError, node_selector_matches
from drakit.controller.backoff import PodBackoff
from drakit.controller.caches import Caches
from drakit.controller.claimwrites import ClaimWriteError, ClaimWriter
from drakit.controller.config import ControllerConfig
from drakit.controller.devicebook import DeviceBook, claim_model, decode_claim_model
from drakit.controller.explanation import summarise
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import (
    FIELD_MANAGER,
    age_seconds,
    consumer_ref,
    is_for_pod,
    is_reserved_for,
    meta,
    pod_is_terminal,
    resolve_claim_name,
)
from drakit.controller.nodefilter import ClusterView, NodeFilter
from drakit.controller.podfit.affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
)
from drakit.controller.podfit.podinfo import PodInfo
from drakit.controller.podfit.spread import REASON_SPREAD
from drakit.controller.podfit.usage import NodeUsage
from drakit.controller.waiting import CAPACITY, WaitingPods, claim_reason, class_reason
from drakit.kubeapi.assume_cache import AssumeCacheError
from drakit.kubeapi.errors import ApiError, Conflict, NotFound
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import PatchType, Resource, bind_pod
from drakit.telemetry.logs import get_logger

__all__ = ["PLACED_PODS", "PodScheduler", "needs_scheduling"]

logger = get_logger(__name__)

#: A pod waiting for another pod's in-flight allocation of a shared claim looks again after this.
IN_FLIGHT_RETRY = 0.2
#: Searches outside the book's lock that may lose a race before one is made under it.
OPTIMISTIC_ATTEMPTS = 3
#: Unschedulable pods are tried again after this even without a helpful event (a safety net).
UNSCHEDULABLE_RETRY = 60.0
REASON_NO_DEVICES = "node(s) cannot allocate all claims"
REASON_CLAIM_NODE = "node(s) didn't match the node selector of an allocated claim"
REASON_INVALID_POOLS = "node(s) see invalid resource pools"
#: Parks pods that placed pods' affinity or spread rejected: a newly placed pod may help.
PLACED_PODS = "placed-pods"
_PLACED_POD_REASONS = frozenset(
    {REASON_AFFINITY, REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY, REASON_SPREAD}
)
_DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"


def needs_scheduling(pod: KubeObject, scheduler_name: str) -> bool:
    """True for a pod that names this scheduler, is not bound, not finished, not deleted."""
    spec = pod.get("spec") or {}
    return (
        spec.get("schedulerName") == scheduler_name
        and not spec.get("nodeName")
        and not pod_is_terminal(pod)
        and not meta(pod).get("deletionTimestamp")
    )


class _WaitError(Exception):
    """The pod cannot be scheduled yet; something it waits for will change."""

    def __init__(self, reasons: set[str], message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.reasons = frozenset(reasons)
        self.retry_after = retry_after


class _UnschedulableError(_WaitError):
    """No node fits: reported on the pod as PodScheduled=False.

    ``failed_claim`` ("namespace/name") names the claim whose own content failed the
    allocation (a selector that does not compile, errs or exceeds its budget): it also
    gets a Warning Event.
    """

    def __init__(self, reasons: set[str], message: str, failed_claim: str = "") -> None:
        super().__init__(reasons, message, UNSCHEDULABLE_RETRY)
        self.failed_claim = failed_claim


@dataclass
class _ClaimView:
    """A pod's claims as read under the book's lock."""

    pending: list[KubeObject] = field(default_factory=list)  # to allocate
    models: list[ResourceClaim] = field(default_factory=list)  # of ``pending``
    selectors: list[NodeSelector] = field(default_factory=list)  # of allocated claims
    reserve: list[KubeObject] = field(default_factory=list)  # allocated, pod not reserved yet

    @property
    def pending_uids(self) -> list[str]:
        return [str(meta(c).get("uid")) for c in self.pending]


@dataclass
class _Decision:
    node: str
    pod: PodInfo
    allocate: list[tuple[KubeObject, dict[str, Any]]] = field(default_factory=list)
    reserve: list[KubeObject] = field(default_factory=list)


class PodScheduler:
    """Schedules one pod per ``schedule`` call; calls for different pods may run in parallel."""

    def __init__(
        self,
        *,
        caches: Caches,
        book: DeviceBook,
        writer: ClaimWriter,
        pods: Resource,
        events: EventRecorder | None,
        metrics: ControllerMetrics,
        waiting: WaitingPods,
        config: ControllerConfig,
        usage: NodeUsage | None = None,
    ) -> None:
        self._caches = caches
        #: The pods placed on each node (the controller feeds it from pod events).
        self.usage = usage if usage is not None else NodeUsage()
        self._book = book
        self._writer = writer
        self._pods = pods
        self._events = events
        self._metrics = metrics
        self._waiting = waiting
        self._config = config
        self._cursor = 0
        #: Unschedulable pods back off before their next attempt (the controller reads it
        #: when a helpful event wakes a pod).
        self.backoff = PodBackoff(initial=config.initial_backoff, maximum=config.max_backoff)
        self._attempt = threading.local()  # this thread's attempt: its deadline
        # Set by the controller to its stop event's is_set: an allocation in progress
        # (a long selector evaluation included) ends when the controller stops.
        self.cancelled: Callable[[], bool] = lambda: False

    def schedule(self, pod: KubeObject) -> float | None:
        """One attempt; returns seconds after which to try again (None: wait for events).

        Raises on API errors (the work queue retries with backoff).
        """
        if not needs_scheduling(pod, self._config.scheduler_name):
            self._waiting.unpark(_pod_key(pod))
            self.backoff.forget(_pod_key(pod))
            return None
        began = time.monotonic()
        self._attempt.deadline = began + self._config.attempt_timeout
        result = "error"
        try:
            info = _pod_info(pod)
            claims = self._claims_of(pod)
            self._evaluate_guarded_selectors(claims)
            decision = self._decide(pod, info, claims)
            self._execute(pod, decision)
            result = "scheduled"
            self._waiting.unpark(_pod_key(pod))
            self.backoff.forget(_pod_key(pod))
            return None
        except _UnschedulableError as unschedulable:
            result = "unschedulable"
            self._waiting.park(_pod_key(pod), unschedulable.reasons)
            backoff = self.backoff.failed(_pod_key(pod))
            self._report_unschedulable(pod, str(unschedulable))
            self._report_failed_claim(unschedulable.failed_claim, str(unschedulable))
            return max(backoff, unschedulable.retry_after or 0.0)
        except _WaitError as wait:
            result = "waiting"
            self._waiting.park(_pod_key(pod), wait.reasons)
            logger.debug("Pod waits", pod=_pod_key(pod), reason=str(wait))
            return wait.retry_after
        finally:
            self._metrics.scheduling_attempts.labels(result).inc()
            self._metrics.scheduling_attempt_duration.labels(result).observe(
                time.monotonic() - began
            )

    def _allocation_timeout(self) -> float:
        """Seconds the next allocator call may take: the per-node limit, cut to what is left
        of this attempt's budget; _UnschedulableError once the budget is spent."""
        deadline: float = self._attempt.deadline
        left = deadline - time.monotonic()
        if left <= 0:
            raise _UnschedulableError(
                {CAPACITY},
                f"scheduling attempt used up its time budget of {self._config.attempt_timeout:g}s",
            )
        return min(self._config.allocation_timeout, left)

    # -- claims --------------------------------------------------------------------------------

    def _claims_of(self, pod: KubeObject) -> list[KubeObject]:
        """The pod's claims, each once; raises _WaitError when one is not usable (yet)."""
        namespace = str(meta(pod).get("namespace"))
        found: dict[str, KubeObject] = {}
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
            try:
                resolved = resolve_claim_name(pod, pod_claim)
            except ValueError as err:
                raise _UnschedulableError(set(), str(err)) from None
            if resolved.pending:
                raise _WaitError(
                    {"pod"}, f"claim for {pod_claim.get('name')!r} not generated yet", None
                )
            if resolved.name is None:
                continue
            reason = claim_reason(namespace, resolved.name)
            claim = self._caches.claim(namespace, resolved.name)
            if claim is None:
                raise _WaitError(
                    {reason}, f"waiting for ResourceClaim {namespace}/{resolved.name}", None
                )
            if meta(claim).get("deletionTimestamp"):
                raise _UnschedulableError(
                    {reason}, f"ResourceClaim {namespace}/{resolved.name} is being deleted"
                )
            if resolved.generated and not is_for_pod(pod, claim):
                raise _UnschedulableError(
                    {reason},
                    f"ResourceClaim {namespace}/{resolved.name} was not created for this pod",
                )
            found[resolved.name] = claim
        return list(found.values())

    # -- decision ------------------------------------------------------------------------------

    def _evaluate_guarded_selectors(self, claims: list[KubeObject]) -> None:
        """Evaluate the expensive (guarded) selectors of the unallocated claims outside the
        decision lock: one claim's costly selectors then never hold up other pods'
        decisions, which find their answers cached."""
        models = [
            m
            for c in claims
            if not (c.get("status") or {}).get("allocation") and (m := claim_model(c)) is not None
        ]
        if not models:
            return
        allocator = Allocator(self._book.inventory(), self._book.classes(), self._book.state)
        try:
            allocator.evaluate_guarded_selectors(
                models, timeout=self._allocation_timeout(), cancelled=self.cancelled
            )
        except AllocationTimeoutError:
            return  # the decision runs into the same limit and reports it
        except AllocationCancelledError:
            raise _WaitError({CAPACITY}, "controller stopping", None) from None

    def _decide(self, pod: KubeObject, info: PodInfo, claims: list[KubeObject]) -> _Decision:
        """Pick a node and register the new allocations in flight.

        kube-scheduler's pattern: read the claims and snapshot the allocated state under
        the book's lock, search the nodes outside it (informer events and other workers go
        on meanwhile), then under the lock again confirm the choice (same generation, or the
        chosen node re-checked against the live state) and register it. After
        ``OPTIMISTIC_ATTEMPTS`` lost races the whole decision is made under the lock.

        The placed pods are confirmed the same way: under the lock the chosen node is checked
        again against the live placements and the pod is assumed on it. Every assume happens
        under the book's lock, so two decisions never both take a node's last room.
        """
        for _ in range(OPTIMISTIC_ATTEMPTS):
            view, generation, node, results = self._search(pod, info, claims)
            with self._book.lock:
                now = self._claim_view(pod, claims)
                if now.pending_uids != view.pending_uids or now.selectors != view.selectors:
                    continue  # the pod's claims changed meanwhile
                if view.models and self._book.generation != generation:
                    rechecked = self._recheck(node, now.models)
                    if rechecked is None:
                        continue  # the devices went to someone else: search again
                    results = rechecked
                if not self._place(pod, info, node):
                    continue  # another pod took the room meanwhile: search again
                return self._register_placed(node, info, now, results)
        with self._book.lock:
            view = self._claim_view(pod, claims)
            node, results = self._pick_node(
                pod, info, view.models, view.selectors, self._book.state
            )
            if not self._place(pod, info, node):
                raise _WaitError({CAPACITY}, f"node {node} filled up meanwhile", IN_FLIGHT_RETRY)
            return self._register_placed(node, info, view, results)

    def _search(
        self, pod: KubeObject, info: PodInfo, claims: list[KubeObject]
    ) -> tuple[_ClaimView, int, str, list[Any]]:
        """Search for a node on a copy of the allocated state, outside the book's lock.

        The copy may lag the live state (``DeviceBook.snapshot``): a node found on it is
        confirmed by the caller, and "no node fits" is only concluded on a copy that was
        current when taken. Otherwise a pod could wait for an event that freed devices
        before its attempt began, and that will not come again.
        """
        with self._book.lock:
            view = self._claim_view(pod, claims)
            generation, state = self._book.snapshot()
            lagging = generation != self._book.generation
        try:
            node, results = self._pick_node(pod, info, view.models, view.selectors, state)
        except _UnschedulableError:
            if not lagging:
                raise
            with self._book.lock:
                view = self._claim_view(pod, claims)
                generation, state = self._book.snapshot(current=True)
            node, results = self._pick_node(pod, info, view.models, view.selectors, state)
        return view, generation, node, results

    def _cluster_view(self) -> ClusterView:
        return ClusterView(
            usage=self.usage,
            nodes=self._caches.nodes.store.objects,
            dra_extended=self._dra_extended_resources(),
        )

    def _dra_extended_resources(self) -> frozenset[str]:
        """The extended resource names DeviceClasses map (kube-scheduler would have DRA
        serve a request for one that a node does not list)."""
        names: set[str] = set()
        for name, device_class in self._book.classes().items():
            names.add(_DEVICE_CLASS_RESOURCE_PREFIX + name)
            if device_class.spec.extended_resource_name:
                names.add(device_class.spec.extended_resource_name)
        return frozenset(names)

    def _place(self, pod: KubeObject, info: PodInfo, node_name: str) -> bool:
        """Check ``node_name`` again against the live placements and, when the pod still
        fits, count it there. Call under the book's lock."""
        node = self._caches.nodes.store.get_by_name(node_name)
        if node is None:
            return False
        if NodeFilter(pod, self._cluster_view(), info).reject_reasons(node):
            return False
        self.usage.assume(info, node_name)
        return True

    def _claim_view(self, pod: KubeObject, claims: list[KubeObject]) -> _ClaimView:
        """The pod's claims as the cache holds them now. Call under the book's lock."""
        uid = str(meta(pod).get("uid"))
        namespace = str(meta(pod).get("namespace"))
        view = _ClaimView()
        for read_before in claims:
            # Read again under the lock: another pod may have allocated it meanwhile.
            claim = self._caches.claim(namespace, str(meta(read_before)["name"])) or read_before
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                if allocation.get("nodeSelector"):
                    view.selectors.append(NodeSelector.from_dict(allocation["nodeSelector"]))
                if not is_reserved_for(claim, uid):
                    view.reserve.append(claim)
                continue
            if self._book.in_flight(str(meta(claim).get("uid"))) is not None:
                name = str(meta(claim).get("name"))
                raise _WaitError(
                    {claim_reason(namespace, name)},
                    f"ResourceClaim {namespace}/{name} is being allocated for another pod",
                    IN_FLIGHT_RETRY,
                )
            view.pending.append(claim)
        view.models = self._models(view.pending)
        return view

    def _recheck(self, node_name: str, models: list[ResourceClaim]) -> list[Any] | None:
        """Allocate on the chosen node against the live state (under the book's lock)."""
        node = self._caches.nodes.store.get_by_name(node_name) if models else None
        if node is None:
            return None
        allocator = Allocator(self._book.inventory(), self._book.classes(), self._book.state)
        try:
            return allocator.allocate(
                Node.named(node_name, meta(node).get("labels") or {}),
                models,
                timeout=self._allocation_timeout(),
                cancelled=self.cancelled,
            )
        except AllocationCancelledError:
            raise _WaitError({CAPACITY}, "controller stopping", None) from None
        except AllocationError:
            return None  # the next search reports it

    def _register_placed(
        self, node: str, info: PodInfo, view: _ClaimView, results: list[Any]
    ) -> _Decision:
        """``_register`` for a pod assumed on ``node``: a failure un-assumes it."""
        try:
            return self._register(node, info, view, results)
        except BaseException:
            self.usage.forget_assumed(info.uid)
            raise

    def _register(
        self, node: str, info: PodInfo, view: _ClaimView, results: list[Any]
    ) -> _Decision:
        """Record the decision's allocations as in flight. Call under the book's lock."""
        decision = _Decision(node=node, pod=info, reserve=view.reserve)
        for claim, pending, result in zip(view.pending, view.models, results, strict=True):
            allocation = result.to_dict()
            written = {
                **claim,
                "status": {**(claim.get("status") or {}), "allocation": allocation},
            }
            # The pending claim's model with the new allocation: the same as decoding
            # ``written``, without decoding it.
            model = replace(pending, status=replace(pending.status, allocation=result))
            self._book.begin(written, model)
            decision.allocate.append((claim, allocation))
        return decision

    def _models(self, claims: list[KubeObject]) -> list[ResourceClaim]:
        classes = self._book.classes()
        models: list[ResourceClaim] = []
        for claim in claims:
            model = decode_claim_model(claim)
            if isinstance(model, ModelError):
                raise _UnschedulableError(
                    set(), f"ResourceClaim {_key(claim)} cannot be decoded: {model}"
                )
            missing = sorted(_class_names(model) - set(classes))
            if missing:
                raise _UnschedulableError(
                    {class_reason(n) for n in missing},
                    f"ResourceClaim {_key(claim)}: DeviceClass {', '.join(missing)} not found",
                )
            models.append(model)
        return models

    def _pick_node(
        self,
        pod: KubeObject,
        info: PodInfo,
        models: list[ResourceClaim],
        selectors: list[NodeSelector],
        state: AllocatedState,
    ) -> tuple[str, list[Any]]:
        store = self._caches.nodes.store
        # Names only (Nodes are cluster-scoped: the key is the name), sorted as strings: the
        # store lists them in API order already, so this is close to linear; each Node is
        # looked up only when visited (first fit visits few).
        names = sorted(store.all_keys())
        if not names:
            raise _UnschedulableError({CAPACITY}, "0/0 nodes are available: no nodes")
        rejected: Counter[str] = Counter()
        try:
            node_filter = NodeFilter(pod, self._cluster_view(), info)
        except ValueError as err:
            raise _UnschedulableError({"pod"}, f"pod spec cannot be used: {err}") from None
        allocator = (
            Allocator(self._book.inventory(), self._book.classes(), state) if models else None
        )
        start = self._cursor % len(names)
        no_fit: list[Node] = []
        for offset in range(len(names)):
            name = names[(start + offset) % len(names)]
            node = store.get_by_name(name)
            if node is None:
                continue  # deleted since the names were read
            reasons = node_filter.reject_reasons(node)
            if reasons:
                rejected.update(reasons)
                continue
            reason = None
            if not _matches_all(selectors, node):
                reason = REASON_CLAIM_NODE
            if reason is None and allocator is not None:
                model_node = Node.named(name, meta(node).get("labels") or {})
                try:
                    results = allocator.allocate(
                        model_node,
                        models,
                        timeout=self._allocation_timeout(),
                        cancelled=self.cancelled,
                    )
                except NodeUnsuitableError:
                    reason = REASON_INVALID_POOLS
                except AllocationCancelledError:
                    raise _WaitError({CAPACITY}, "controller stopping", None) from None
                except AllocationError as err:
                    raise _UnschedulableError(
                        {CAPACITY}, f"cannot allocate: {err}", failed_claim=err.claim
                    ) from None
                else:
                    if results is None:
                        reason = REASON_NO_DEVICES
                        no_fit.append(model_node)
                    else:
                        self._cursor = start + offset + 1
                        return name, results
            if reason is None:
                self._cursor = start + offset + 1
                return name, []
            rejected[reason] += 1
        raise _no_node_fits(len(names), rejected, allocator, no_fit, models)

    # -- writes and bind -----------------------------------------------------------------------

    def _execute(self, pod: KubeObject, decision: _Decision) -> None:
        """Write the claims and bind; the pod stays assumed on the node only when bound."""
        bound = False
        try:
            self._write_claims(pod, decision)
            bound = self._bind(pod, decision.node)
        finally:
            if not bound:
                self.usage.forget_assumed(decision.pod.uid)

    def _write_claims(self, pod: KubeObject, decision: _Decision) -> None:
        consumer = consumer_ref(pod)
        unfinished = {str(meta(c)["uid"]): _key(c) for c, _ in decision.allocate}
        try:
            for claim, allocation in decision.allocate:
                try:
                    written = self._writer.allocate_and_reserve(claim, allocation, consumer)
                except ClaimWriteError as err:
                    raise _WaitError(
                        {claim_reason(*_key(claim).split("/"))}, str(err), 0.5
                    ) from err
                except ApiError:
                    self._settle(claim)  # the write may have landed: do not free its devices
                    raise
                self._assume(written)
                uid = str(meta(claim)["uid"])
                self._book.finish(uid, unfinished.pop(uid))
            for claim in decision.reserve:
                try:
                    self._assume(self._writer.reserve(claim, consumer))
                except ClaimWriteError as err:
                    raise _WaitError(
                        {claim_reason(*_key(claim).split("/"))}, str(err), 0.5
                    ) from err
        finally:
            for uid, key in unfinished.items():
                self._book.finish(uid, key)

    def _bind(self, pod: KubeObject, node: str) -> bool:
        """Bind ``pod`` to ``node``; True when it is bound there (False: deleted, or bound
        to another node by an earlier attempt)."""
        namespace, name = str(meta(pod)["namespace"]), str(meta(pod)["name"])
        try:
            bind_pod(self._pods, namespace, name, node, uid=str(meta(pod)["uid"]))
        except Conflict:
            # Bound already: by an earlier attempt whose answer was lost, or an attempt that
            # ran on a stale copy of the pod. Either way there is nothing left to do.
            current = self._pods.get(name, namespace)
            bound_to = (current.get("spec") or {}).get("nodeName")
            if not bound_to:
                raise
            logger.info("Pod was bound already", pod=f"{namespace}/{name}", node=bound_to)
            return bool(bound_to == node)
        except NotFound:
            return False  # deleted meanwhile: the lifecycle releases its claims
        age = age_seconds(pod)
        if age is not None:
            self._metrics.pod_scheduling_latency.observe(max(0.0, age))
        if self._events is not None:
            self._events.normal(
                pod, "Scheduled", "Binding", f"Successfully assigned {namespace}/{name} to {node}"
            )
        logger.info("Bound pod", pod=f"{namespace}/{name}", node=node)
        return True

    def _settle(self, claim: KubeObject) -> None:
        """After a write with an unknown outcome: put the claim as stored into the cache."""
        with contextlib.suppress(ApiError, ClaimWriteError):
            self._assume(self._writer.fresh(claim))

    def _assume(self, claim: KubeObject) -> None:
        with contextlib.suppress(AssumeCacheError):  # the informer has something newer
            self._caches.claims.assume(claim)

    def _report_failed_claim(self, key: str, message: str) -> None:
        """A Warning Event on the claim whose selector failed (once per distinct message:
        the recorder counts repeats)."""
        if not key or self._events is None:
            return
        namespace, _, name = key.partition("/")
        claim = self._caches.claim(namespace, name)
        if claim is not None:
            self._events.warning(claim, "AllocationFailed", "Allocate", message)

    def _report_unschedulable(self, pod: KubeObject, message: str) -> None:
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("message") == message
            ):
                return  # already reported: do not rewrite the pod on every attempt
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {
            "metadata": {"uid": meta(pod)["uid"]},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                        "lastTransitionTime": now,
                    }
                ]
            },
        }
        try:
            self._pods.patch_status(
                pod, patch, patch_type=PatchType.STRATEGIC, field_manager=FIELD_MANAGER
            )
        except (NotFound, Conflict):
            return
        if self._events is not None:
            self._events.warning(pod, "FailedScheduling", "Scheduling", message)
        logger.info("Pod unschedulable", pod=_pod_key(pod), reason=message)


def _no_node_fits(
    node_count: int,
    rejected: Counter[str],
    allocator: Allocator | None,
    no_fit: list[Node],
    models: list[ResourceClaim],
) -> _UnschedulableError:
    """The "0/N nodes are available" error; it waits for capacity, and for placed pods
    when their affinity or spread rejected a node."""
    summary = ", ".join(f"{count} {reason}" for reason, count in sorted(rejected.items()))
    message = f"0/{node_count} nodes are available: {summary}."
    if allocator is not None and no_fit:
        message += " " + summarise(allocator, no_fit, models) + "."
    reasons = {CAPACITY}
    if any(r in _PLACED_POD_REASONS for r in rejected):
        reasons.add(PLACED_PODS)
    return _UnschedulableError(reasons, message)


def _pod_info(pod: KubeObject) -> PodInfo:
    """The pod as the filters see it; raises _UnschedulableError for a feature drakit does
    not implement or a spec it cannot decode."""
    unsupported = NodeFilter.unsupported(pod)
    if unsupported:
        raise _UnschedulableError(
            {"pod"},
            "drakit's scheduler does not implement what this pod uses: " + "; ".join(unsupported),
        )
    try:
        return PodInfo.of(pod)
    except ValueError as err:
        raise _UnschedulableError({"pod"}, f"pod spec cannot be used: {err}") from None


def _class_names(model: ResourceClaim) -> set[str]:
    names: set[str] = set()
    for request in model.requests:
        if request.exactly is not None and request.exactly.device_class_name:
            names.add(request.exactly.device_class_name)
        for sub in request.first_available:
            if sub.device_class_name:
                names.add(sub.device_class_name)
    return names


def _matches_all(selectors: list[NodeSelector], node: KubeObject) -> bool:
    name, labels = str(meta(node).get("name")), meta(node).get("labels") or {}
    try:
        return all(node_selector_matches(s, name, labels) for s in selectors)
    except NodeSelectorError:
        return False


def _pod_key(pod: KubeObject) -> str:
    return f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"


def _key(claim: KubeObject) -> str:
    return f"{meta(claim).get('namespace')}/{meta(claim).get('name')}"
