"""The structured-parameters allocator (Kubernetes 1.37 semantics, experimental channel).

Usage::

    inventory = Inventory(slices)                       # once per set of slices
    allocator = Allocator(inventory, classes, state)    # once per allocated state
    results = allocator.allocate(node, claims)          # per candidate node

``allocate`` returns one :class:`AllocationResult` per claim (same order), or ``None`` when
the claims do not fit on the node. It raises :class:`NodeUnsuitableError` when nothing fits
and the node sees an invalid pool (node-local, not fatal), :class:`AllocationError` for
problems that no node can fix (CEL errors, unknown classes, All-mode requests over
incomplete pools, more than 32 devices, ...), :class:`AllocationTimeoutError` when the time
limit passes and :class:`AllocationCancelledError` when the caller cancels.

Search: depth first over claims, requests and device slots, first solution wins. Devices
are tried in pool, slice, device order; within one request only combinations are tried
(a slot starts after the previous slot's device). A ``firstAvailable`` request tries its
subrequests in order, each against the rest of this claim *and all later claims*, so a
later claim's failure falls back to the next subrequest of an earlier one.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from drakit.allocator.allocated import AllocatedState
from drakit.allocator.capacity import (
    CapacityError,
    CapacityPlan,
    capacity_plan,
    consumed_capacity,
    fits_capacity,
    fits_plan,
)
from drakit.allocator.cel import CELCancelledError, CELError, compile_selector
from drakit.allocator.constraints import Constraint, DistinctAttribute, MatchAttribute
from drakit.allocator.features import Features
from drakit.allocator.inventory import NANO, DeviceEntry, Inventory, NodePools, Pool
from drakit.allocator.lookahead import Verdict, claim_outlook, hopeless
from drakit.allocator.model import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    CONFIG_SOURCE_CLAIM,
    CONFIG_SOURCE_CLASS,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClass,
    DeviceID,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    FrozenDict,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
)
from drakit.allocator.nodeselector import NodeSelectorError
from drakit.allocator.quantity import Quantity

__all__ = [
    "MAX_RESULTS",
    "AllocationCancelledError",
    "AllocationError",
    "AllocationTimeoutError",
    "Allocator",
    "NodeUnsuitableError",
]

MAX_RESULTS: Final = 32
DEFAULT_TIMEOUT: Final = 10.0
# The search looks at the clock and the caller's cancel flag on its first step and then
# every this many steps: a step costs microseconds, a look at the clock about as much.
_CHECK_EVERY: Final = 16
# A search still running at this step looks ahead for claims no path can allocate (see
# allocator.lookahead): most searches end long before, and never pay for the look.
_LOOK_AHEAD_AT: Final = 2000
# A bound on the memory of claim entries that answered "no" (see _Run._enter_claim).
_MAX_FAILED_ENTRIES: Final = 100_000


class AllocationError(Exception):
    """Fatal: the claims cannot be allocated on any node as they are (fix the input)."""

    def __init__(self, message: str, *, claim: str = "", request: str = "") -> None:
        super().__init__(message)
        self.claim = claim
        self.request = request


class AllocationTimeoutError(AllocationError):
    """The time limit passed before the search finished."""


class AllocationCancelledError(Exception):
    """The caller asked the allocation to stop (treat as: does not fit this node)."""


class NodeUnsuitableError(Exception):
    """Nothing fits on this node and the node sees at least one invalid pool."""


class _MaxSizeExceededError(Exception):
    """Sentinel: the current branch would need more than 32 results for a claim."""


_MAX_SIZE = _MaxSizeExceededError()


class _HopelessError(Exception):
    """Sentinel: the lookahead proved that the search can only answer "no"."""


_HOPELESS = _HopelessError()


@dataclass(eq=False, slots=True)
class _Request:
    """One request without subrequests, or one subrequest (upstream: requestData)."""

    claim_index: int
    request_index: int
    sub_index: int
    name: str
    parent: str | None
    full_name: str
    device_class: DeviceClass
    selector_key: tuple[tuple[str, ...], tuple[str, ...]]
    all_mode: bool
    num_devices: int
    admin: bool
    tolerations: tuple[DeviceToleration, ...]
    capacity: Mapping[str, Quantity] | None
    all_devices: list[DeviceEntry] = field(default_factory=list)
    #: what a device's kept result for this request depends on besides the device (see
    #: _plain_result; the last item is the allocator's binding-conditions feature gate)
    result_key: tuple[Any, ...] = ()
    #: the same for a kept one-device allocation (see _single_allocation)
    allocation_key: tuple[Any, ...] = ()


@dataclass(slots=True)
class _Pick:
    """A device tentatively allocated for a request, with what undoing it takes (picks are
    undone last-in first-out, as the depth-first search backtracks)."""

    request: _Request
    device: DeviceEntry
    #: a share of a multi-allocatable device: its result gets a new share ID (made when
    #: the result is built, so that abandoned picks cost no ID)
    shared: bool
    consumed: dict[str, int] | None
    counters_reserved: bool = False
    constraints: Sequence[Constraint] = ()
    marked: bool = False
    #: capacity added to the in-flight aggregate, and whether the device had one before
    capacity_taken: dict[str, int] | None = None
    capacity_existed: bool = False


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Prepared requests of one claim; ``claim`` keeps it alive, so its id stays its own."""

    claim: ResourceClaim
    slots: list[_RequestSlot]


# An allocator serves one pod's claims in a scheduler; the bound only guards misuse.
_MAX_PREPARED = 1024


class _RequestSlot:
    """Per top-level request: its alternatives (read-only once prepared, so calls on other
    nodes share it; which alternative a call chose is kept by the call)."""

    __slots__ = ("alternatives", "class_config", "first_available", "request")

    def __init__(self, request: DeviceRequest, alternatives: list[_Request]) -> None:
        self.request = request
        self.alternatives = alternatives
        self.first_available = bool(request.first_available)
        #: whether the class of any alternative has configuration to copy into results
        self.class_config = any(rd.device_class.spec.config for rd in alternatives)


class Allocator:
    """Allocates claims against one inventory and one allocated state. Thread-safe: each
    :meth:`allocate` call keeps its search state to itself."""

    def __init__(
        self,
        inventory: Inventory,
        classes: Mapping[str, DeviceClass] | Sequence[DeviceClass],
        allocated: AllocatedState | None = None,
        *,
        features: Features | None = None,
        share_id: Callable[[], str] | None = None,
    ) -> None:
        self.inventory = inventory
        self.features = features or inventory.features
        if isinstance(classes, Mapping):
            self.classes: Mapping[str, DeviceClass] = classes
        else:
            self.classes = {c.metadata.name: c for c in classes}
        self.state = allocated if allocated is not None else AllocatedState()
        self.new_share_id = share_id or (lambda: str(uuid.uuid4()))
        # Prepared requests of claims, by (claim identity, position in the call): the same
        # claims are tried on node after node, and preparing them does not depend on the
        # node unless a request asks for all devices (those are never kept here).
        self._prepared: dict[tuple[int, int], _Prepared] = {}
        self._lock = threading.Lock()

    def allocate(
        self,
        node: Node,
        claims: Sequence[ResourceClaim],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[AllocationResult] | None:
        """Allocate ``claims`` (API-defaulted, not yet allocated) on ``node``; see module doc."""
        try:
            node_pools = self.inventory.pools_for_node(node)
        except NodeSelectorError as exc:
            raise AllocationError(f"gather pool information: {exc}") from None
        run = _Run(self, node, claims, node_pools, timeout=timeout, cancelled=cancelled)
        return run.execute()

    def evaluate_guarded_selectors(
        self,
        claims: Sequence[ResourceClaim],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        """Fill every device's cached answers for the claims' *guarded* selectors.

        Guarded selectors (see :mod:`drakit.allocator.cel.engine`) are the expensive ones: each
        evaluation runs in a child process with CPU and memory limits. A caller that makes
        allocation decisions under a lock calls this first, outside the lock, so that one
        claim's expensive selectors never hold up other claims' decisions; :meth:`allocate`
        then finds the answers (or the errors) cached. Claims that are invalid are left for
        :meth:`allocate` to report. Raises AllocationTimeoutError or
        AllocationCancelledError like :meth:`allocate`.
        """
        run = _Run(self, Node.named(""), claims, NodePools([]), timeout=timeout,
                   cancelled=cancelled)  # fmt: skip
        run.evaluate_guarded_selectors()

    # -- shared per-allocator caches --------------------------------------------------------
    def prepared(self, ci: int, claim: ResourceClaim) -> list[_RequestSlot] | None:
        """The requests of ``claim`` (at position ``ci``) as prepared by an earlier call on
        another node (read-only); None when there is none."""
        hit = self._prepared.get((id(claim), ci))
        return hit.slots if hit is not None and hit.claim is claim else None

    def keep_prepared(self, ci: int, claim: ResourceClaim, slots: list[_RequestSlot]) -> None:
        with self._lock:
            if len(self._prepared) >= _MAX_PREPARED:
                self._prepared.clear()
            self._prepared[(id(claim), ci)] = _Prepared(claim, slots)

    def available_counters(self, pool: Pool) -> dict[str, dict[str, int]]:
        """Counter-set values minus what allocated devices of the pool consume (cached;
        read-only). The pool keeps the last answer by the allocated state's stamp for it,
        so allocators over later states reuse it until a claim in the pool changes."""
        stamp = self.state.pool_stamp(pool.id)
        kept = pool.available_cache
        if kept is not None and kept[0] == stamp:
            return kept[1]
        available = self._count_available(pool)
        pool.available_cache = (stamp, available)  # one assignment: atomic for readers
        return available

    def _count_available(self, pool: Pool) -> dict[str, dict[str, int]]:
        available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        is_allocated = self.state.is_allocated
        for d in pool.counter_devices:
            if not is_allocated(d.id):
                continue
            for set_name, counters in d.counters:
                target = available.get(set_name)
                if target is None:
                    continue
                for name, amount in counters:
                    if name in target:
                        target[name] -= amount
        return available


class _Run:
    """State of one ``allocate`` call (upstream: the inner allocator struct)."""

    __slots__ = (
        "a",
        "allocating",
        "allocating_capacity",
        "calls",
        "cancelled",
        "candidates",
        "claims",
        "constraints",
        "consumed_counters",
        "deadline",
        "dedicated",
        "depth",
        "failed_entries",
        "features",
        "node",
        "plans",
        "pools",
        "pools_by_id",
        "relevant",
        "results",
        "selected",
        "skip_claim",
        "slots",
    )

    def __init__(
        self,
        allocator: Allocator,
        node: Node,
        claims: Sequence[ResourceClaim],
        node_pools: NodePools,
        *,
        timeout: float | None,
        cancelled: Callable[[], bool] | None,
    ) -> None:
        self.a = allocator
        self.features = allocator.features
        self.node = node
        self.claims = claims
        self.pools = node_pools.pools
        self.pools_by_id = node_pools.by_id
        self.candidates = node_pools.candidates
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.cancelled = cancelled
        self.slots: list[list[_RequestSlot]] = []
        #: per claim and request: the index of the alternative chosen (firstAvailable)
        self.selected: list[list[int]] = []
        self.constraints: list[Sequence[Constraint]] = []
        self.results: list[list[_Pick]] = []
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, int]] = {}
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        self.dedicated = allocator.state.dedicated
        self.calls = 0
        #: per claim: never entered, since no path through it can succeed or fail loudly
        #: (set by the lookahead, see _look_ahead)
        self.skip_claim: list[bool] | None = None
        #: per claim: the devices whose state the search from its entry on reads, and the
        #: pools of those that consume counters (set by the lookahead)
        self.relevant: list[tuple[tuple[DeviceEntry, ...], tuple[tuple[str, str], ...]]] = []
        #: keys (see _entry_key) of claim entries from which the search answered "no"
        self.failed_entries: set[tuple[Any, ...]] = set()
        #: capacity plans (see allocator.capacity.capacity_plan) by request and device
        self.plans: dict[tuple[_Request, DeviceEntry], CapacityPlan | None] = {}
        #: frames the search may need: one per device slot, request and claim boundary,
        #: plus helpers (summed while preparing the claims)
        self.depth = 100

    # -- preparation ------------------------------------------------------------------------
    def execute(self) -> list[AllocationResult] | None:
        for ci, claim in enumerate(self.claims):
            self._prepare_claim(ci, claim)
        depth = self.depth
        if depth * 2 > sys.getrecursionlimit():
            sys.setrecursionlimit(depth * 2 + 1000)
        try:
            done = self._allocate_one(0, 0, 0, 0, False, 0)
        except _MaxSizeExceededError:
            # upstream lets the sentinel escape from the first claim: a fatal error
            raise AllocationError("allocation max size exceeded") from None
        except _HopelessError:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise NodeUnsuitableError("invalid resource pools were encountered")
            return None
        return [self._build_result(ci, claim) for ci, claim in enumerate(self.claims)]

    def _prepare_claim(self, ci: int, claim: ResourceClaim) -> None:
        slots = self.a.prepared(ci, claim)
        if slots is None:
            slots = self._prepare_requests(ci, claim)
            if not any(rd.all_mode for slot in slots for rd in slot.alternatives):
                self.a.keep_prepared(ci, claim, slots)
        self.slots.append(slots)
        self.depth += MAX_RESULTS + 2 * len(slots) + 4
        self.selected.append([0] * len(slots))
        constraints = claim.spec.devices.constraints
        self.constraints.append(self._constraints(claim) if constraints else ())
        self.results.append([])

    def _prepare_requests(self, ci: int, claim: ResourceClaim) -> list[_RequestSlot]:
        """Check and prepare the requests of one claim (raises AllocationError)."""
        features = self.features
        ref = claim.key
        slots: list[_RequestSlot] = []
        min_total = 0
        for ri, request in enumerate(claim.spec.devices.requests):
            subs = request.first_available
            if subs and not features.prioritized_list:
                raise AllocationError(
                    f"claim {ref}, request {request.name}: has subrequests, but the "
                    "DRAPrioritizedList feature is disabled",
                    claim=ref,
                    request=request.name,
                )
            if not features.consumable_capacity:
                if request.exactly is not None and request.exactly.capacity is not None:
                    raise AllocationError(
                        f"claim {ref}, request {request.name}: has capacity requests, but the "
                        "DRAConsumableCapacity feature is disabled",
                        claim=ref,
                        request=request.name,
                    )
                for sub in subs:
                    if sub.capacity is not None:
                        raise AllocationError(
                            f"claim {ref}, subrequest {sub.name}: has capacity requests, but the "
                            "DRAConsumableCapacity feature is disabled",
                            claim=ref,
                            request=f"{request.name}/{sub.name}",
                        )
            alternatives: list[_Request] = []
            if subs:
                min_devices = None
                for si, sub in enumerate(subs):
                    rd = self._prepare_request(claim, sub, index=(ci, ri, si), parent=request.name)
                    alternatives.append(rd)
                    min_devices = (
                        rd.num_devices if min_devices is None else min(min_devices, rd.num_devices)
                    )
                per_request = min_devices or 0
            else:
                exact = request.exactly or ExactDeviceRequest()
                rd = self._prepare_request(
                    claim, exact, index=(ci, ri, 0), parent=None, own_name=request.name
                )
                alternatives.append(rd)
                per_request = rd.num_devices
            if per_request > MAX_RESULTS - min_total:
                raise AllocationError(
                    f"claim {ref}, request {request.name}: adding {per_request} devices exceeds "
                    f"the claim limit of {MAX_RESULTS}, with {min_total} already accounted for",
                    claim=ref,
                    request=request.name,
                )
            min_total += per_request
            slots.append(_RequestSlot(request, alternatives))
        return slots

    def _constraints(self, claim: ResourceClaim) -> list[Constraint]:
        """The claim's constraints, new for every call (they keep search state)."""
        ref = claim.key
        constraints: list[Constraint] = []
        list_mode = self.features.list_type_attributes
        for i, c in enumerate(claim.spec.devices.constraints):
            if c.match_attribute is not None:
                constraints.append(MatchAttribute(c.requests, c.match_attribute, list_mode))
            elif c.distinct_attribute is not None:
                constraints.append(DistinctAttribute(c.requests, c.distinct_attribute, list_mode))
            else:
                raise AllocationError(
                    f"claim {ref}, constraint #{i}: empty constraint (unsupported constraint "
                    "type?)",
                    claim=ref,
                )
        return constraints

    def _prepare_request(
        self,
        claim: ResourceClaim,
        req: ExactDeviceRequest | DeviceSubRequest,
        *,
        index: tuple[int, int, int],
        parent: str | None,
        own_name: str | None = None,
    ) -> _Request:
        ci, ri, si = index
        features = self.features
        ref = claim.key
        name = own_name if own_name is not None else req.name  # type: ignore[union-attr]
        full = f"{parent}/{name}" if parent else name
        if req.derived_attributes and not features.derived_attributes:
            raise AllocationError(
                f"claim {ref}, request {name}: cannot handle request with derived attributes, "
                "the feature is disabled",
                claim=ref,
                request=full,
            )
        for i, sel in enumerate(req.selectors):
            if sel.cel is None:
                raise AllocationError(
                    f"claim {ref}, request {name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)",
                    claim=ref,
                    request=full,
                )
        admin_field = req.admin_access if isinstance(req, ExactDeviceRequest) else None
        if not features.admin_access and admin_field is not None:
            raise AllocationError(
                f"claim {ref}, request {name}: admin access is requested, but the feature is "
                "disabled",
                claim=ref,
                request=full,
            )
        if not req.device_class_name:
            raise AllocationError(
                f"claim {ref}, request {name}: missing device class name (unsupported request "
                "type?)",
                claim=ref,
                request=full,
            )
        device_class = self.a.classes.get(req.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"claim {ref}, request {name}: could not retrieve device class "
                f"{req.device_class_name}: deviceclass.resource.k8s.io "
                f'"{req.device_class_name}" not found',
                claim=ref,
                request=full,
            )
        class_exprs = _expressions(device_class.spec.selectors)
        request_exprs = _expressions(req.selectors)
        rd = _Request(
            claim_index=ci,
            request_index=ri,
            sub_index=si,
            name=name,
            parent=parent,
            full_name=full,
            device_class=device_class,
            selector_key=(class_exprs, request_exprs),
            all_mode=req.allocation_mode == ALLOCATION_MODE_ALL,
            num_devices=0,
            admin=bool(admin_field),
            tolerations=req.tolerations,
            capacity=req.capacity.requests if req.capacity is not None else None,
        )
        rd.result_key = (full, rd.admin, rd.tolerations, features.device_binding_conditions)
        rd.allocation_key = ("allocation", *rd.result_key)
        mode = req.allocation_mode
        if mode == ALLOCATION_MODE_EXACT_COUNT:
            rd.num_devices = req.count or 0
        elif mode == ALLOCATION_MODE_ALL:
            self._collect_all(rd, claim)
        else:
            raise AllocationError(
                f"claim {ref}, request {name}: unsupported count mode {mode}",
                claim=ref,
                request=full,
            )
        return rd

    def _collect_all(self, rd: _Request, claim: ResourceClaim) -> None:
        ref = claim.key
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {ref}, request {rd.name}: asks for all devices, but resource pool "
                    f"{pool.driver}/{pool.name} is currently being updated",
                    claim=ref,
                    request=rd.full_name,
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {ref}, request {rd.name}: asks for all devices, but resource pool "
                    f"{pool.driver}/{pool.name} is currently invalid",
                    claim=ref,
                    request=rd.full_name,
                )
            for d in pool.candidates:
                if not self._selectable(rd, d):
                    continue
                if self.features.consumable_capacity and not self._capacity_fits_static(rd, d):
                    continue
                rd.all_devices.append(d)
        rd.num_devices = len(rd.all_devices)

    def _capacity_fits_static(self, rd: _Request, d: DeviceEntry) -> bool:
        try:
            return fits_capacity(
                rd.capacity, d.capacity, None, None, self.features.fractional_capacity_range
            )
        except CapacityError as exc:
            raise AllocationError(
                f"claim {self.claims[rd.claim_index].key}, request {rd.name}: checking "
                f"capacity for device {d.id}: {exc}"
            ) from None

    # -- selection --------------------------------------------------------------------------
    def evaluate_guarded_selectors(self) -> None:
        """See :meth:`Allocator.evaluate_guarded_selectors`."""
        try:
            for ci, claim in enumerate(self.claims):
                self._prepare_claim(ci, claim)
        except AllocationError:
            return  # allocate() reports it, with the same message
        requests = [rd for slots in self.slots for slot in slots for rd in slot.alternatives]
        guarded = [rd for rd in requests if _is_guarded(rd.selector_key)]
        for rd in guarded:
            for s in self.a.inventory.slices:
                for d in s.devices:
                    if rd.selector_key in d.selector_cache:
                        continue
                    self._check_time()
                    result = self._evaluate(rd, d)
                    d.selector_cache[rd.selector_key] = result
                    if result is not True and result is not False:
                        break  # one error fails the claim: allocate() reports it

    def _selectable(self, rd: _Request, d: DeviceEntry) -> bool:
        if d.binding_conditions and not self.features.device_binding_conditions:
            return False
        cache = d.selector_cache
        key = rd.selector_key
        result = cache.get(key)
        if result is None:
            result = self._evaluate(rd, d)
            cache[key] = result
        if result is not True:
            if result is False:
                return False
            raise result
        if d.slice.per_device:
            try:
                return self.a.inventory.device_matches_node(d, self.node)
            except NodeSelectorError as exc:
                raise AllocationError(str(exc)) from None
        return True

    def _evaluate(self, rd: _Request, d: DeviceEntry) -> bool | Exception:
        class_exprs, request_exprs = rd.selector_key
        for i, expr in enumerate(class_exprs):
            outcome = self._match_one(expr, d, rd, i, in_claim=False)
            if outcome is not True:
                return outcome
        for i, expr in enumerate(request_exprs):
            outcome = self._match_one(expr, d, rd, i, in_claim=True)
            if outcome is not True:
                return outcome
        return True

    def _where(self, rd: _Request, index: int, *, in_claim: bool) -> str:
        """Which selector an error is about (only built for errors)."""
        if not in_claim:
            return f"DeviceClass {rd.device_class.metadata.name}: spec.selectors[{index}]"
        path = f"spec.devices.requests[{rd.request_index}]"
        path += f".firstAvailable[{rd.sub_index}]" if rd.parent else ".exactly"
        return f"ResourceClaim {self.claims[rd.claim_index].key}: {path}.selectors[{index}]"

    def _match_one(
        self, expr: str, d: DeviceEntry, rd: _Request, index: int, *, in_claim: bool
    ) -> bool | Exception:
        try:
            selector = compile_selector(expr)
        except CELError as exc:
            return AllocationError(
                f"{self._where(rd, index, in_claim=in_claim)}: CEL compile error: {exc}",
                claim=self.claims[rd.claim_index].key,
                request=rd.full_name,
            )
        try:
            return selector.matches(d.context, deadline=self.deadline, cancelled=self.cancelled)
        except CELCancelledError as exc:
            # not an answer about the device: raised, never cached
            if exc.timed_out:
                raise AllocationTimeoutError(str(exc)) from None
            raise AllocationCancelledError(str(exc)) from None
        except CELError as exc:
            where = self._where(rd, index, in_claim=in_claim)
            return AllocationError(
                f"{where} on device {d.id}: CEL runtime error: {exc}",
                claim=self.claims[rd.claim_index].key,
                request=rd.full_name,
            )

    # -- search -----------------------------------------------------------------------------
    def _check_time(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise AllocationCancelledError("filter operation aborted: asked by caller to stop")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise AllocationTimeoutError("filter operation aborted: time limit exceeded")

    # Hot path: positional arguments on purpose; one function mirrors upstream allocateOne.
    def _allocate_one(  # noqa: PLR0917, PLR0915
        self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int
    ) -> bool:
        timed = self.deadline is not None or self.cancelled is not None
        n_claims = len(self.claims)
        # Upstream's tail calls (request done: next request; last claim done: success)
        # are iterations of this loop; a step is counted and timed as a call would be.
        while True:
            self.calls += 1
            if timed and self.calls % _CHECK_EVERY == 1:
                self._check_time()
            if self.calls == _LOOK_AHEAD_AT:
                self._look_ahead()
            if ci >= n_claims:
                return True
            slots = self.slots[ci]
            if ri >= len(slots):
                if ci + 1 >= n_claims:
                    ci += 1  # no later claim could raise the max-size sentinel
                    continue
                skip = self.skip_claim
                if skip is None:
                    try:
                        return self._allocate_one(ci + 1, 0, 0, 0, False, 0)
                    except _MaxSizeExceededError:
                        return False
                return False if skip[ci + 1] else self._enter_claim(ci + 1)
            slot = slots[ri]
            if not in_sub and slot.first_available:
                all_exceeded = True
                for k in range(len(slot.alternatives)):
                    try:
                        ok = self._allocate_one(ci, ri, k, 0, True, 0)
                    except _MaxSizeExceededError:
                        continue
                    all_exceeded = False
                    if ok:
                        self.selected[ci][ri] = k
                        return True
                if all_exceeded:
                    raise _MAX_SIZE
                return False
            rd = slot.alternatives[si]
            if rd.all_mode and not rd.all_devices:
                return False
            if di < rd.num_devices:
                break
            ri, si, di, in_sub, start = ri + 1, 0, 0, False, 0
        if rd.num_devices - di > MAX_RESULTS - len(self.results[ci]):
            raise _MAX_SIZE
        # A pick for the last slot of the last request of the last claim completes the
        # search: the step after it would only walk past the ends and succeed.
        last = di + 1 >= rd.num_devices and ri + 1 >= len(slots) and ci + 1 >= n_claims
        if rd.all_mode:
            d = rd.all_devices[di]
            pick = self._allocate_device(rd, d, True)
            if pick is None:
                return False
            if last:
                return True
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                self._deallocate(pick)
                raise
            if not done:
                self._deallocate(pick)
            return done
        candidates = self.candidates
        admin = rd.admin
        key = rd.selector_key
        dedicated = self.dedicated
        allocating = self.allocating
        capacity_on = self.features.consumable_capacity
        in_flight, persisted = self.allocating_capacity, self.a.state.capacity  # live maps
        for index in range(start, len(candidates)):
            d = candidates[index]
            dev_id = d.id
            if admin:
                holders = allocating.get(dev_id)
                if holders and ci in holders:
                    continue
            elif dev_id in dedicated or dev_id in allocating:  # holder sets are never empty
                continue
            # _selectable and _capacity_fits, their common outcomes decided inline
            if not (d.plain_selection and d.selector_cache.get(key) is True) and (
                not self._selectable(rd, d)
            ):
                continue
            if (
                capacity_on
                # no capacity asked, taken whole, nothing of any device in use: fits
                and (rd.capacity or not d.whole_capacity or in_flight or persisted)
                and not self._capacity_fits(rd, d)
            ):
                continue
            pick = self._allocate_device(rd, d, False)
            if pick is None:
                continue
            if last:
                return True
            try:
                done = self._allocate_one(ci, ri, si, di + 1, in_sub, index + 1)
            except BaseException:
                self._deallocate(pick)
                raise
            if done:
                return True
            self._deallocate(pick)
        return False

    def _look_ahead(self) -> None:
        """Find claims no path of the search can allocate (see :mod:`drakit.allocator.lookahead`):
        raise the hopeless sentinel when the whole search can only answer "no", else mark
        the claims (after the first) that are doomed and quiet, never to be entered. Both
        skip only paths that upstream walks to the same "no" (the answers stay its own)."""
        outlooks = [
            claim_outlook(
                [slot.alternatives for slot in slots],
                bool(self.constraints[ci]),
                self.candidates,
                self._verdict,  # type: ignore[arg-type]  # _Request is an Alternative
            )
            for ci, slots in enumerate(self.slots)
        ]
        if hopeless(outlooks):
            raise _HOPELESS
        later: set[DeviceEntry] = set()
        relevant = []
        for outlook in reversed(outlooks):
            later.update(outlook.devices)
            devices = tuple(d for d in self.candidates if d in later)
            pools = tuple(sorted({d.pool_id for d in devices if d.counters}))
            relevant.append((devices, pools))
        relevant.reverse()
        self.relevant = relevant
        self.skip_claim = [ci > 0 and o.doomed and o.quiet for ci, o in enumerate(outlooks)]

    def _enter_claim(self, ci: int) -> bool:
        """The search from the entry of claim ``ci`` (> 0), remembered when it answers
        "no": it reads only the state kept in :meth:`_entry_key` (a claim starts with no
        results and fresh constraints; devices held by earlier claims matter only as held,
        admin requests ask only for holders of their own claim), so the same key gets the
        same answer, without an error (an error ends the whole search)."""
        key = self._entry_key(ci)
        failed = self.failed_entries
        if key in failed:
            return False
        try:
            done = self._allocate_one(ci, 0, 0, 0, False, 0)
        except _MaxSizeExceededError:
            done = False
        if not done:
            if len(failed) >= _MAX_FAILED_ENTRIES:
                failed.clear()
            failed.add(key)
        return done

    def _entry_key(self, ci: int) -> tuple[Any, ...]:
        """The state the search from the entry of claim ``ci`` depends on: for each device
        its requests may pick, whether it is held and its in-flight capacity; the counters
        consumed in the pools of those that consume counters."""
        devices, pools = self.relevant[ci]
        allocating, flight = self.allocating, self.allocating_capacity
        held = []
        for d in devices:
            dev_id = d.id
            taken = flight.get(dev_id)
            held.append(
                (dev_id in allocating, None if taken is None else tuple(sorted(taken.items())))
            )
        consumed = self.consumed_counters
        counters = []
        for pool_id in pools:
            sets = consumed.get(pool_id)
            counters.append(
                None
                if sets is None
                else tuple(sorted((name, tuple(sorted(c.items()))) for name, c in sets.items()))
            )
        return ci, tuple(held), tuple(counters)

    def _verdict(self, rd: _Request, d: DeviceEntry) -> Verdict:
        """The checks of the search on ``d`` for ``rd`` that do not depend on its state,
        in the search's order: NEVER when one refuses ``d``, MAY_FAIL when one raises."""
        if not rd.admin and d.id in self.dedicated:
            return Verdict.NEVER  # in use: refused before anything can raise
        features = self.features
        try:
            if not self._selectable(rd, d):
                return Verdict.NEVER
            # consumption in flight only adds to the persisted one: what does not fit
            # next to the persisted consumption never fits
            if features.consumable_capacity and not fits_capacity(
                rd.capacity,
                d.capacity,
                self.a.state.capacity.get(d.id),
                None,
                features.fractional_capacity_range,
            ):
                return Verdict.NEVER
        except AllocationTimeoutError:
            raise
        except (AllocationError, CapacityError):
            return Verdict.MAY_FAIL
        if (
            (d.slice.skip_node_operations and not features.optional_node_operations)
            or (d.counters and not features.partitionable_devices)
            or (features.device_taints and d.blocking_taints and taint_blocks(d, rd.tolerations))
        ):
            return Verdict.NEVER  # refused by _allocate_device before anything can raise
        return Verdict.POSSIBLE

    def _capacity_fits(self, rd: _Request, d: DeviceEntry) -> bool:
        if not rd.capacity:
            if not d.capacity:
                return True
            persisted = self.a.state.capacity.get(d.id)
            in_flight = self.allocating_capacity.get(d.id)
            if d.whole_capacity and not persisted and not in_flight:
                return True  # fits_capacity's own shortcut, decided without a call
        else:
            persisted = self.a.state.capacity.get(d.id)
            in_flight = self.allocating_capacity.get(d.id)
        try:
            plan = self._capacity_plan(rd, d)
        except CapacityError as exc:
            raise AllocationError(
                f"claim {self.claims[rd.claim_index].key}, request {rd.name}: checking "
                f"capacity for device {d.id}: {exc}"
            ) from None
        return fits_plan(plan, persisted, in_flight)

    def _capacity_plan(self, rd: _Request, d: DeviceEntry) -> CapacityPlan | None:
        """The request's capacity plan for the device, made once per call (a search
        checks the same pair again for every combination of the devices before it)."""
        key = (rd, d)
        plans = self.plans
        if key in plans:
            return plans[key]
        plan = plans[key] = capacity_plan(
            rd.capacity, d.capacity, self.features.fractional_capacity_range
        )
        return plan

    def _allocate_device(self, rd: _Request, d: DeviceEntry, must: bool) -> _Pick | None:
        """Tentatively add ``d`` for ``rd``; returns the pick (undo it with
        :meth:`_deallocate`), or None if refused (then nothing changed).

        A device that ``must`` be added (All mode) is checked for holders here; the
        search over candidates has checked that already, more strictly."""
        features = self.features
        ci = rd.claim_index
        dev_id = d.id
        multi = features.consumable_capacity and d.multi
        if must:
            holders = self.allocating.get(dev_id)
            if not multi and rd.admin and holders and ci in holders:
                return None
            if not rd.admin and (holders or dev_id in self.dedicated):
                return None
        if d.slice.skip_node_operations and not features.optional_node_operations:
            return None
        if d.counters and not features.partitionable_devices:
            return None
        pick = _Pick(rd, d, False, None)
        skip_counters = multi and self._capacity_in_use(dev_id)
        if d.counters and not skip_counters:
            if not self._reserve_counters(d):
                return None
            pick.counters_reserved = True
        if features.device_taints and d.blocking_taints and taint_blocks(d, rd.tolerations):
            self._undo(pick)
            return None
        if self.constraints[ci] and not self._add_to_constraints(pick, must):
            self._undo(pick)
            return None
        if not multi:
            marks = self.allocating.get(dev_id)
            if marks is None:
                marks = self.allocating[dev_id] = set()
            marks.add(ci)
            pick.marked = True
        if features.consumable_capacity:
            # no capacity asked, taken whole, nothing of any device in use: fits
            if (
                rd.capacity or not d.whole_capacity or self.allocating_capacity
                or self.a.state.capacity
            ) and not self._capacity_fits(rd, d):  # fmt: skip
                self._undo(pick)
                return None
            if multi:
                self._take_capacity(pick)
        self.results[ci].append(pick)
        return pick

    def _add_to_constraints(self, pick: _Pick, must: bool) -> bool:
        """Add the pick's device to the constraints of its claim that cover its request;
        False (or AllocationError when the device ``must`` be added) when one refuses.
        The pick records the constraints it was added to, also on refusal."""
        rd, d = pick.request, pick.device
        added: list[Constraint] = []
        pick.constraints = added
        attributes = d.device.attributes
        for constraint in self.constraints[rd.claim_index]:
            if not constraint.applies(rd.name, rd.parent):
                continue
            if not constraint.add(d.id, attributes):
                if must:
                    self._undo(pick)
                    claim = self.claims[rd.claim_index].key
                    raise AllocationError(
                        f"claim {claim}, request {rd.name}: cannot add device {d.id} because "
                        "a claim constraint would not be satisfied",
                        claim=claim,
                        request=rd.full_name,
                    )
                return False
            added.append(constraint)
        return True

    def _take_capacity(self, pick: _Pick) -> None:
        """Consume the request's capacity of a multi-allocatable device, under a new share."""
        rd, d = pick.request, pick.device
        try:
            plan = self._capacity_plan(rd, d)
            consumed = (
                {name: amount for name, amount, _ in plan}
                if plan is not None
                else consumed_capacity(
                    rd.capacity, d.capacity, self.features.fractional_capacity_range
                )
            )
        except CapacityError as exc:
            self._undo(pick)
            raise AllocationError(
                f"claim {self.claims[rd.claim_index].key}, request {rd.name}: computing "
                f"consumed capacity for device {d.id}: {exc}"
            ) from None
        pick.shared = True
        pick.consumed = consumed or None
        pick.capacity_existed = d.id in self.allocating_capacity
        in_flight = self.allocating_capacity.setdefault(d.id, {})
        for name, amount in consumed.items():
            in_flight[name] = in_flight.get(name, 0) + amount
        pick.capacity_taken = consumed

    def _deallocate(self, pick: _Pick) -> None:
        """Undo :meth:`_allocate_device` of ``pick``, the newest pick of its claim."""
        results = self.results[pick.request.claim_index]
        if results and results[-1] is pick:
            results.pop()
        else:  # pragma: no cover - the search undoes picks last-in first-out
            results.remove(pick)
        self._undo(pick)

    def _undo(self, pick: _Pick) -> None:
        """Undo the bookkeeping ``pick`` recorded, newest step first."""
        dev_id = pick.device.id
        taken = pick.capacity_taken
        if taken is not None:
            # restore the entry's presence too: presence means "capacity in use"
            flight = self.allocating_capacity.get(dev_id)
            if flight is not None:
                for name, amount in taken.items():
                    if name in flight:
                        flight[name] -= amount
                if all(v == 0 for v in flight.values()):
                    del self.allocating_capacity[dev_id]
            if pick.capacity_existed and dev_id not in self.allocating_capacity:
                self.allocating_capacity[dev_id] = {}
            pick.capacity_taken = None
        if pick.marked:
            marks = self.allocating.get(dev_id)
            if marks is not None:
                marks.discard(pick.request.claim_index)
                if not marks:
                    self.allocating.pop(dev_id, None)
            pick.marked = False
        for constraint in reversed(pick.constraints):
            constraint.remove()
        pick.constraints = ()
        if pick.counters_reserved:
            self._release_counters(pick.device)
            pick.counters_reserved = False

    def _capacity_in_use(self, dev_id: DeviceID) -> bool:
        return self.a.state.capacity_in_use(dev_id) or dev_id in self.allocating_capacity

    def _reserve_counters(self, d: DeviceEntry) -> bool:
        pool_id = d.pool_id
        pool = self.pools_by_id[pool_id]  # candidates always come from a pool
        available = self.a.available_counters(pool)
        consumed = self.consumed_counters.get(pool_id)
        if consumed is None:
            consumed = self.consumed_counters[pool_id] = {}
        for set_name, counters in d.counters:
            used = consumed.get(set_name)
            if used is None:
                used = consumed[set_name] = {}
            for name, amount in counters:
                used[name] = used.get(name, 0) + amount
        for set_name, counters_available in available.items():
            used_in_set = consumed.get(set_name)
            # every counter of the pool must stay covered, also untouched over-committed ones
            if used_in_set is None:
                for value in counters_available.values():
                    if value < 0:
                        self._release_counters(d)
                        return False
                continue
            for name, value in counters_available.items():
                if value < used_in_set.get(name, 0):
                    self._release_counters(d)
                    return False
        return True

    def _release_counters(self, d: DeviceEntry) -> None:
        consumed = self.consumed_counters[d.pool_id]
        for set_name, counters in d.counters:
            used = consumed[set_name]
            for name, amount in counters:
                used[name] -= amount

    # -- results ----------------------------------------------------------------------------
    def _build_result(self, ci: int, claim: ResourceClaim) -> AllocationResult:
        picks = self.results[ci]
        binding = self.features.device_binding_conditions
        has_config = bool(claim.spec.devices.config)
        if not has_config:
            for slot in self.slots[ci]:
                if slot.class_config:
                    has_config = True
                    break
        config = self._build_config(ci, claim) if has_config else []
        node_selector = self._node_selector(picks)
        if len(picks) == 1 and not config:
            p = picks[0]
            if not p.shared and p.consumed is None:
                return _single_allocation(p.request, p.device, binding, node_selector)
        results = []
        for p in picks:
            if not p.shared and p.consumed is None:
                results.append(_plain_result(p.request, p.device, binding))
                continue
            d = p.device
            consumed = None
            if p.consumed is not None:
                consumed = FrozenDict(
                    {
                        name: Quantity(Fraction(v, NANO), d.capacity[name].value.format)
                        for name, v in p.consumed.items()
                    }
                )
            share_id = self.a.new_share_id() if p.shared else None
            results.append(_device_result(p.request, d, binding, share_id, consumed))
        return AllocationResult(
            devices=DeviceAllocationResult(results=tuple(results), config=tuple(config)),
            node_selector=node_selector,
        )

    def _selected(self, ci: int, ri: int) -> _Request:
        return self.slots[ci][ri].alternatives[self.selected[ci][ri]]

    def _build_config(self, ci: int, claim: ResourceClaim) -> list[DeviceAllocationConfiguration]:
        """The configuration of the claim's allocation (call it only when the claim or the
        class of one of its requests' alternatives has some)."""
        requests = claim.spec.devices.requests
        out: list[list[Any]] = []  # [source, requests(list|None), opaque]
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri in range(len(requests)):
            rd = self._selected(ci, ri)
            cls = rd.device_class
            name = cls.metadata.name
            if name in class_ranges:
                start, end = class_ranges[name]
                for i in range(start, end):
                    out[i][1].append(rd.full_name)
                continue
            start = len(out)
            for cfg in cls.spec.config:
                out.append([CONFIG_SOURCE_CLASS, [rd.full_name], cfg.opaque])
            class_ranges[name] = (start, len(out))
        selected_names = {}
        for ri, req in enumerate(requests):
            rd = self._selected(ci, ri)
            selected_names[req.name] = rd.full_name if rd.parent else None
        for claim_cfg in claim.spec.devices.config:
            names = claim_cfg.requests
            if not names:
                out.append([CONFIG_SOURCE_CLAIM, [], claim_cfg.opaque])
                continue
            for req in requests:
                sub_full = selected_names[req.name]
                if req.name in names or (sub_full is not None and sub_full in names):
                    out.append([CONFIG_SOURCE_CLAIM, list(names), claim_cfg.opaque])
                    break
        for entry in out:
            names = entry[1]
            if not names:
                continue
            covers_all = True
            for req in requests:
                if req.name in names:
                    continue
                sub_full = selected_names[req.name]
                if sub_full is not None and sub_full in names:
                    continue
                covers_all = False
                break
            if covers_all:
                entry[1] = []
        return [
            DeviceAllocationConfiguration(source=src, requests=tuple(names), opaque=opaque)
            for src, names, opaque in out
        ]

    def _node_selector(self, picks: list[_Pick]) -> NodeSelector | None:
        # made when the first selector is merged: most allocations are bound to a node or
        # to none
        merged: tuple[list[NodeSelectorRequirement], list[NodeSelectorRequirement]] | None = None
        for p in picks:
            d = p.device
            s = d.slice
            if s.per_device:
                node_name, selector = d.device.node_name, d.device.node_selector
            else:
                node_name, selector = s.slice.spec.node_name, s.node_selector
            if node_name is not None or d.binds_to_node:
                return _node_name_selector(self.node.name)
            if selector is not None:
                terms = selector.node_selector_terms
                if len(terms) == 1:
                    if merged is None:
                        merged = ([], [])
                    _merge(terms[0].match_fields, merged[0])
                    _merge(terms[0].match_expressions, merged[1])
                elif len(terms) > 1:
                    raise AllocationError(
                        f"create NodeSelector for claim {self.claims[p.request.claim_index].name}: "
                        f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
                    )
        if merged is not None and (merged[0] or merged[1]):
            fields, expressions = merged
            return NodeSelector(
                node_selector_terms=(
                    NodeSelectorTerm(
                        match_expressions=tuple(expressions), match_fields=tuple(fields)
                    ),
                )
            )
        return None


# Distinct request signatures kept per device: a bound on memory, not a tuning knob (a
# scheduler's claims use a handful of request names).
_MAX_RESULTS_PER_DEVICE: Final = 16


def _plain_result(rd: _Request, d: DeviceEntry, binding: bool) -> DeviceRequestAllocationResult:
    """The result naming ``d`` for ``rd`` without a share (no shareID, no consumed
    capacity). Results are immutable and depend only on the request's name, admin flag
    and tolerations and on the device, so the device keeps them for the next pod."""
    key = rd.result_key  # binding is the allocator's feature gate, part of the key
    cache = d.result_cache
    if cache is None:
        cache = d.result_cache = {}
    hit: DeviceRequestAllocationResult | None = cache.get(key)
    if hit is None:
        hit = _device_result(rd, d, binding, None, None)
        if len(cache) >= _MAX_RESULTS_PER_DEVICE:
            cache.clear()
        cache[key] = hit
    return hit


def _single_allocation(
    rd: _Request, d: DeviceEntry, binding: bool, node_selector: NodeSelector | None
) -> AllocationResult:
    """The allocation of one device for ``rd`` without a share and without
    configuration: kept by the device next to its plain result (both immutable, keyed
    alike) and used again for the same request signature and node selector."""
    key = rd.allocation_key
    cache = d.result_cache
    hit: AllocationResult | None = cache.get(key) if cache is not None else None
    if hit is None or hit.node_selector is not node_selector:
        result = _plain_result(rd, d, binding)
        cache = d.result_cache
        assert cache is not None  # made by _plain_result
        if len(cache) >= _MAX_RESULTS_PER_DEVICE:
            cache.clear()
        hit = AllocationResult(
            devices=DeviceAllocationResult(results=(result,), config=()),
            node_selector=node_selector,
        )
        cache[key] = hit
    return hit


def _device_result(
    rd: _Request,
    d: DeviceEntry,
    binding: bool,
    share_id: str | None,
    consumed: FrozenDict | None,
) -> DeviceRequestAllocationResult:
    return DeviceRequestAllocationResult(
        request=rd.full_name,
        driver=d.id.driver,
        pool=d.id.pool,
        device=d.id.device,
        admin_access=True if rd.admin else None,
        tolerations=rd.tolerations,
        binding_conditions=d.binding_conditions if binding else (),
        binding_failure_conditions=d.binding_failure_conditions if binding else (),
        share_id=share_id,
        consumed_capacity=consumed or FrozenDict(),
        skip_node_operations=d.slice.skip_node_operations,
    )


@functools.lru_cache(maxsize=16384)
def _node_name_selector(node_name: str) -> NodeSelector:
    """``metadata.name In (node_name)``: the selector of an allocation bound to one node
    (immutable, so one per node name is shared by all its allocations)."""
    return NodeSelector(
        node_selector_terms=(
            NodeSelectorTerm(
                match_fields=(
                    NodeSelectorRequirement(
                        key="metadata.name", operator="In", values=(node_name,)
                    ),
                )
            ),
        )
    )


def _expressions(selectors: Sequence[DeviceSelector]) -> tuple[str, ...]:
    """The CEL expressions of ``selectors`` (a loop, not a generator: once per request
    of every pod)."""
    if not selectors:
        return ()
    out = []
    for sel in selectors:
        if sel.cel:
            out.append(sel.cel.expression)
    return tuple(out)


def _is_guarded(selector_key: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
    """Whether any of the expressions is evaluated in a guarded child (compile errors are
    not: allocate() reports them)."""
    for expr in (*selector_key[0], *selector_key[1]):
        try:
            if compile_selector(expr).risky:
                return True
        except CELError:
            continue
    return False


def _merge(source: Sequence[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for req in source:
        values = set(req.values)
        if not any(
            r.key == req.key and r.operator == req.operator and set(r.values) == values
            for r in into
        ):
            into.append(req)


def taint_blocks(d: DeviceEntry, tolerations: Sequence[DeviceToleration]) -> bool:
    for taint in d.blocking_taints:
        if not any(_tolerates(t, taint.key, taint.value, taint.effect) for t in tolerations):
            return True
    return False


def _tolerates(t: DeviceToleration, key: str, value: str, effect: str) -> bool:
    if t.effect and t.effect != effect:
        return False
    if t.key and t.key != key:
        return False
    if t.operator in ("", "Equal"):
        return t.value == value
    return t.operator == "Exists"
