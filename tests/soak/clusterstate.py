"""The checker's own reading of the API objects it judges: claims, pods, slices, nodes.

Deliberately independent of drakit's allocator and controller: a bug in their reading of
``resource.k8s.io/v1`` must not hide itself by being shared with the checker. Only the
fields the invariants need are read; a field of the wrong shape reads as absent (the
apiserver validated the objects; a checker must not crash on a surprise either).

:func:`read_cluster` takes one LIST per resource type. Each LIST is a consistent snapshot
of its type, but the four are taken at slightly different moments, so invariants that
join two types must allow for that (the checker confirms them over time).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from drakit.kubeapi.resources import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, Resource
from soak.quantity import parse_quantity

#: The finalizer every allocator puts on a claim before writing its allocation.
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
#: Set by the resourceclaim controller on claims it generates from a pod's template.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

DeviceKey = tuple[str, str, str]  # (driver, pool, device)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Result:
    """One allocation result: a device given to one request of a claim."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    share_id: str | None
    consumed: Mapping[str, Fraction]

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Claim:
    """A ResourceClaim as the checker sees it."""

    namespace: str
    name: str
    uid: str
    finalizers: tuple[str, ...]
    deleting: bool
    allocated: bool
    results: tuple[Result, ...]
    node_selector: Mapping[str, Any] | None  # None: usable on every node
    reserved_pod_uids: tuple[str, ...]
    owner_pod_uid: str | None  # the controlling Pod of a generated claim

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def generated(self) -> bool:
        return self.owner_pod_uid is not None


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``, resolved to a claim name if it can be."""

    entry: str
    claim_name: str | None  # None: a template claim not generated (or not needed) yet
    from_template: bool


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node_name: str
    phase: str
    deleting: bool
    claims: tuple[PodClaim, ...]
    unschedulable: str  # the message of PodScheduled=False/Unschedulable, else ""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def running(self) -> bool:
        """Running in the harness world: prepared by the kubelet harness, which then marks the
        pod Running; a pod being deleted is on its way out and judged by other rules."""
        return self.phase == "Running" and bool(self.node_name) and not self.deleting

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class Device:
    """What a slice says about one device, as far as sharing and counters go."""

    multi_allocatable: bool
    capacity: Mapping[str, Fraction]
    consumes: Mapping[tuple[str, str], Fraction]  # (counter set, counter) -> amount
    node_name: str  # the slice's or the device's own node, "" when not node-local


@dataclass(frozen=True)
class Pool:
    """The newest generation of one pool of the checker's driver."""

    name: str
    generation: int
    expected_slices: int
    slices: int
    node_names: frozenset[str]
    devices: Mapping[str, Device]
    counters: Mapping[tuple[str, str], Fraction]  # (counter set, counter) -> value

    @property
    def complete(self) -> bool:
        return self.slices >= self.expected_slices


@dataclass
class ClusterState:
    """One reading of the cluster: every claim and pod, the driver's pools, node labels."""

    claims: list[Claim] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    pools: dict[str, Pool] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Quantities or shapes the checker could not read ("slice X: ..."), reported as-is.
    unreadable: list[str] = field(default_factory=list)
    read_at: float = 0.0

    def pods_by_uid(self) -> dict[str, Pod]:
        return {p.uid: p for p in self.pods}

    def claims_by_ref(self) -> dict[str, Claim]:
        return {c.ref: c for c in self.claims}


def read_cluster(api: Any, driver: str) -> ClusterState:
    """Read every claim, pod and node and the slices of ``driver`` (one LIST each)."""
    state = ClusterState(read_at=time.time())
    state.claims = [parse_claim(c) for c in Resource(api, RESOURCE_CLAIMS).list().items]
    state.pods = [parse_pod(p) for p in Resource(api, PODS).list().items]
    slices = Resource(api, RESOURCE_SLICES).list(field_selector=f"spec.driver={driver}").items
    state.pools = parse_pools(slices, driver, state.unreadable)
    for node in Resource(api, NODES).list().items:
        meta = _dict(node.get("metadata"))
        labels = {str(k): str(v) for k, v in _dict(meta.get("labels")).items()}
        state.node_labels[str(meta.get("name", ""))] = labels
    return state


# -- claims ------------------------------------------------------------------------------


def parse_claim(obj: Mapping[str, Any]) -> Claim:
    meta = _dict(obj.get("metadata"))
    status = _dict(obj.get("status"))
    allocation = status.get("allocation")
    allocated = isinstance(allocation, dict)
    alloc = _dict(allocation)
    results = tuple(parse_result(r) for r in _list(_dict(alloc.get("devices")).get("results")) if r)
    selector = alloc.get("nodeSelector")
    reserved = tuple(
        str(r.get("uid", ""))
        for r in _list(status.get("reservedFor"))
        if isinstance(r, dict) and r.get("resource") == "pods" and not r.get("apiGroup")
    )
    owner = next(
        (
            str(o.get("uid", ""))
            for o in _list(meta.get("ownerReferences"))
            if isinstance(o, dict) and o.get("kind") == "Pod" and o.get("controller")
        ),
        None,
    )
    annotations = _dict(meta.get("annotations"))
    if owner is None and POD_CLAIM_NAME_ANNOTATION in annotations:
        owner = ""  # generated, but its owner reference is gone: judged as an orphan
    return Claim(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        finalizers=tuple(str(f) for f in _list(meta.get("finalizers"))),
        deleting=bool(meta.get("deletionTimestamp")),
        allocated=allocated,
        results=results,
        node_selector=selector if isinstance(selector, dict) else None,
        reserved_pod_uids=reserved,
        owner_pod_uid=owner,
    )


def parse_result(raw: Any) -> Result:
    data = _dict(raw)
    consumed: dict[str, Fraction] = {}
    for name, amount in _dict(data.get("consumedCapacity")).items():
        try:
            consumed[str(name)] = parse_quantity(amount)
        except ValueError:
            continue  # the apiserver validated it; an unreadable amount counts as none
    share = data.get("shareID")
    return Result(
        request=str(data.get("request", "")),
        driver=str(data.get("driver", "")),
        pool=str(data.get("pool", "")),
        device=str(data.get("device", "")),
        admin_access=data.get("adminAccess") is True,
        share_id=None if share is None else str(share),
        consumed=consumed,
    )


# -- pods --------------------------------------------------------------------------------


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    meta = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    generated = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in _list(status.get("resourceClaimStatuses"))
        if isinstance(s, dict)
    }
    claims = []
    for entry in _list(spec.get("resourceClaims")):
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name", ""))
        if entry.get("resourceClaimName"):
            claims.append(PodClaim(name, str(entry["resourceClaimName"]), from_template=False))
        elif name in generated and not generated[name]:
            continue  # an entry without a claim name: no claim was needed (API contract)
        else:
            claim_name = generated.get(name)
            claims.append(PodClaim(name, str(claim_name) if claim_name else None, True))
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        claims=tuple(claims),
        unschedulable=_unschedulable_message(status),
    )


def _unschedulable_message(status: Mapping[str, Any]) -> str:
    for condition in _list(status.get("conditions")):
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return str(condition.get("message") or "Unschedulable")
    return ""


# -- slices ------------------------------------------------------------------------------


def parse_pools(
    slices: Iterable[Mapping[str, Any]], driver: str, problems: list[str]
) -> dict[str, Pool]:
    """The newest generation of each pool of ``driver``, merged over its slices.

    Older generations are ignored, as every allocator ignores them: a pool being
    republished briefly holds slices of two generations.
    """
    newest: dict[str, int] = {}
    mine = [_dict(s) for s in slices if _dict(s.get("spec")).get("driver") == driver]
    for s in mine:
        pool = _dict(_dict(s.get("spec")).get("pool"))
        name = str(pool.get("name", ""))
        newest[name] = max(newest.get(name, -1), _int(pool.get("generation")))
    pools: dict[str, Pool] = {}
    for s in mine:
        spec = _dict(s.get("spec"))
        pool_spec = _dict(spec.get("pool"))
        name = str(pool_spec.get("name", ""))
        generation = _int(pool_spec.get("generation"))
        if generation != newest[name]:
            continue
        where = f"ResourceSlice {_dict(s.get('metadata')).get('name', '?')}"
        before = pools.get(name) or Pool(
            name, generation, _int(pool_spec.get("resourceSliceCount")), 0, frozenset(), {}, {}
        )
        node = str(spec.get("nodeName") or "")
        devices = dict(before.devices)
        nodes = set(before.node_names) | ({node} if node else set())
        for raw in _list(spec.get("devices")):
            device_name, device = _parse_device(_dict(raw), node, where, problems)
            devices[device_name] = device
            if device.node_name:
                nodes.add(device.node_name)
        counters = dict(before.counters)
        for counter_set in _list(spec.get("sharedCounters")):
            set_name = str(_dict(counter_set).get("name", ""))
            for counter, value in _dict(_dict(counter_set).get("counters")).items():
                amount = _quantity(
                    _dict(value).get("value"), f"{where} counter {set_name}/{counter}", problems
                )
                counters[(set_name, str(counter))] = amount
        pools[name] = Pool(
            name,
            generation,
            before.expected_slices,
            before.slices + 1,
            frozenset(nodes),
            devices,
            counters,
        )
    return pools


def _parse_device(
    raw: dict[str, Any], slice_node: str, where: str, problems: list[str]
) -> tuple[str, Device]:
    name = str(raw.get("name", ""))
    capacity = {
        str(cap): _quantity(
            _dict(value).get("value"), f"{where} device {name} capacity {cap}", problems
        )
        for cap, value in _dict(raw.get("capacity")).items()
    }
    consumes: dict[tuple[str, str], Fraction] = {}
    for use in _list(raw.get("consumesCounters")):
        set_name = str(_dict(use).get("counterSet", ""))
        for counter, value in _dict(_dict(use).get("counters")).items():
            amount = _quantity(
                _dict(value).get("value"),
                f"{where} device {name} consumes {set_name}/{counter}",
                problems,
            )
            consumes[(set_name, str(counter))] = (
                consumes.get((set_name, str(counter)), Fraction(0)) + amount
            )
    device = Device(
        multi_allocatable=raw.get("allowMultipleAllocations") is True,
        capacity=capacity,
        consumes=consumes,
        node_name=str(raw.get("nodeName") or slice_node),
    )
    return name, device


def _quantity(value: Any, what: str, problems: list[str]) -> Fraction:
    try:
        return parse_quantity(value)
    except ValueError as err:
        problems.append(f"{what}: {err}")
        return Fraction(0)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- node selectors ----------------------------------------------------------------------


def selector_matches(
    selector: Mapping[str, Any] | None, node: str, labels: Mapping[str, str]
) -> bool:
    """Whether a v1 NodeSelector (``None``: every node) selects ``node`` with ``labels``.

    Terms are ORed; inside a term every requirement must hold; a term without
    requirements selects nothing (the apiserver's semantics).
    """
    if selector is None:
        return True
    return any(
        _term_matches(_dict(t), node, labels) for t in _list(selector.get("nodeSelectorTerms"))
    )


def _term_matches(term: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    expressions = [_dict(e) for e in _list(term.get("matchExpressions"))]
    fields = [_dict(e) for e in _list(term.get("matchFields"))]
    if not expressions and not fields:
        return False
    fields_ok = all(
        str(f.get("key")) == "metadata.name" and _requirement(f, {"metadata.name": node})
        for f in fields
    )
    return fields_ok and all(_requirement(e, labels) for e in expressions)


def _requirement(req: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = str(req.get("key", "")), req.get("operator")
    wanted = [str(v) for v in _list(req.get("values"))]
    present = key in values
    value = values.get(key, "")
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(value), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
