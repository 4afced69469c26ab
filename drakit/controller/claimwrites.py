"""The writes that change a claim's allocation, reservations and finalizer.

Why these shapes:

- **Allocation**: a PUT of ``resourceclaims/status`` at the resourceVersion the allocator
  decided from, with the allocation and the first reservation, written only after the
  claim carries ``resource.kubernetes.io/delete-protection``. The resourceVersion makes the
  write land on exactly the claim that was checked: this closes the race where the
  lifecycle has deallocated the claim but not yet removed the finalizer (the allocator saw
  the finalizer, skipped adding it, the finalizer went, and an allocation without
  protection was written), and a claim deleted and created again gets Conflict too. Any
  other change in between also gets Conflict; the claim is then read again and the checks
  repeated, as kube-scheduler does. This is the one write that sends the whole status: the
  allocation is new (there is no stored one to compare with), and its opaque config comes
  from the claim's spec. A JSON patch with ``test`` operations for the UID and
  the finalizer did the same without those retries, but costs the apiserver about a third
  more CPU (it encodes the stored claim, patches and decodes it again), on a write every
  allocated claim needs.
- **Reservation** of an already allocated claim: a JSON patch that appends to
  ``status.reservedFor``. Each patch is applied to the latest stored claim, so pods that share a
  claim are added concurrently and none is lost; an entry that is already there is rejected
  by validation (Duplicate) and counts as success. The patch also tests that the allocation
  is the one the pod was placed by (its results, node selector and timestamp: a test of the
  whole allocation would compare the opaque config's numbers as the client re-encoded them,
  ``1000.0`` for a stored ``1e3``): a claim deallocated and allocated again elsewhere in the
  meantime must not be reserved for a pod bound to the old allocation's node. When the list
  does not exist yet the patch creates it and carries a ``test`` of the resourceVersion, so
  two first reservations cannot overwrite each other.
- **Finalizer** add/remove and the lifecycle's status changes (reservations dropped,
  deallocation): JSON patches of just those fields guarded by the resourceVersion of the
  object they were computed from (Conflict on any concurrent change). Never a PUT: the
  apiserver compares the spec and the allocation, opaque config bytes included, byte for
  byte with what it stores, and a decoded and re-encoded claim differs
  (:mod:`drakit.kubeapi.jsonpatch`).
"""

from __future__ import annotations

from typing import Any

from drakit.controller.naming import (
    FIELD_MANAGER,
    FINALIZER,
    is_reserved_for,
    meta,
    without_managed_fields,
)
from drakit.kubeapi.errors import Conflict, Invalid, NotFound
from drakit.kubeapi.jsonpatch import guarded_patch, set_or_remove
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import PatchType, Resource
from drakit.kubeapi.retry import Backoff
from drakit.telemetry.logs import get_logger

__all__ = [
    "ClaimWriteError",
    "ClaimWriter",
]

logger = get_logger(__name__)

ATTEMPTS = 5


class ClaimWriteError(Exception):
    """The claim cannot take this write (deleted, allocated elsewhere, full): not retried
    here; the pod goes back to scheduling."""


class ClaimWriter:
    """Claim writes with their preconditions; every method returns the claim as stored."""

    def __init__(self, claims: Resource) -> None:
        self._claims = claims

    # -- allocation --------------------------------------------------------------------------

    def allocate_and_reserve(
        self, claim: KubeObject, allocation: dict[str, Any], consumer: dict[str, str]
    ) -> KubeObject:
        """Add the finalizer if needed, then write ``allocation`` and reserve the claim for
        ``consumer`` in one status write at the claim's resourceVersion.

        ``claim`` may be stale: on a conflict or a refusal the claim is read again and the
        checks repeated. Raises ClaimWriteError when the claim is being deleted or got
        another allocation meanwhile.
        """
        current = claim
        backoff = Backoff(initial=0.01, cap=0.5)
        for attempt in range(1, ATTEMPTS + 1):
            self._check_allocatable(current, allocation)
            if (current.get("status") or {}).get("allocation") == allocation:
                # An earlier attempt landed although its answer was lost.
                return self.reserve(current, consumer)
            current = self.add_finalizer(current)
            try:
                return self._claims.update_status(
                    self._allocation_body(current, allocation, consumer),
                    field_manager=FIELD_MANAGER,
                )
            except (Invalid, Conflict) as err:
                if attempt == ATTEMPTS:
                    raise
                logger.debug(
                    "Allocation write refused, reading the claim again",
                    claim=_key(current),
                    cause=str(err),
                    attempt=attempt,
                )
                backoff.sleep()
                current = self._fresh(current)
        raise AssertionError("unreachable")

    @staticmethod
    def _allocation_body(
        claim: KubeObject, allocation: dict[str, Any], consumer: dict[str, str]
    ) -> KubeObject:
        """``claim`` with ``allocation`` and ``consumer`` as its only reservation (an
        unallocated claim has none), everything else as read, its resourceVersion included:
        that is the precondition. ``managedFields`` is left out (unset in a PUT: kept)."""
        status = {
            **(claim.get("status") or {}),
            "allocation": allocation,
            "reservedFor": [consumer],
        }
        return {**without_managed_fields(claim), "status": status}

    @staticmethod
    def _check_allocatable(claim: KubeObject, allocation: dict[str, Any]) -> None:
        if meta(claim).get("deletionTimestamp"):
            raise ClaimWriteError(f"claim {_key(claim)} is being deleted")
        current = (claim.get("status") or {}).get("allocation")
        if current and current != allocation:
            raise ClaimWriteError(f"claim {_key(claim)} got allocated elsewhere in the meantime")

    # -- reservation -------------------------------------------------------------------------

    def reserve(self, claim: KubeObject, consumer: dict[str, str]) -> KubeObject:
        """Add ``consumer`` to the allocated claim's ``reservedFor`` (idempotent).

        Raises ClaimWriteError when the claim is deleted, being deleted, not allocated, or
        the apiserver refuses the entry (the 256-entry limit).
        """
        expected = (claim.get("status") or {}).get("allocation")
        current = claim
        backoff = Backoff(initial=0.01, cap=0.5)
        for attempt in range(1, ATTEMPTS + 1):
            if is_reserved_for(current, consumer["uid"]):
                return current
            if meta(current).get("deletionTimestamp"):
                raise ClaimWriteError(f"claim {_key(current)} is being deleted")
            allocation = (current.get("status") or {}).get("allocation")
            if not allocation:
                raise ClaimWriteError(f"claim {_key(current)} is not allocated")
            if allocation != expected:
                raise ClaimWriteError(f"claim {_key(current)} was allocated again meanwhile")
            try:
                return self._patch_status(current, self._reserve_ops(current, consumer))
            except (Invalid, Conflict) as err:
                fresh = self._fresh(current)
                if is_reserved_for(fresh, consumer["uid"]):
                    return fresh
                if attempt == ATTEMPTS or (isinstance(err, Invalid) and _only_list_limit(err)):
                    raise ClaimWriteError(f"claim {_key(current)}: {err}") from err
                backoff.sleep()
                current = fresh
        raise AssertionError("unreachable")

    @staticmethod
    def _reserve_ops(claim: KubeObject, consumer: dict[str, str]) -> list[dict[str, Any]]:
        allocation = claim["status"]["allocation"]
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/uid", "value": meta(claim)["uid"]},
        ]
        # The parts that tell one allocation from another, none of them opaque config.
        for key in ("allocationTimestamp", "nodeSelector"):
            if key in allocation:
                ops.append({"op": "test", "path": f"/status/allocation/{key}",
                            "value": allocation[key]})  # fmt: skip
        results = (allocation.get("devices") or {}).get("results")
        ops.append({"op": "test", "path": "/status/allocation/devices/results", "value": results})
        if "reservedFor" in (claim.get("status") or {}):
            ops.append({"op": "add", "path": "/status/reservedFor/-", "value": consumer})
        else:
            rv = meta(claim)["resourceVersion"]
            ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": rv})
            ops.append({"op": "add", "path": "/status/reservedFor", "value": [consumer]})
        return ops

    # -- finalizer ---------------------------------------------------------------------------

    def add_finalizer(self, claim: KubeObject) -> KubeObject:
        """The claim with the delete-protection finalizer (a resourceVersion-guarded patch of
        the finalizers when it is missing; on Conflict read again and retry)."""
        current = claim
        for attempt in range(1, ATTEMPTS + 1):
            finalizers = list(meta(current).get("finalizers") or [])
            if FINALIZER in finalizers:
                return current
            if meta(current).get("deletionTimestamp"):
                raise ClaimWriteError(f"claim {_key(current)} is being deleted")
            ops = set_or_remove(
                meta(current), "finalizers", [*finalizers, FINALIZER], "/metadata/finalizers"
            )
            try:
                return guarded_patch(self._claims, current, ops, field_manager=FIELD_MANAGER)
            except Conflict:
                if attempt == ATTEMPTS:
                    raise
                current = self._fresh(current)
        raise AssertionError("unreachable")

    def remove_finalizer(self, claim: KubeObject) -> KubeObject:
        """Patch the finalizer out of the claim, guarded by its resourceVersion (Conflict if it
        changed since ``claim`` was read)."""
        finalizers = [f for f in meta(claim).get("finalizers") or [] if f != FINALIZER]
        ops = set_or_remove(meta(claim), "finalizers", finalizers, "/metadata/finalizers")
        return guarded_patch(self._claims, claim, ops, field_manager=FIELD_MANAGER)

    def change_status(self, claim: KubeObject, changes: dict[str, Any]) -> KubeObject:
        """Set (or, for None/empty, remove) the status fields in ``changes`` with a JSON patch
        guarded by ``claim``'s resourceVersion; the other fields are not sent."""
        status = claim.get("status") or {}
        ops = [
            op
            for key, value in changes.items()
            for op in set_or_remove(status, key, value, f"/status/{key}")
        ]
        return guarded_patch(
            self._claims, claim, ops, subresource="status", field_manager=FIELD_MANAGER
        )

    # -- plumbing ----------------------------------------------------------------------------

    def _patch_status(self, claim: KubeObject, ops: list[dict[str, Any]]) -> KubeObject:
        return self._claims.patch_status(
            claim, ops, patch_type=PatchType.JSON, field_manager=FIELD_MANAGER
        )

    def fresh(self, claim: KubeObject) -> KubeObject:
        """The claim as stored now; ClaimWriteError when it was deleted or replaced."""
        return self._fresh(claim)

    def _fresh(self, claim: KubeObject) -> KubeObject:
        try:
            fresh = self._claims.get(str(meta(claim)["name"]), str(meta(claim)["namespace"]))
        except NotFound as err:
            raise ClaimWriteError(f"claim {_key(claim)} was deleted") from err
        if meta(fresh).get("uid") != meta(claim).get("uid"):
            raise ClaimWriteError(f"claim {_key(claim)} was deleted and created again")
        return fresh


def _only_list_limit(err: Invalid) -> bool:
    """True when validation refused the reservation for a reason a retry cannot fix."""
    text = str(err).lower()
    return "too many" in text or "must have at most" in text or "may not be" in text


def _key(claim: KubeObject) -> str:
    return f"{meta(claim).get('namespace')}/{meta(claim).get('name')}"
