"""The invariants as pure functions: one reading of the cluster (and of the nodes' files) in,
the findings out. Whether a finding is a violation is decided by :mod:`soak.checker`, which
holds each finding to its time bound (a legal transient clears before its bound ends).

Every finding names its invariant (one of the constants below), a subject that stays the
same while the same problem persists (so it can be timed), and a detail for people.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from soak.clusterstate import (
    DELETE_PROTECTION,
    Claim,
    ClusterState,
    Device,
    DeviceKey,
    Pod,
    Pool,
    Result,
    selector_matches,
)
from soak.nodefiles import CdiSpec, CheckpointEntry

# Safety, judged every second.
DOUBLE_ALLOCATION = "device-double-allocation"
CAPACITY_OVER_CONSUMED = "capacity-over-consumed"
COUNTERS_OVER_CONSUMED = "counters-over-consumed"
ALLOCATED_WITHOUT_FINALIZER = "allocated-without-finalizer"
RESERVED_OFF_NODE = "reserved-claim-off-node"
RUNNING_POD_CLAIM_UNUSABLE = "running-pod-claim-unusable"
RUNNING_POD_NOT_PREPARED = "running-pod-not-prepared"
ORPHANED_GENERATED_CLAIM = "orphaned-generated-claim"
FINALIZER_WITHOUT_ALLOCATION = "finalizer-without-allocation"
SLICE_MISSING = "slice-missing"
UNREADABLE = "unreadable-state"
# Once quiet.
CHECKPOINT_WITHOUT_CDI = "checkpoint-without-cdi"
CDI_WITHOUT_CHECKPOINT = "cdi-without-checkpoint"
PREPARED_WITHOUT_POD = "prepared-without-pod"
# After the faults stop.
LIVENESS = "liveness"


@dataclass(frozen=True)
class Finding:
    invariant: str
    subject: str
    detail: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.invariant, self.subject)


@dataclass(frozen=True)
class NodeFiles:
    """One node's checkpoint (None when it could not be read this time) and CDI specs."""

    node_name: str
    checkpoint: Mapping[str, CheckpointEntry] | None
    specs: Mapping[str, CdiSpec]
    problem: str = ""


def _counted(claims: list[Claim], driver: str) -> Iterator[tuple[Claim, Result]]:
    """Results of ``driver`` that hold a device (admin access does not: it may share)."""
    for claim in claims:
        for result in claim.results:
            if result.driver == driver and not result.admin_access:
                yield claim, result


# -- devices -----------------------------------------------------------------------------


def device_findings(
    state: ClusterState, driver: str, known: Mapping[DeviceKey, Device]
) -> list[Finding]:
    """Double allocations, over-consumed capacity and counters, from one LIST of claims.

    ``known`` is every device the checker ever saw in a slice (key -> Device), so that a
    slice being replaced does not make an allocated device unknown for a moment.
    """
    holders: dict[DeviceKey, list[tuple[Claim, Result]]] = defaultdict(list)
    for claim, result in _counted(state.claims, driver):
        holders[result.key].append((claim, result))
    findings: list[Finding] = []
    for key, held in sorted(holders.items()):
        device = known.get(key)
        subject = "/".join(key)
        users = ", ".join(f"{c.ref} ({c.uid[:8]}) request {r.request}" for c, r in held)
        multi = device is not None and device.multi_allocatable
        if len(held) > 1 and not multi:
            findings.append(
                Finding(DOUBLE_ALLOCATION, subject, f"allocated {len(held)} times: {users}")
            )
        if device is not None and multi:
            findings.extend(_capacity(subject, held, device.capacity, users))
    findings.extend(_counters(state, holders, known))
    return findings


def _capacity(
    subject: str, held: list[tuple[Claim, Result]], capacity: Mapping[str, Fraction], users: str
) -> Iterator[Finding]:
    used: dict[str, Fraction] = defaultdict(Fraction)
    for _, result in held:
        for name, amount in result.consumed.items():
            used[name] += amount
    for name, amount in sorted(used.items()):
        limit = capacity.get(name)
        if limit is not None and amount > limit:
            yield Finding(
                CAPACITY_OVER_CONSUMED,
                f"{subject}/{name}",
                f"consumed {float(amount):g} of capacity {float(limit):g}: {users}",
            )


def _counters(
    state: ClusterState,
    holders: Mapping[DeviceKey, list[tuple[Claim, Result]]],
    known: Mapping[DeviceKey, Device],
) -> Iterator[Finding]:
    """A device charges its counters once however many claims share it."""
    used: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    who: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for key in holders:
        device = known.get(key)
        for (set_name, counter), amount in (device.consumes if device else {}).items():
            used[(key[1], set_name, counter)] += amount
            who[(key[1], set_name, counter)].append(key[2])
    for (pool_name, set_name, counter), amount in sorted(used.items()):
        pool: Pool | None = state.pools.get(pool_name)
        limit = None if pool is None else pool.counters.get((set_name, counter))
        if limit is not None and amount > limit:
            yield Finding(
                COUNTERS_OVER_CONSUMED,
                f"{pool_name}/{set_name}/{counter}",
                f"devices {sorted(who[(pool_name, set_name, counter)])} consume "
                f"{float(amount):g} of {float(limit):g}",
            )


# -- claims and pods ---------------------------------------------------------------------


def claim_findings(state: ClusterState, driver: str, in_scope: set[str] | None) -> list[Finding]:
    """Finalizer and ownership rules of each claim of the scope (``None``: all namespaces)."""
    pods = state.pods_by_uid()
    findings: list[Finding] = []
    for claim in state.claims:
        if in_scope is not None and claim.namespace not in in_scope:
            continue
        ours = any(r.driver == driver for r in claim.results)
        protected = DELETE_PROTECTION in claim.finalizers
        subject = f"{claim.ref} uid {claim.uid}"
        if claim.allocated and ours and not protected:
            findings.append(
                Finding(
                    ALLOCATED_WITHOUT_FINALIZER,
                    subject,
                    "allocated, but without the finalizer " + DELETE_PROTECTION,
                )
            )
        if protected and not claim.allocated and (claim.deleting or claim.reserved_pod_uids):
            # Only where the finalizer does harm: it blocks a deletion, or it sits on a
            # reserved claim. A claim merely left with the finalizer after a failed status
            # write is legal (kube-scheduler adds the finalizer in its own update first and
            # never takes it back; kube-controller-manager removes it once the claim is
            # deleted), so it is not judged until it is deleted.
            why = "being deleted" if claim.deleting else "reserved"
            findings.append(
                Finding(
                    FINALIZER_WITHOUT_ALLOCATION,
                    subject,
                    f"has {DELETE_PROTECTION} but no allocation ({why})",
                )
            )
        if claim.generated:
            gone = _owner_gone(claim, pods)
            if gone:
                findings.append(Finding(ORPHANED_GENERATED_CLAIM, subject, gone))
    return findings


def _owner_gone(claim: Claim, pods: Mapping[str, Pod]) -> str:
    """Why a generated claim's pod no longer needs it ("" while it may): the pod is gone,
    or done as kube-controller-manager judges it (terminal, or deleted before it was
    bound), after which it deletes the claim."""
    pod = pods.get(claim.owner_pod_uid or "")
    if pod is None:
        return f"generated for pod uid {claim.owner_pod_uid or '?'}, which no longer exists"
    if pod.terminal:
        return f"generated for pod {pod.ref}, which is {pod.phase}"
    if pod.deleting and not pod.node_name:
        return f"generated for pod {pod.ref}, which was deleted before it was bound"
    return ""


def reservation_findings(state: ClusterState, in_scope: set[str] | None) -> list[Finding]:
    """Reservations by bound pods must sit on allocations that select the pod's node; every
    claim of a running pod must exist, be allocated and be reserved for it."""
    pods = state.pods_by_uid()
    findings: list[Finding] = []
    for claim in state.claims:
        if in_scope is not None and claim.namespace not in in_scope:
            continue
        for pod_uid in claim.reserved_pod_uids:
            pod = pods.get(pod_uid)
            if pod is None or not pod.node_name:
                continue
            problem = _off_node(claim, pod, state)
            if problem:
                findings.append(
                    Finding(
                        RESERVED_OFF_NODE,
                        f"{claim.ref} uid {claim.uid} for pod {pod.ref} uid {pod.uid}",
                        problem,
                    )
                )
    claims = state.claims_by_ref()
    for pod in state.pods:
        if not pod.running or (in_scope is not None and pod.namespace not in in_scope):
            continue
        for entry in pod.claims:
            problem = _unusable(pod, entry.claim_name, claims)
            if problem:
                findings.append(
                    Finding(
                        RUNNING_POD_CLAIM_UNUSABLE,
                        f"pod {pod.ref} uid {pod.uid} claim {entry.entry}",
                        problem,
                    )
                )
    return findings


def _off_node(claim: Claim, pod: Pod, state: ClusterState) -> str:
    if not claim.allocated:
        return f"reserved for pod {pod.ref} on {pod.node_name} but not allocated"
    labels = state.node_labels.get(pod.node_name)
    if labels is None:
        labels = {}
    if not selector_matches(claim.node_selector, pod.node_name, labels):
        return (
            f"allocated with node selector {dict(claim.node_selector or {})}, "
            f"which does not select the pod's node {pod.node_name}"
        )
    return ""


def _unusable(pod: Pod, claim_name: str | None, claims: Mapping[str, Claim]) -> str:
    if claim_name is None:
        return (
            "running, but its template claim was never generated (no resourceClaimStatuses entry)"
        )
    claim = claims.get(f"{pod.namespace}/{claim_name}")
    if claim is None:
        return f"running, but its claim {claim_name} does not exist"
    if not claim.allocated:
        return f"running, but its claim {claim_name} is not allocated"
    if pod.uid not in claim.reserved_pod_uids:
        return f"running, but its claim {claim_name} is not reserved for it"
    return ""


def prepared_findings(
    state: ClusterState, driver: str, files: Mapping[str, NodeFiles], in_scope: set[str] | None
) -> list[Finding]:
    """Every claim (with devices of ``driver``) of a running pod on a watched node is
    PrepareCompleted in that node's checkpoint."""
    claims = state.claims_by_ref()
    findings: list[Finding] = []
    for pod in state.pods:
        node = files.get(pod.node_name)
        if not pod.running or node is None or node.checkpoint is None:
            continue
        if in_scope is not None and pod.namespace not in in_scope:
            continue
        for entry in pod.claims:
            claim = claims.get(f"{pod.namespace}/{entry.claim_name}")
            if claim is None or not any(r.driver == driver for r in claim.results):
                continue  # judged by RUNNING_POD_CLAIM_UNUSABLE, or not this driver's
            recorded = node.checkpoint.get(claim.uid)
            if recorded is None or not recorded.completed:
                state_now = "absent" if recorded is None else recorded.state
                findings.append(
                    Finding(
                        RUNNING_POD_NOT_PREPARED,
                        f"pod {pod.ref} uid {pod.uid} claim {claim.ref} uid {claim.uid}",
                        f"running on {pod.node_name}; the claim is {state_now} in its checkpoint",
                    )
                )
    return findings


def slice_findings(state: ClusterState, nodes: list[str]) -> list[Finding]:
    """Each watched node has at least one complete pool of the driver's slices."""
    findings: list[Finding] = []
    for node in nodes:
        pools = [p for p in state.pools.values() if node in p.node_names]
        if not pools:
            findings.append(
                Finding(SLICE_MISSING, node, "no ResourceSlice of the driver for this node")
            )
        for pool in pools:
            if not pool.complete:
                findings.append(
                    Finding(
                        SLICE_MISSING,
                        f"{node} pool {pool.name}",
                        f"generation {pool.generation} has {pool.slices}/{pool.expected_slices}",
                    )
                )
    return findings


# -- node files once quiet ---------------------------------------------------------------


def quiet_findings(state: ClusterState, files: Mapping[str, NodeFiles]) -> list[Finding]:
    """Checkpoint and CDI specs agree, and nothing stays prepared for a pod that is gone."""
    findings: list[Finding] = []
    for node in files.values():
        if node.checkpoint is None:
            findings.append(Finding(UNREADABLE, f"{node.node_name} checkpoint", node.problem))
            continue
        findings.extend(_cdi_agreement(node, node.checkpoint))
        findings.extend(_leaked(state, node, node.checkpoint))
    return findings


def _cdi_agreement(node: NodeFiles, checkpoint: Mapping[str, CheckpointEntry]) -> Iterator[Finding]:
    for uid, entry in sorted(checkpoint.items()):
        if not entry.completed or not entry.cdi_ids:
            continue  # nothing was handed to the runtime: no spec is needed
        spec = node.specs.get(uid)
        subject = f"{node.node_name} claim {entry.namespace}/{entry.name} uid {uid}"
        if spec is None:
            yield Finding(
                CHECKPOINT_WITHOUT_CDI, subject, "PrepareCompleted, but there is no CDI spec"
            )
        elif spec.problem:
            yield Finding(
                CHECKPOINT_WITHOUT_CDI, subject, f"its CDI spec {spec.path} is {spec.problem}"
            )
        else:
            missing = [i for i in entry.cdi_ids if not spec.defines(i)]
            if missing:
                yield Finding(
                    CHECKPOINT_WITHOUT_CDI,
                    subject,
                    f"CDI IDs {missing} are not defined by {spec.path}",
                )
    for uid, spec in sorted(node.specs.items()):
        if uid not in checkpoint:
            yield Finding(
                CDI_WITHOUT_CHECKPOINT,
                f"{node.node_name} {spec.path.name}",
                "a CDI spec without a checkpoint entry",
            )


def _leaked(
    state: ClusterState, node: NodeFiles, checkpoint: Mapping[str, CheckpointEntry]
) -> Iterator[Finding]:
    existing = {c.uid for c in state.claims}
    by_ref = state.claims_by_ref()
    users: set[str] = set()
    for pod in state.pods:
        if pod.node_name != node.node_name or pod.terminal:
            continue
        for pod_claim in pod.claims:
            claim = by_ref.get(f"{pod.namespace}/{pod_claim.claim_name}")
            if claim is not None:
                users.add(claim.uid)
    for uid, entry in sorted(checkpoint.items()):
        if uid not in users:
            alive = "still exists" if uid in existing else "is gone"
            yield Finding(
                PREPARED_WITHOUT_POD,
                f"{node.node_name} claim {entry.namespace}/{entry.name} uid {uid}",
                f"{entry.state} in the checkpoint, but no pod on the node uses it "
                f"(the claim {alive})",
            )
