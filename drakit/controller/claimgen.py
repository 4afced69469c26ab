"""Claim generation: a ResourceClaim for every template-based pod claim, exactly once.

For each ``pod.spec.resourceClaims`` entry with ``resourceClaimTemplateName`` the generator
makes sure one claim exists that the pod controls and that is annotated with the pod claim's
name, and records its name in ``pod.status.resourceClaimStatuses``. The order of checks keeps
a pod claim from ever getting two claims:

1. the pod status already names a claim: if it exists (cache, else a live GET, because the
   informer may lag) and the pod owns it, done;
2. a claim this process created for (pod UID, pod claim) that the informer may not have yet;
3. a claim in the informer owned by the pod and annotated with the pod claim name (what is
   left when a status write failed, also by an earlier process);
4. otherwise create one from the template (labels and annotations copied, never changed in
   the cached template).

A template with a part nested deeper than :data:`drakit.kubeapi.deepjson.MAX_DEPTH` (a
DeepJSON leaf in its spec) is refused: a Warning Event ``NestedTooDeep`` on the template
names the field path (once per resourceVersion), ``FailedResourceClaimCreation`` on the pod
says why, and the pod is not retried: the template's next change (or a new template of the
name) queues its pods again. kube-controller-manager would copy such a template; drakit
copies no value it cannot walk.

A claim generated for a pod that drakit itself schedules is created with the
delete-protection finalizer already set: drakit allocates it next, and the allocation needs
the finalizer first, so this saves one write per pod. It is legal for a claim to carry the
finalizer before it is allocated (kube-scheduler adds it in a write of its own before
allocating), and the claim lifecycle removes it from a claim deleted unallocated, as
kube-controller-manager's controller does. Claims of other schedulers' pods get none.

The checks start from the cached pod. The informer may lag behind another generator (a
replica that led before, kube-controller-manager beside a scoped drakit), so the status is
written once per pod, with the *complete* list of entries, by a PUT of the status carrying
the pod's UID and resourceVersion: a write never replaces entries (or any other status) it
has not seen. Only a
refused write reads the live pod; claims created from the stale view are then deleted (soak
seed 7 found the stale view; reading the live pod before every generation cost one request
per pod).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable
from typing import Any

from drakit.controller.caches import Caches, CreatedClaims
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.metrics import ControllerMetrics, claim_uses_admin_access
from drakit.controller.naming import (
    FIELD_MANAGER,
    FINALIZER,
    POD_CLAIM_NAME_ANNOTATION,
    generate_name,
    is_for_pod,
    meta,
    pod_claim_status_entries,
    resolve_claim_name,
    without_managed_fields,
)
from drakit.kubeapi import deepjson
from drakit.kubeapi.errors import ApiError, Conflict, NotFound
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.telemetry.logs import get_logger

__all__ = ["ClaimGenerator", "TemplateMissingError", "TemplateTooDeepError"]

logger = get_logger(__name__)

EVENT_FAILED_CREATION = "FailedResourceClaimCreation"
#: Templates refused for their depth whose Event was recorded: uid -> resourceVersion.
MAX_REFUSED_TEMPLATES = 1024


class TemplateMissingError(Exception):
    """The template a pod claim names does not exist (yet); the pod is retried when it does."""


class TemplateTooDeepError(ValueError):
    """The template nests deeper than the depth bound; the pod is retried only when the
    template changes. The message names the template, the field path and the reason."""

    def __init__(self, template: KubeObject, problem: str) -> None:
        template_meta = meta(template)
        super().__init__(
            f"resource claim template {template_meta.get('name')!r} in namespace "
            f"{template_meta.get('namespace')!r}: {problem}; no claim is generated from it"
        )
        self.template = template
        self.problem = problem


class ClaimGenerator:
    """Generates the claims of one pod per ``sync`` call. Safe to call again at any time."""

    def __init__(
        self,
        *,
        caches: Caches,
        pods: Resource,
        claims: Resource,
        writer: ClaimWriter,
        created: CreatedClaims,
        events: EventRecorder | None,
        metrics: ControllerMetrics,
        protect: Callable[[KubeObject], bool] = lambda _pod: False,
    ) -> None:
        """``protect(pod)``: whether the pod's claims are created with the finalizer (drakit
        schedules that pod and writes the finalizer before allocating anyway)."""
        self._protect = protect
        self._writer = writer
        self._caches = caches
        self._pods = pods
        self._claims = claims
        self._created = created
        self._events = events
        self._metrics = metrics
        self._refused: dict[str, str] = {}  # template uid -> resourceVersion reported
        self._refused_lock = threading.Lock()

    def sync(self, pod: KubeObject, may_record: Callable[[], bool] = lambda: True) -> bool:
        """Create missing claims of ``pod`` and record them in its status.

        ``may_record`` is asked after the claims exist and before the status is written: when
        it says False (another generator started meanwhile and will adopt them), nothing is
        recorded and False is returned. True otherwise, also when nothing was to be done.
        Raises the first failure after handling the other pod claims (TemplateMissingError, an
        ApiError); claims created before the failure are found again on the next call. A
        template too deep to copy is reported and not raised (nothing to retry until it
        changes). Nothing is done for a pod that is being deleted.
        """
        if meta(pod).get("deletionTimestamp"):
            return True
        new_entries: dict[str, str] = {}
        failure: Exception | None = None
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
            try:
                name = self._ensure_claim(pod, pod_claim)
            except TemplateTooDeepError as err:
                self._report_too_deep(pod, pod_claim, err)
                continue
            except (TemplateMissingError, ApiError, ValueError) as err:
                self._report_failure(pod, pod_claim, err)
                failure = failure or err
                continue
            if name is not None:
                new_entries[str(pod_claim.get("name"))] = name
        if failure is not None:
            # Upstream writes nothing on failure either; the created claims are recovered.
            raise failure
        if not new_entries:
            return True
        if not may_record():
            logger.info(
                "Another generator started while claims were created; leaving them to it",
                pod=_pod_key(pod),
                claims=sorted(new_entries.values()),
            )
            return False
        self._record(pod, new_entries)
        return True

    def _record(self, pod: KubeObject, new_entries: dict[str, str]) -> None:
        """Write ``new_entries`` into the pod status, deciding from the cached ``pod``.

        The write's preconditions (UID, resourceVersion) refuse it when the cache was stale.
        Only then is the live pod read: entries another generator recorded meanwhile win, and
        the claims this process created for them are deleted (they were never recorded, so
        nothing uses them); what is still missing is written against the live version. A
        second Conflict is raised, and the key is retried.
        """
        try:
            self._write_status(pod, new_entries)
            return
        except Conflict:
            live = self._live_pod(pod)
        recorded = _recorded(live or {})
        gone = live is None or bool(meta(live).get("deletionTimestamp"))
        for pod_claim, name in new_entries.items():
            if gone or recorded.get(pod_claim, name) != name:
                self._discard(pod, pod_claim, name)
        missing = {pc: n for pc, n in new_entries.items() if pc not in recorded}
        if live is not None and not gone and missing:
            self._write_status(live, missing)

    def _discard(self, pod: KubeObject, pod_claim: str, name: str) -> None:
        """Delete ``name`` if this process created it for ``pod_claim`` (never another's)."""
        uid = str(meta(pod).get("uid"))
        created = self._created.get(uid, pod_claim)
        if created is None or meta(created).get("name") != name:
            return
        namespace = str(meta(pod).get("namespace"))
        logger.info(
            "Deleting a claim generated from a stale pod; another was recorded",
            pod=_pod_key(pod),
            claim=f"{namespace}/{name}",
        )
        with contextlib.suppress(NotFound, Conflict):  # already gone, or not the one we made
            deleting = self._claims.delete(name, namespace, uid=str(meta(created).get("uid")))
            if deleting is not None and FINALIZER in (meta(deleting).get("finalizers") or ()):
                # Created protected and never allocated: nothing else will release it soon.
                self._writer.remove_finalizer(deleting)

    def _live_pod(self, cached: KubeObject) -> KubeObject | None:
        """The pod as the API server has it now (None when it is gone or was recreated).

        The informer may lag (a watch cut off, a process paused past its lease): another
        generator, kube-controller-manager beside a scoped drakit, may have recorded a claim
        the cached pod does not show yet. Deciding from the cache would create a second
        claim and replace the recorded one in the status (soak seed 7).
        """
        try:
            live = self._pods.get(str(meta(cached)["name"]), str(meta(cached)["namespace"]))
        except NotFound:
            return None
        return live if meta(live).get("uid") == meta(cached).get("uid") else None

    # -- one pod claim ---------------------------------------------------------------------------

    def _ensure_claim(self, pod: KubeObject, pod_claim: dict[str, Any]) -> str | None:
        """The claim name to add to the pod status, or None when nothing needs recording."""
        resolved = resolve_claim_name(pod, pod_claim)
        if not resolved.generated:
            return None  # named by the user: never created by the controller
        pod_claim_name = str(pod_claim.get("name"))
        lost_name: str | None = None
        if not resolved.pending:
            if resolved.name is None:
                return None  # the status says: no claim needed
            if self._owned_claim_exists(pod, resolved.name):
                return None
            lost_name = resolved.name  # deleted, or no longer the pod's: generate a new one
        existing = self._find_generated(pod, pod_claim_name, exclude=lost_name)
        if existing is not None:
            return str(meta(existing)["name"])
        return self._create(pod, pod_claim_name, str(pod_claim["resourceClaimTemplateName"]))

    def _owned_claim_exists(self, pod: KubeObject, name: str) -> bool:
        namespace = str(meta(pod).get("namespace"))
        claim = self._caches.claim(namespace, name)
        if claim is None:
            # The informer may not have the claim yet: ask the API server before replacing it.
            try:
                claim = self._claims.get(name, namespace)
            except NotFound:
                return False
        if is_for_pod(pod, claim):
            return True
        logger.error(
            "Claim recorded for the pod is not owned by it; generating a new one",
            pod=_pod_key(pod),
            claim=name,
        )
        return False

    def _find_generated(
        self, pod: KubeObject, pod_claim_name: str, *, exclude: str | None
    ) -> KubeObject | None:
        uid = str(meta(pod).get("uid"))
        remembered = self._created.get(uid, pod_claim_name)
        if remembered is not None and meta(remembered).get("name") != exclude:
            return remembered
        for claim in self._caches.claims_owned_by(str(meta(pod).get("namespace")), uid):
            annotations = meta(claim).get("annotations") or {}
            if annotations.get(POD_CLAIM_NAME_ANNOTATION) != pod_claim_name:
                continue
            if meta(claim).get("name") == exclude or meta(claim).get("deletionTimestamp"):
                continue
            # If there are several, the others wait for the pod to go away.
            return claim
        return None

    def _create(self, pod: KubeObject, pod_claim_name: str, template_name: str) -> str:
        namespace = str(meta(pod).get("namespace"))
        template = self._caches.template(namespace, template_name)
        if template is None:
            raise TemplateMissingError(
                f"resource claim template {template_name!r} in namespace {namespace!r}: not found"
            )
        problem = deepjson.depth_problem(template.get("spec") or {}, root="spec")
        if problem is not None:
            raise TemplateTooDeepError(template, problem)
        body = claim_from_template(pod, pod_claim_name, template)
        if self._protect(pod):
            body["metadata"]["finalizers"] = [FINALIZER]
        admin = str(claim_uses_admin_access(body["spec"])).lower()
        try:
            created = self._claims.create(body, namespace, field_manager=FIELD_MANAGER)
        except ApiError:
            self._metrics.claim_creates.labels("failure", admin).inc()
            raise
        self._metrics.claim_creates.labels("success", admin).inc()
        self._created.remember(str(meta(pod).get("uid")), pod_claim_name, created)
        logger.info(
            "Created ResourceClaim",
            pod=_pod_key(pod),
            podClaim=pod_claim_name,
            claim=f"{namespace}/{meta(created).get('name')}",
        )
        return str(meta(created)["name"])

    # -- status ----------------------------------------------------------------------------------

    def _write_status(self, pod: KubeObject, new_entries: dict[str, str]) -> None:
        """Replace the pod's status (a PUT of ``pods/status``) with ``pod``'s own plus the
        complete list of claim entries.

        The PUT carries the UID and resourceVersion of ``pod``, so it lands only on exactly
        that version: the rest of the status it sends is what the server holds, and a stale
        ``pod`` gets Conflict. It costs the apiserver about a quarter less than the
        equivalent server-side apply (no apply merge of the whole pod), one of the few
        requests every generated claim needs.
        """
        wanted = {**_recorded(pod), **new_entries}
        body = {
            **without_managed_fields(pod),
            "status": {
                **(pod.get("status") or {}),
                "resourceClaimStatuses": [
                    {"name": name, "resourceClaimName": wanted[name]} for name in sorted(wanted)
                ],
            },
        }
        self._pods.update_status(body, field_manager=FIELD_MANAGER)

    def _report_too_deep(
        self, pod: KubeObject, pod_claim: dict[str, Any], err: TemplateTooDeepError
    ) -> None:
        """Events on the pod and (once per resourceVersion) on the template; a log line."""
        self._report_failure(pod, pod_claim, err)
        template_meta = meta(err.template)
        uid, version = str(template_meta.get("uid")), str(template_meta.get("resourceVersion"))
        with self._refused_lock:
            if self._refused.get(uid) == version:
                return
            if len(self._refused) >= MAX_REFUSED_TEMPLATES:
                self._refused.pop(next(iter(self._refused)))
            self._refused[uid] = version
        logger.warning(
            "Not generating claims from a template nested too deep",
            pod=_pod_key(pod),
            template=f"{template_meta.get('namespace')}/{template_meta.get('name')}",
            problem=err.problem,
        )
        if self._events is not None:
            self._events.warning(
                err.template,
                deepjson.EVENT_REASON,
                "CreateResourceClaim",
                f"{err.problem}: no ResourceClaim is generated from this template",
            )

    def _report_failure(self, pod: KubeObject, pod_claim: dict[str, Any], err: Exception) -> None:
        if self._events is not None:
            self._events.warning(
                pod,
                EVENT_FAILED_CREATION,
                "CreateResourceClaim",
                f"PodResourceClaim {pod_claim.get('name')}: {err}",
            )


def claim_from_template(pod: KubeObject, pod_claim_name: str, template: KubeObject) -> KubeObject:
    """The claim to create for ``pod_claim_name`` of ``pod`` from ``template``.

    The template (a shared cached object) is not changed: labels, annotations and spec are
    deep copies.
    """
    template_spec = template.get("spec") or {}
    template_meta = template_spec.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim_name
    metadata: dict[str, Any] = {
        "generateName": generate_name(str(meta(pod)["name"]), pod_claim_name),
        "namespace": meta(pod)["namespace"],
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta(pod)["name"],
                "uid": meta(pod)["uid"],
                "controller": True,
            }
        ],
    }
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": RESOURCE_CLAIMS.api_version,
        "kind": RESOURCE_CLAIMS.kind,
        "metadata": metadata,
        "spec": copy.deepcopy(template_spec.get("spec") or {}),
    }


def _recorded(pod: KubeObject) -> dict[str, str]:
    """The pod claims its status names a claim for: pod claim name -> claim name."""
    return {
        str(e["name"]): str(e["resourceClaimName"])
        for e in pod_claim_status_entries(pod)
        if e.get("resourceClaimName")
    }


def _pod_key(pod: KubeObject) -> str:
    return f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"
