"""What the allocator needs to know, kept current: allocated devices, slices and classes.

``DeviceBook`` holds the allocated state that scheduling decisions are made against:

    allocated state = allocations in the claim assume cache  +  allocations in flight

An allocation is *in flight* from the moment the scheduler picked it until the claim write
that records it has been assumed into the cache (or failed). In-flight entries override
whatever the cache says about that claim, so an informer event with an older copy cannot free
the devices. The order at the end of a write matters (kubernetes #136269): assume the written
claim first (its event updates the state), then drop the in-flight entry.

All state changes happen under one lock, and every change bumps :attr:`DeviceBook.generation`.
Deciders follow kube-scheduler's pattern: take a :meth:`DeviceBook.snapshot` under the lock,
search for a node outside it, then under the lock again check that the generation is unchanged
(or re-check the chosen node against the live state) and register the allocation in flight in
that same critical section, so two pods can never be given the same device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from drakit.allocator.allocated import AllocatedState
from drakit.allocator.features import Features
from drakit.allocator.holdings import decode_claim
from drakit.allocator.inventory import Inventory
from drakit.allocator.model import DeviceClass, ModelError, ResourceClaim, ResourceSlice
from drakit.controller.naming import meta, without_managed_fields
from drakit.kubeapi.objects import KubeObject
from drakit.telemetry.logs import get_logger

__all__ = ["SNAPSHOT_MAX_LAG", "DeviceBook", "claim_model", "decode_claim_model", "held_model"]

logger = get_logger(__name__)

#: Changes a copy of the allocated state may lag behind before a decision gets a new one
#: (:meth:`DeviceBook.snapshot`). A lagging copy only costs a re-check of the chosen node,
#: which a decision makes anyway when anything changed during its search.
SNAPSHOT_MAX_LAG = 32


_T = TypeVar("_T")


class _DecodedClaims:
    """Models of claim dicts, remembered by the dict's identity (bounded, thread-safe).

    A scheduled pod's claim is decoded several times from the same object (the selector
    pre-pass, the search, its confirmation, the device book's bookkeeping of the assumed
    write). Claim dicts from the informer, the assume cache and API answers are never
    changed in place, so the same object always decodes to the same model; the entry keeps
    the object alive, so its identity cannot be reused by another while remembered.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[KubeObject, object]] = {}

    def get(self, claim: KubeObject, decode: Callable[[KubeObject], _T]) -> _T:
        key = id(claim)
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] is claim:
            return hit[1]  # type: ignore[return-value]
        value = decode(claim)
        with self._lock:
            if len(self._entries) >= self._size:
                del self._entries[next(iter(self._entries))]  # the oldest: dicts keep order
            self._entries[key] = (claim, value)
        return value


_MODELS = _DecodedClaims()
_HELD = _DecodedClaims()


def claim_model(claim: KubeObject) -> ResourceClaim | None:
    """The allocator's model of a claim dict, or None (logged) when it cannot be decoded.

    The model leaves out ``metadata.managedFields``: the allocator never reads it, and
    copying it into the model's frozen ``extra`` was most of the cost of decoding a claim.
    ``claim`` must not be changed in place afterwards (its model is remembered).
    """
    decoded = decode_claim_model(claim)
    if isinstance(decoded, ModelError):
        _log_undecodable(claim, decoded, "Ignoring undecodable ResourceClaim")
        return None
    return decoded


def decode_claim_model(claim: KubeObject) -> ResourceClaim | ModelError:
    """The model of a claim dict or why it cannot be decoded (remembered as
    :func:`claim_model` remembers it)."""
    return _MODELS.get(claim, _decode_model)


def _decode_model(claim: KubeObject) -> ResourceClaim | ModelError:
    try:
        return ResourceClaim.from_dict(without_managed_fields(claim))
    except ModelError as err:
        return err


def held_model(claim: KubeObject) -> ResourceClaim | None:
    """The model that allocated state is built from: the full claim, or, when it cannot be
    decoded, what its ``status.allocation`` holds (logged). Fails closed: an allocated
    claim's devices stay taken whatever else it carries. ``claim`` must not be changed in
    place afterwards (its model is remembered)."""
    return _HELD.get(claim, _decode_held)


def _decode_held(claim: KubeObject) -> ResourceClaim | None:
    decoded = decode_claim(without_managed_fields(claim))
    if decoded.error is not None:
        _log_undecodable(
            claim,
            decoded.error,
            "Undecodable ResourceClaim: counting the devices its allocation holds"
            if decoded.model is not None
            else "Ignoring undecodable ResourceClaim",
        )
    return decoded.model


def _allocation(claim: KubeObject) -> object:
    return (claim.get("status") or {}).get("allocation")


def _landed_as_decided(stored: KubeObject, decided: KubeObject) -> bool:
    """True when the stored claim carries the decided allocation (the claim write landed)."""
    allocation = _allocation(stored)
    return allocation is not None and allocation == _allocation(decided)


def _log_undecodable(claim: KubeObject, err: ModelError, message: str) -> None:
    logger.warning(
        message, claim=f"{meta(claim).get('namespace')}/{meta(claim).get('name')}", cause=str(err)
    )


class DeviceBook:
    """Allocated state, in-flight allocations, and the inventory/class snapshot. Thread-safe."""

    def __init__(
        self,
        *,
        list_slices: Callable[[], Iterable[KubeObject]],
        list_classes: Callable[[], Iterable[KubeObject]],
        get_claim: Callable[[str], KubeObject | None],
        features: Features | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self._features = features
        self._list_slices = list_slices
        self._list_classes = list_classes
        self._get_claim = get_claim
        self.state = AllocatedState()
        self._in_flight: dict[str, KubeObject] = {}  # claim UID -> claim with the allocation
        # Claim UID -> the resourceVersion its entry in ``state`` was taken from. The
        # scheduler's assumed write and the informer's event of that write carry the same
        # version: the second is not decoded and changes nothing.
        self._recorded: dict[str, str] = {}
        self._inventory: Inventory | None = None
        self._classes: dict[str, DeviceClass] | None = None
        #: Bumped by every change of the allocated state, the inventory or the classes.
        self.generation = 0
        self._snapshot: tuple[int, AllocatedState] | None = None

    def snapshot(self, *, current: bool = False) -> tuple[int, AllocatedState]:
        """A copy of the allocated state and the generation it was copied at.

        The copy may lag the live state by up to :data:`SNAPSHOT_MAX_LAG` changes unless
        ``current`` is true; callers compare the returned generation with
        :attr:`generation` and must confirm any choice made on a lagging copy against the
        live state under :attr:`lock` (the scheduler re-checks its node). Copying is linear
        in the allocated devices, and a busy scheduler changes the state between almost any
        two decisions: one copy per decision made the cost per pod grow with the cluster.
        """
        with self.lock:
            kept = self._snapshot
            lag = SNAPSHOT_MAX_LAG if not current else 0
            if kept is None or self.generation - kept[0] > lag:
                kept = self._snapshot = (self.generation, self.state.copy())
            return kept

    def _changed(self) -> None:
        self.generation += 1

    # -- claim events (from the assume cache) ------------------------------------------------

    def claim_changed(self, claim: KubeObject) -> None:
        """An add or update from the claim assume cache."""
        uid = str(meta(claim).get("uid"))
        with self.lock:
            if uid in self._in_flight:
                return  # the in-flight allocation wins until the write is assumed
            if self._record(uid, claim):
                self._changed()

    def claim_deleted(self, claim: KubeObject) -> None:
        with self.lock:
            uid = str(meta(claim).get("uid"))
            if uid not in self._in_flight:
                self.state.remove(uid)
                self._recorded.pop(uid, None)
                self._changed()

    def _record(self, uid: str, claim: KubeObject) -> bool:
        """Take ``claim``'s allocation into the state; False when the state already holds
        this version of it (nothing changed)."""
        version = str(meta(claim).get("resourceVersion") or "")
        if version and self._recorded.get(uid) == version:
            return False
        self._recorded[uid] = version
        if not (claim.get("status") or {}).get("allocation"):
            self.state.remove(uid)
            return True
        model = held_model(claim)
        if model is not None:
            self.state.add(model)
        return True

    # -- in flight -----------------------------------------------------------------------------

    def begin(self, claim_with_allocation: KubeObject, model: ResourceClaim) -> None:
        """Mark an allocation as decided but not yet written. Call under ``lock``, in the same
        critical section that made the decision."""
        with self.lock:
            uid = str(meta(claim_with_allocation).get("uid"))
            self._in_flight[uid] = claim_with_allocation
            self._recorded.pop(uid, None)  # the state holds the decision, not a version
            self.state.add(model)
            self._changed()

    def in_flight(self, uid: str) -> KubeObject | None:
        with self.lock:
            return self._in_flight.get(uid)

    def finish(self, claim_uid: str, claim_key: str) -> None:
        """End the in-flight period of a claim: its state is taken from the cache again (which
        holds the assumed write on success, the informer's version on failure)."""
        with self.lock:
            decided = self._in_flight.pop(claim_uid, None)
            if decided is None:
                return
            current = self._get_claim(claim_key)
            if current is None or meta(current).get("uid") != claim_uid:
                self.state.remove(claim_uid)
                self._recorded.pop(claim_uid, None)
            elif _landed_as_decided(current, decided):
                # The state already holds this allocation (the decision's model), so the
                # stored claim need not be decoded again.
                self._recorded[claim_uid] = str(meta(current).get("resourceVersion") or "")
                return
            else:
                self._record(claim_uid, current)
            self._changed()

    # -- inventory -----------------------------------------------------------------------------

    def invalidate_inventory(self) -> None:
        with self.lock:
            self._inventory = None
            self._changed()

    def invalidate_classes(self) -> None:
        with self.lock:
            self._classes = None
            self._changed()

    def inventory(self) -> Inventory:
        """The slices as an allocator inventory (rebuilt after slices changed)."""
        with self.lock:
            if self._inventory is None:
                slices = []
                for obj in self._list_slices():
                    try:
                        slices.append(ResourceSlice.from_dict(obj))
                    except ModelError as err:
                        logger.warning(
                            "Ignoring undecodable ResourceSlice",
                            slice=meta(obj).get("name"),
                            cause=str(err),
                        )
                self._inventory = Inventory(slices, self._features)
            return self._inventory

    def classes(self) -> dict[str, DeviceClass]:
        with self.lock:
            if self._classes is None:
                classes: dict[str, DeviceClass] = {}
                for obj in self._list_classes():
                    try:
                        model = DeviceClass.from_dict(obj)
                    except ModelError as err:
                        # "class" is a Python keyword: the field goes in as a mapping.
                        fields: dict[str, Any] = {"class": meta(obj).get("name")}
                        logger.warning("Ignoring undecodable DeviceClass", **fields, cause=str(err))
                        continue
                    classes[model.name] = model
                self._classes = classes
            return self._classes
