"""Why claims do not fit on a node: a structured account per request, and its rendering.

:func:`explain` looks at every request (and subrequest) of every claim on its own, against
the allocated state, and counts what happened to each candidate device: considered,
rejected by the class selector, by the request's selectors, by node selection, by binding
conditions, by a taint, because it is in use, because its shared counters are used up, or
because its capacity does not fit. Devices that pass every check are *suitable*. A device
whose shared counters are used up names each counter: set, pool, needed and left. When the
requests have enough suitable devices on their own, the refusal comes from the combination:
the account names what the requests compete for (:mod:`drakit.allocator.competition`):
shared counters they together need more of than is left, devices they together want more
of than suit them, or else the devices and counter sets they share (where the claims'
constraints decide). Pools that are incomplete or invalid on the node are listed with the
reason.

The analysis is separate from the search, so allocation stays fast; it runs only when a
person asks (``drakit allocate --explain``) or a controller wants an event message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from drakit.allocator.allocate import AllocationError, Allocator, taint_blocks
from drakit.allocator.capacity import CapacityError, fits_capacity
from drakit.allocator.cel import CELError, compile_selector
from drakit.allocator.competition import (
    Demand,
    counter_shortages,
    device_shortages,
    overlaps,
)
from drakit.allocator.constraints import lookup_attribute
from drakit.allocator.inventory import DeviceEntry
from drakit.allocator.model import (
    ALLOCATION_MODE_ALL,
    DeviceSubRequest,
    ExactDeviceRequest,
    Node,
    ResourceClaim,
)
from drakit.allocator.nodeselector import NodeSelectorError
from drakit.allocator.quantity import DECIMAL_SI, Quantity

__all__ = ["ClaimExplanation", "NodeExplanation", "RequestExplanation", "explain", "render"]

REASONS = (
    ("class_selector", "rejected by the class selector"),
    ("request_selector", "rejected by the request's selectors"),
    ("node", "not reachable from this node"),
    ("binding_conditions", "need binding conditions (feature off)"),
    ("taint", "tainted (no matching toleration)"),
    ("in_use", "already allocated"),
    ("counters", "shared counters used up"),
    ("capacity", "not enough capacity"),
    ("constraint", "lack the attribute a claim constraint compares"),
)


@dataclass
class RequestExplanation:
    """What happened to the candidate devices of one request or subrequest."""

    request: str
    device_class: str
    wanted: str
    considered: int = 0
    suitable: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    error: str = ""
    note: str = ""
    constraint_notes: list[str] = field(default_factory=list)
    suitable_devices: list[DeviceEntry] = field(default_factory=list, repr=False)
    #: For devices whose shared counters are used up: one line per counter that is short.
    counter_notes: list[str] = field(default_factory=list)
    short_amounts: dict[tuple[str, str, str], list[Quantity]] = field(
        default_factory=dict, repr=False
    )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "request": self.request,
            "deviceClass": self.device_class,
            "wanted": self.wanted,
            "considered": self.considered,
            "suitable": self.suitable,
            "rejected": {k: v for k, v in self.rejected.items() if v},
        }
        if self.error:
            d["error"] = self.error
        if self.note:
            d["note"] = self.note
        if self.constraint_notes:
            d["constraints"] = self.constraint_notes
        if self.counter_notes:
            d["counters"] = self.counter_notes
        return d


@dataclass
class ClaimExplanation:
    claim: str
    requests: list[RequestExplanation] = field(default_factory=list)
    constraints: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "constraints": self.constraints,
            "requests": [r.to_dict() for r in self.requests],
        }


@dataclass
class NodeExplanation:
    node: str
    claims: list[ClaimExplanation] = field(default_factory=list)
    incomplete_pools: list[str] = field(default_factory=list)
    invalid_pools: dict[str, str] = field(default_factory=dict)
    error: str = ""
    #: What requests that fit on their own compete for (:mod:`~drakit.allocator.competition`).
    together: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"node": self.node, "claims": [c.to_dict() for c in self.claims]}
        if self.together:
            d["together"] = self.together
        if self.incomplete_pools:
            d["incompletePools"] = self.incomplete_pools
        if self.invalid_pools:
            d["invalidPools"] = self.invalid_pools
        if self.error:
            d["error"] = self.error
        return d


def explain(allocator: Allocator, node: Node, claims: list[ResourceClaim]) -> NodeExplanation:
    """Account for every request of ``claims`` on ``node`` (claims API-defaulted)."""
    out = NodeExplanation(node=node.name)
    try:
        pools = allocator.inventory.pools_for_node(node)
    except NodeSelectorError as exc:
        out.error = str(exc)
        return out
    for p in pools.pools:
        if p.incomplete:
            out.incomplete_pools.append(f"{p.driver}/{p.name}")
        elif p.invalid:
            out.invalid_pools[f"{p.driver}/{p.name}"] = p.invalid_reason
    demands: list[tuple[RequestExplanation, Demand]] = []
    for claim in claims:
        ce = ClaimExplanation(claim=claim.key, constraints=len(claim.spec.devices.constraints))
        for request in claim.spec.devices.requests:
            if request.exactly is not None:
                ex = _explain_request(
                    allocator, node, pools.candidates, request.name, request.exactly
                )
                _apply_constraints(ex, claim, request.name, None, request.exactly)
                _conclude(ex, request.exactly)
                ce.requests.append(ex)
                demand = _demand(ex, request.exactly, claim.key, len(claims) > 1)
                if demand is not None:
                    demands.append((ex, demand))
            for sub in request.first_available:
                ex = _explain_request(
                    allocator, node, pools.candidates, f"{request.name}/{sub.name}", sub
                )
                _apply_constraints(ex, claim, sub.name, request.name, sub)
                _conclude(ex, sub)
                ce.requests.append(ex)
        out.claims.append(ce)
    _explain_together(allocator, pools.by_id, out, demands)
    return out


def _demand(
    ex: RequestExplanation, req: ExactDeviceRequest, claim: str, several_claims: bool
) -> Demand | None:
    """What the request takes from the others, when it has enough suitable devices on its
    own (a request without them is explained by its own rejections); admin access takes
    nothing."""
    if ex.error or req.admin_access:
        return None
    all_mode = req.allocation_mode == ALLOCATION_MODE_ALL
    count = ex.suitable if all_mode else (req.count or 0)
    if not count or ex.suitable < count:
        return None
    label = f"request {ex.request}" + (f" of claim {claim}" if several_claims else "")
    return Demand(label, count, tuple(ex.suitable_devices))


def _explain_together(
    allocator: Allocator,
    pools: Any,
    out: NodeExplanation,
    demands: list[tuple[RequestExplanation, Demand]],
) -> None:
    """Name what the requests that fit on their own compete for (counters first, then
    devices, else what they share), and point their notes at it."""
    if not demands:
        return
    plain = [d for _, d in demands]

    def left(pool_id: tuple[str, str]) -> Any:
        pool = pools.get(pool_id)
        return allocator.available_counters(pool) if pool is not None else {}

    counters = counter_shortages(plain, left)
    devices = device_shortages(plain) if not counters else []
    findings: list[tuple[tuple[str, ...], str]] = [
        (tuple(label for label, _, _ in f.shares), f.text()) for f in counters
    ] + [(f.labels, f.text()) for f in devices]
    if not findings:
        findings = [(labels, text) for labels, text in overlaps(plain)]
    out.together = [text for _, text in findings]
    for ex, demand in demands:
        named = [labels for labels, _ in findings if demand.label in labels]
        if not named or ex.note != _ON_THEIR_OWN:
            continue
        if all(labels == (demand.label,) for labels in named):
            ex.note = "enough suitable devices, but not all it wants at once (below)"
        else:
            ex.note = "enough suitable devices on its own, but not together with the others (below)"


def _explain_request(
    allocator: Allocator,
    node: Node,
    candidates: tuple[DeviceEntry, ...],
    name: str,
    req: ExactDeviceRequest | DeviceSubRequest,
) -> RequestExplanation:
    all_mode = req.allocation_mode == ALLOCATION_MODE_ALL
    wanted = "all matching devices" if all_mode else f"{req.count or 0} device(s)"
    ex = RequestExplanation(
        request=name,
        device_class=req.device_class_name,
        wanted=wanted,
        rejected={k: 0 for k, _ in REASONS},
    )
    cls = allocator.classes.get(req.device_class_name)
    if cls is None:
        ex.error = f"device class {req.device_class_name!r} does not exist"
        return ex
    class_exprs = [s.cel.expression for s in cls.spec.selectors if s.cel]
    request_exprs = [s.cel.expression for s in req.selectors if s.cel]
    admin = isinstance(req, ExactDeviceRequest) and bool(req.admin_access)
    capacity = req.capacity.requests if req.capacity is not None else None
    for d in candidates:
        ex.considered += 1
        try:
            reason = _first_rejection(
                allocator,
                node,
                d,
                class_exprs=class_exprs,
                request_exprs=request_exprs,
                admin=admin,
                capacity=capacity,
                req=req,
            )
        except (CELError, AllocationError, CapacityError, NodeSelectorError) as exc:
            ex.error = ex.error or str(exc)
            continue
        if reason is None:
            ex.suitable += 1
            ex.suitable_devices.append(d)
        else:
            ex.rejected[reason] += 1
            if reason == "counters":
                _note_short_counters(ex, allocator, node, d)
    ex.counter_notes = [
        _short_text(key, amounts) for key, amounts in sorted(ex.short_amounts.items())
    ]
    return ex


def _conclude(ex: RequestExplanation, req: ExactDeviceRequest | DeviceSubRequest) -> None:
    """Add the summary note once devices and constraints have been counted."""
    if ex.error or ex.constraint_notes:
        return
    if req.allocation_mode == ALLOCATION_MODE_ALL:
        if ex.suitable and any(ex.rejected[k] for k in ("in_use", "taint", "counters")):
            ex.note = "All mode needs every matching device, and some are unavailable"
    elif ex.suitable >= (req.count or 0):
        ex.note = _ON_THEIR_OWN


_ON_THEIR_OWN = (
    "enough suitable devices on their own: the claim's constraints or "
    "other requests and claims compete for them"
)


def _apply_constraints(
    ex: RequestExplanation,
    claim: ResourceClaim,
    name: str,
    parent: str | None,
    req: ExactDeviceRequest | DeviceSubRequest,
) -> None:
    """Drop suitable devices that lack a constrained attribute; note impossible groups."""
    all_mode = req.allocation_mode == ALLOCATION_MODE_ALL
    needed = ex.suitable if all_mode else (req.count or 0)
    for c in claim.spec.devices.constraints:
        attribute = c.match_attribute or c.distinct_attribute
        if attribute is None:
            continue
        covered = (
            not c.requests
            or (parent or name) in c.requests
            or (parent is not None and f"{parent}/{name}" in c.requests)
        )
        if not covered:
            continue
        values: list[tuple[Any, ...]] = []
        kept: list[DeviceEntry] = []
        for d in ex.suitable_devices:
            attr = lookup_attribute(d.id, d.device.attributes, attribute)
            if attr is None:
                ex.rejected["constraint"] += 1
                continue
            kept.append(d)
            values.append(attr.values())
        ex.suitable_devices = kept
        ex.suitable = len(kept)
        if not kept or needed <= 1:
            continue
        if c.match_attribute is not None:
            groups: dict[Any, int] = {}
            for vs in values:
                for v in set(vs):
                    groups[v] = groups.get(v, 0) + 1
            best = max(groups.values())
            if best < needed:
                ex.constraint_notes.append(
                    f"matchAttribute {attribute}: at most {best} suitable device(s) share a "
                    f"value, {needed} needed"
                )
        else:
            distinct = len({v for vs in values for v in vs})
            if distinct < needed:
                ex.constraint_notes.append(
                    f"distinctAttribute {attribute}: only {distinct} different value(s) among "
                    f"suitable devices, {needed} needed"
                )


def _first_rejection(
    allocator: Allocator,
    node: Node,
    d: DeviceEntry,
    *,
    class_exprs: list[str],
    request_exprs: list[str],
    admin: bool,
    capacity: Any,
    req: ExactDeviceRequest | DeviceSubRequest,
) -> str | None:
    features = allocator.features
    if d.binding_conditions and not features.device_binding_conditions:
        return "binding_conditions"
    # The allocator's cached answer for this device (class and request selectors together)
    # spares evaluating again, which matters for guarded selectors (a child process each).
    cached = d.selector_cache.get((tuple(class_exprs), tuple(request_exprs)))
    if isinstance(cached, Exception):
        raise cached
    if cached is not True:
        for expr in class_exprs:
            if not compile_selector(expr).matches(d.context):
                return "class_selector"
        if cached is False:
            return "request_selector"  # the class accepts it, so the request rejected it
        for expr in request_exprs:
            if not compile_selector(expr).matches(d.context):
                return "request_selector"
    if d.slice.per_device and not allocator.inventory.device_matches_node(d, node):
        return "node"
    if not admin and allocator.state.is_dedicated(d.id):
        return "in_use"
    if features.device_taints and d.blocking_taints and taint_blocks(d, req.tolerations):
        return "taint"
    if d.counters and features.partitionable_devices and not _counters_fit(allocator, node, d):
        return "counters"
    persisted = allocator.state.capacity.get(d.id)
    fractional = features.fractional_capacity_range
    if (
        features.consumable_capacity
        and (d.capacity or capacity)
        and not fits_capacity(capacity, d.capacity, persisted, None, fractional)
    ):
        return "capacity"
    return None


def _counters_fit(allocator: Allocator, node: Node, d: DeviceEntry) -> bool:
    return not _short_counters(allocator, node, d)


def _short_counters(
    allocator: Allocator, node: Node, d: DeviceEntry
) -> list[tuple[str, str, int, int]]:
    """(counter set, counter, needed, left) of each counter the device needs more of than
    its pool has left, in nano-units."""
    pools = allocator.inventory.pools_for_node(node)
    pool = next(p for p in pools.pools if p.id == (d.id.driver, d.id.pool))
    available = allocator.available_counters(pool)
    short = []
    for set_name, counters in d.counters:
        have = available.get(set_name, {})
        for name, amount in counters:
            if have.get(name, 0) < amount:
                short.append((set_name, name, amount, have.get(name, 0)))
    return short


def _note_short_counters(
    ex: RequestExplanation, allocator: Allocator, node: Node, d: DeviceEntry
) -> None:
    """Remember, per counter, what the device needs and what is left (as quantities)."""
    formats = {
        (cc.counter_set, name): c.value.format
        for cc in d.device.consumes_counters
        for name, c in cc.counters.items()
    }
    for set_name, name, needed, left in _short_counters(allocator, node, d):
        fmt = formats.get((set_name, name), DECIMAL_SI)
        amounts = ex.short_amounts.setdefault((d.id.driver + "/" + d.id.pool, set_name, name), [])
        if not amounts:
            amounts.append(_nanos(left, fmt))
        amounts.append(_nanos(needed, fmt))


def _nanos(amount: int, fmt: str) -> Quantity:
    return Quantity(Fraction(amount, 1_000_000_000), fmt)


def _short_text(key: tuple[str, str, str], amounts: list[Quantity]) -> str:
    """``counter set npu-0 of pool drv/node-a, counter memory: 20Gi to 40Gi needed, 0 left
    (3 device(s))`` from [left, needed, needed, ...]."""
    pool, set_name, name = key
    left, needed = amounts[0], amounts[1:]
    low, high = min(needed), max(needed)
    wants = f"{low} needed" if low == high else f"{low} to {high} needed"
    return (
        f"counter set {set_name} of pool {pool}, counter {name}: {wants}, {left} left "
        f"({len(needed)} device(s))"
    )


def render(explanation: NodeExplanation) -> str:
    """A plain-text account for a person."""
    lines = [f"node {explanation.node}: the claims do not fit"]
    if explanation.error:
        lines.append(f"  error: {explanation.error}")
    for pool in explanation.incomplete_pools:
        lines.append(f"  pool {pool} is incomplete (its driver is still publishing it); skipped")
    for pool, reason in explanation.invalid_pools.items():
        lines.append(f"  pool {pool} is invalid ({reason}); skipped")
    for ce in explanation.claims:
        extra = f", {ce.constraints} constraint(s)" if ce.constraints else ""
        lines.append(f"  claim {ce.claim}{extra}:")
        for r in ce.requests:
            lines.append(
                f"    request {r.request} (class {r.device_class}) wants {r.wanted}: "
                f"{r.suitable} of {r.considered} device(s) suitable"
            )
            for key, label in REASONS:
                n = r.rejected.get(key, 0)
                if n:
                    lines.append(f"      {n} {label}")
                if n and key == "counters":
                    lines.extend(f"        {note}" for note in r.counter_notes)
            if r.error:
                lines.append(f"      error: {r.error}")
            for note in r.constraint_notes:
                lines.append(f"      constraint: {note}")
            if r.note:
                lines.append(f"      note: {r.note}")
    if explanation.together:
        lines.append("  together:")
        lines.extend(f"    {line}" for line in explanation.together)
    return "\n".join(lines)
