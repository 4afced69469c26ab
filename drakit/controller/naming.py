"""Names, references and predicates shared by claim generation, lifecycle and scheduling.

Everything here is pure: functions of plain API objects (decoded JSON dicts), no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.objects import KubeObject

__all__ = [
    "FIELD_MANAGER",
    "FINALIZER",
    "MAX_GENERATE_NAME_BASE",
    "POD_CLAIM_NAME_ANNOTATION",
    "ClaimName",
    "age_seconds",
    "claim_keys_of_pod",
    "consumer_ref",
    "generate_name",
    "has_pending_generated_claims",
    "is_for_pod",
    "is_reserved_for",
    "meta",
    "parse_timestamp",
    "pod_claim_status_entries",
    "pod_is_done",
    "pod_is_terminal",
    "resolve_claim_name",
]

#: Ties a generated claim to the pod claim it was generated for (with the owner reference).
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: The one finalizer the API reserves for allocation protection (``resourceapi.Finalizer``).
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Field manager of every write the controller makes (SSA of pod status included).
FIELD_MANAGER = "drakit-controller"
#: A generated name has at most 63 characters; the apiserver appends 5 random ones.
MAX_GENERATE_NAME_BASE = 57


def meta(obj: KubeObject) -> dict[str, Any]:
    """``obj.metadata`` (an empty dict when missing)."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def without_managed_fields(obj: KubeObject) -> KubeObject:
    """``obj`` without ``metadata.managedFields``: a shallow copy, or ``obj`` itself when it
    has none; ``obj`` is never changed. A PUT that leaves the field out keeps the stored
    entries, and no model here reads them."""
    metadata = meta(obj)
    if "managedFields" not in metadata:
        return obj
    return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """The ``metadata.generateName`` of a claim generated for ``pod_claim_name`` of a pod.

    ``<pod>-<claim>-``; above 57 characters both parts are cut in proportion to their length
    (integer arithmetic on the untruncated length, as the Kubernetes controller does), joined by
    one dash and without a trailing dash, so the pod claim's name stays recognisable.

    Unlike upstream, ``.`` and ``-`` are trimmed where a part was cut: a pod name cut
    after a dot would give ``pod.-claim``, which no apiserver accepts (a DNS label must
    end alphanumeric), and the claim would be retried forever. A pod part cut to
    nothing is left out with its dash, so the name never starts with ``-``.
    """
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) <= MAX_GENERATE_NAME_BASE:
        return base
    total = len(base)
    pod_part = pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // total].rstrip(".-")
    claim_part = pod_claim_name[: len(pod_claim_name) * MAX_GENERATE_NAME_BASE // total]
    claim_part = claim_part.rstrip(".-")
    if not pod_part:
        return f"{claim_part}-"
    return f"{pod_part}-{claim_part}" if claim_part else f"{pod_part}-"


@dataclass(frozen=True)
class ClaimName:
    """How a pod claim resolves (``resourceclaim.Name`` upstream).

    ``name`` is the claim's name, or None when the pod status says no claim is needed;
    ``generated`` is True when the claim comes from a template (so ownership must be checked);
    ``pending`` is True when the template's claim has no status entry yet (not generated).
    """

    name: str | None
    generated: bool
    pending: bool = False


def resolve_claim_name(pod: KubeObject, pod_claim: dict[str, Any]) -> ClaimName:
    """Resolve one entry of ``pod.spec.resourceClaims``. Raises ValueError naming the pod claim
    when neither ``resourceClaimName`` nor ``resourceClaimTemplateName`` is set."""
    if pod_claim.get("resourceClaimName"):
        return ClaimName(str(pod_claim["resourceClaimName"]), generated=False)
    if pod_claim.get("resourceClaimTemplateName"):
        for entry in pod_claim_status_entries(pod):
            if entry.get("name") == pod_claim.get("name"):
                name = entry.get("resourceClaimName")
                return ClaimName(str(name) if name else None, generated=True)
        return ClaimName(None, generated=True, pending=True)
    raise ValueError(
        f"pod {meta(pod).get('namespace')}/{meta(pod).get('name')}: spec.resourceClaims"
        f"[{pod_claim.get('name')!r}]: neither resourceClaimName nor "
        "resourceClaimTemplateName is set"
    )


def has_pending_generated_claims(pod: KubeObject) -> bool:
    """True when a template-based pod claim has no ``resourceClaimStatuses`` entry yet."""
    return any(
        pc.get("resourceClaimTemplateName") and resolve_claim_name(pod, pc).pending
        for pc in (pod.get("spec") or {}).get("resourceClaims") or ()
    )


def age_seconds(obj: KubeObject, now: dt.datetime | None = None) -> float | None:
    """Seconds since ``metadata.creationTimestamp`` (None when it is missing or malformed)."""
    created = parse_timestamp(meta(obj).get("creationTimestamp"))
    if created is None:
        return None
    return ((now or dt.datetime.now(dt.UTC)) - created).total_seconds()


def parse_timestamp(value: Any) -> dt.datetime | None:
    """An RFC 3339 UTC timestamp as the API writes it (``...Z``, with or without fractions
    of a second), as an aware datetime; None for anything else."""
    # fromisoformat, not strptime: this runs for every bound pod, and strptime costs tens
    # of microseconds. The trailing Z makes the result aware, so ages can be computed.
    if not isinstance(value, str) or not value.endswith("Z") or "T" not in value:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def pod_claim_status_entries(pod: KubeObject) -> list[dict[str, Any]]:
    """``pod.status.resourceClaimStatuses`` (empty list when unset)."""
    entries = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return [e for e in entries if isinstance(e, dict)]


def is_for_pod(pod: KubeObject, claim: KubeObject) -> bool:
    """True when ``claim`` is in the pod's namespace and its controller owner is this pod."""
    pod_meta, claim_meta = meta(pod), meta(claim)
    if claim_meta.get("namespace") != pod_meta.get("namespace"):
        return False
    for ref in claim_meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return bool(ref.get("uid")) and ref.get("uid") == pod_meta.get("uid")
    return False


def pod_owner_uid(claim: KubeObject) -> str | None:
    """The UID of the claim's controller owner when that owner is a v1 Pod."""
    for ref in meta(claim).get("ownerReferences") or ():
        if ref.get("controller"):
            if ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
                return str(ref.get("uid") or "") or None
            return None
    return None


def pod_owner_name(claim: KubeObject) -> str | None:
    """The name of the claim's controller owner when that owner is a v1 Pod."""
    for ref in meta(claim).get("ownerReferences") or ():
        if ref.get("controller"):
            if ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
                return str(ref.get("name") or "") or None
            return None
    return None


def pod_is_terminal(pod: KubeObject) -> bool:
    """Phase Succeeded or Failed: the containers ran and will not run again."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_is_done(pod: KubeObject) -> bool:
    """The pod will never use its claims again: terminal, or deleted before it was scheduled.

    A pod being deleted *on a node* is not done: the kubelet may still be using the devices.
    """
    if pod_is_terminal(pod):
        return True
    return bool(meta(pod).get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


def consumer_ref(pod: KubeObject) -> dict[str, str]:
    """The ``reservedFor`` entry for ``pod``."""
    return {
        "resource": "pods",
        "name": str(meta(pod).get("name")),
        "uid": str(meta(pod).get("uid")),
    }


def is_reserved_for(claim: KubeObject, uid: str) -> bool:
    """True when the claim's ``status.reservedFor`` has an entry with this UID."""
    return any(
        entry.get("uid") == uid for entry in (claim.get("status") or {}).get("reservedFor") or ()
    )


def claim_keys_of_pod(pod: KubeObject) -> Iterator[str]:
    """``<namespace>/<claim>`` of every claim the pod references that can be resolved now."""
    namespace = meta(pod).get("namespace")
    for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
        try:
            resolved = resolve_claim_name(pod, pod_claim)
        except ValueError:
            continue
        if resolved.name:
            yield f"{namespace}/{resolved.name}"
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
        "resourceClaimName"
    )
    if extended:
        yield f"{namespace}/{extended}"
