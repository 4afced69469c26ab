"""Claim lifecycle: reservations of pods that are done or gone, deallocation, finalizer
removal, deletion of generated claims, and reservations for pods that arrive bound.

The rules are the Kubernetes resourceclaim controller's (``syncClaim``/``syncPod``):

- a ``reservedFor`` pod entry is dropped when the pod's UID was seen deleted, when the pod is
  done (terminal, or deleted before it was scheduled), or when a **live GET** by name shows it
  gone or replaced (UID differs). A pod missing only from the informer may be one that is
  being bound right now; dropping its reservation then would be wrong;
- the status update that removes the *last* consumer also clears the allocation (only then:
  an allocated claim that was never reserved stays allocated), in one JSON patch guarded by
  the resourceVersion (never a PUT: the allocation's opaque config is not sent back); the
  finalizer is removed afterwards, from the object that patch returned;
- a claim being deleted without consumers loses its allocation, then its finalizer;
- a generated claim (controller owner: a Pod) without consumers is deleted when its pod is
  done or gone;
- a pod that arrives bound to a node (``spec.nodeName`` set, not terminal) gets its allocated
  claims reserved.
"""

from __future__ import annotations

import contextlib
from typing import Any

from drakit.controller.caches import Caches, DeletedPods
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import (
    FIELD_MANAGER,
    FINALIZER,
    consumer_ref,
    is_reserved_for,
    meta,
    pod_is_done,
    pod_is_terminal,
    pod_owner_name,
    pod_owner_uid,
    resolve_claim_name,
)
from drakit.kubeapi.assume_cache import AssumeCacheError
from drakit.kubeapi.errors import Conflict, NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource
from drakit.telemetry.logs import get_logger

__all__ = ["ClaimLifecycle"]

logger = get_logger(__name__)


class ClaimLifecycle:
    """Keeps claims consistent with the pods that use them. Every method is idempotent."""

    def __init__(
        self,
        *,
        caches: Caches,
        pods: Resource,
        claims: Resource,
        writer: ClaimWriter,
        deleted_pods: DeletedPods,
        config: ControllerConfig,
        metrics: ControllerMetrics,
    ) -> None:
        self._caches = caches
        self._pods = pods
        self._claims = claims
        self._writer = writer
        self._deleted = deleted_pods
        self._config = config
        self._metrics = metrics

    # -- claims ------------------------------------------------------------------------------

    def sync_claim(self, namespace: str, name: str) -> None:
        """Bring one claim in line with its consumers (see the module docstring)."""
        claim = self._caches.claim(namespace, name)
        if claim is None or not self.in_scope(claim):
            return
        reserved = list((claim.get("status") or {}).get("reservedFor") or [])
        kept = [entry for entry in reserved if self._keep(namespace, entry)]
        if len(kept) != len(reserved):
            claim = self._drop_reservations(claim, kept)
        elif not kept and meta(claim).get("deletionTimestamp"):
            self._release_deleted(claim)
            return
        if not kept:
            self._delete_if_pod_gone(claim)

    def in_scope(self, claim: KubeObject) -> bool:
        """Whether this controller manages the claim's lifecycle.

        ``--claim-generation=all``: every claim. Otherwise the claims drakit wrote (created
        or allocated; recognised by its field manager) or whose owner or consumers are pods
        drakit schedules.
        """
        if self._config.claim_generation is ClaimGeneration.ALL:
            return True
        if any(m.get("manager") == FIELD_MANAGER for m in meta(claim).get("managedFields") or ()):
            return True
        namespace = str(meta(claim).get("namespace"))
        names = [pod_owner_name(claim)] + [
            e.get("name") for e in (claim.get("status") or {}).get("reservedFor") or ()
        ]
        for pod_name in names:
            pod = self._caches.pod(namespace, str(pod_name)) if pod_name else None
            if pod is not None and self._config.manages_claims_of(_scheduler(pod)):
                return True
        return False

    def _keep(self, namespace: str, entry: dict[str, Any]) -> bool:
        """False when the consumer is a pod that is done or gone; other kinds are kept."""
        if entry.get("apiGroup") or entry.get("resource") != "pods":
            return True
        uid = str(entry.get("uid"))
        if self._deleted.scheduler_of(uid) is not None:
            return False
        pod = self._caches.pod(namespace, str(entry.get("name")))
        if pod is None:
            try:
                pod = self._pods.get(str(entry.get("name")), namespace)
            except NotFound:
                return False
        if meta(pod).get("uid") != uid:
            return False
        return not pod_is_done(pod)

    def _drop_reservations(self, claim: KubeObject, kept: list[dict[str, Any]]) -> KubeObject:
        status = claim.get("status") or {}
        removed = len(status.get("reservedFor") or []) - len(kept)
        changes: dict[str, Any] = {"reservedFor": kept}
        deallocate = not kept and FINALIZER in (meta(claim).get("finalizers") or ())
        if deallocate:
            changes["allocation"] = None
        updated = self._writer.change_status(claim, changes)
        self._assume(updated)
        self._metrics.reservations_removed.inc(removed)
        logger.info(
            "Removed reservations of pods that are done or gone",
            claim=_key(claim),
            removed=removed,
            deallocated=deallocate,
        )
        if deallocate:
            self._metrics.deallocations.inc()
            if not (updated.get("status") or {}).get("allocation"):
                updated = self._writer.remove_finalizer(updated)
                self._assume(updated)
        return updated

    def _release_deleted(self, claim: KubeObject) -> None:
        """A claim being deleted without consumers: allocation first, then the finalizer."""
        if FINALIZER not in (meta(claim).get("finalizers") or ()):
            return
        if (claim.get("status") or {}).get("allocation"):
            claim = self._writer.change_status(claim, {"allocation": None})
            self._metrics.deallocations.inc()
        self._writer.remove_finalizer(claim)
        logger.info("Released claim being deleted", claim=_key(claim))

    def _delete_if_pod_gone(self, claim: KubeObject) -> None:
        owner_uid, owner_name = pod_owner_uid(claim), pod_owner_name(claim)
        if owner_uid is None or owner_name is None or meta(claim).get("deletionTimestamp"):
            return  # not generated for a pod: user claims stay
        namespace = str(meta(claim).get("namespace"))
        if self._deleted.scheduler_of(owner_uid) is None:
            pod = self._caches.pod(namespace, owner_name)
            if pod is None:
                # Nothing may collect the claim (no garbage collector running): ask the server.
                try:
                    pod = self._pods.get(owner_name, namespace)
                except NotFound:
                    pod = None
            if pod is not None and meta(pod).get("uid") == owner_uid and not pod_is_done(pod):
                return
        try:
            self._claims.delete(str(meta(claim)["name"]), namespace, uid=str(meta(claim)["uid"]))
        except (NotFound, Conflict):
            return  # already gone, or replaced by a new claim of that name
        self._metrics.claims_deleted.inc()
        logger.info("Deleted generated claim of a finished pod", claim=_key(claim))

    def _assume(self, claim: KubeObject) -> None:
        with contextlib.suppress(AssumeCacheError):  # the informer has something newer
            self._caches.claims.assume(claim)

    # -- pods --------------------------------------------------------------------------------

    def reserve_for_bound_pod(self, pod: KubeObject) -> None:
        """Reserve the allocated claims of a pod that is already bound to a node.

        Never for terminal pods (they would be added and removed again, forever) or pods being
        deleted. Claims that are not allocated (yet) are left alone.
        """
        if not (pod.get("spec") or {}).get("nodeName") or pod_is_terminal(pod):
            return
        if meta(pod).get("deletionTimestamp"):
            return
        namespace = str(meta(pod).get("namespace"))
        consumer = consumer_ref(pod)
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
            try:
                resolved = resolve_claim_name(pod, pod_claim)
            except ValueError:
                continue
            if not resolved.name:
                continue
            claim = self._caches.claim(namespace, resolved.name)
            if claim is None or not (claim.get("status") or {}).get("allocation"):
                continue
            if is_reserved_for(claim, consumer["uid"]):
                continue
            self._assume(self._writer.reserve(claim, consumer))


def _scheduler(pod: KubeObject) -> str | None:
    return (pod.get("spec") or {}).get("schedulerName")


def _key(claim: KubeObject) -> str:
    return f"{meta(claim).get('namespace')}/{meta(claim).get('name')}"
