"""The controller's view of the cluster: informers, the claim assume cache and indexes.

One ``Caches`` holds every informer the controller reads from. Claims are read through the
assume cache (``claims``), which also holds the allocations this controller wrote before the
informer delivered them. Indexes answer "which claims does this pod own", "which pods use
this claim" and "which pods use this template" without scanning.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from drakit.controller.naming import claim_keys_of_pod, meta, pod_owner_uid
from drakit.kubeapi.assume_cache import AssumeCache
from drakit.kubeapi.informer import Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

__all__ = [
    "CLAIMS_BY_POD_OWNER",
    "PODS_BY_CLAIM",
    "PODS_BY_TEMPLATE",
    "Caches",
    "CreatedClaims",
    "DeletedPods",
]

CLAIMS_BY_POD_OWNER = "pod-owner"  # "<namespace>/<pod uid>" of the controller owner
PODS_BY_CLAIM = "claim"  # "<namespace>/<claim name>" of every resolvable claim
PODS_BY_TEMPLATE = "template"  # "<namespace>/<template name>"


def _claim_pod_owner(claim: KubeObject) -> list[str]:
    uid = pod_owner_uid(claim)
    return [f"{meta(claim).get('namespace')}/{uid}"] if uid else []


def _pod_claims(pod: KubeObject) -> list[str]:
    return list(claim_keys_of_pod(pod))


def _pod_templates(pod: KubeObject) -> list[str]:
    namespace = meta(pod).get("namespace")
    return [
        f"{namespace}/{c['resourceClaimTemplateName']}"
        for c in (pod.get("spec") or {}).get("resourceClaims") or ()
        if c.get("resourceClaimTemplateName")
    ]


class Caches:
    """Informers for pods, claims (behind an assume cache), templates, slices, classes, nodes."""

    def __init__(self, api: Any, *, resync_period: float = 0.0) -> None:
        self.api = api

        def informer(rtype: Any, **kwargs: Any) -> Informer:
            return Informer(Resource(api, rtype), resync_period=resync_period, **kwargs)

        self.pods = informer(
            PODS, indexers={PODS_BY_CLAIM: _pod_claims, PODS_BY_TEMPLATE: _pod_templates}
        )
        self.claim_informer = informer(
            RESOURCE_CLAIMS, indexers={CLAIMS_BY_POD_OWNER: _claim_pod_owner}
        )
        self.claims = AssumeCache(self.claim_informer, description="ResourceClaim")
        self.templates = informer(RESOURCE_CLAIM_TEMPLATES)
        self.slices = informer(RESOURCE_SLICES)
        self.classes = informer(DEVICE_CLASSES)
        self.nodes = informer(NODES)

    @property
    def informers(self) -> list[Informer]:
        return [
            self.pods,
            self.claim_informer,
            self.templates,
            self.slices,
            self.classes,
            self.nodes,
        ]

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def wait_for_sync(self, stop: threading.Event, timeout: float | None = None) -> bool:
        """True once every informer listed; False on ``stop`` or ``timeout``."""
        for informer in self.informers:
            while not informer.wait_for_sync(1.0):
                if stop.is_set():
                    return False
                if timeout is not None:
                    timeout -= 1.0
                    if timeout <= 0:
                        return False
        return True

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    # -- lookups -------------------------------------------------------------------------------

    def pod(self, namespace: str, name: str) -> KubeObject | None:
        return self.pods.store.get_by_name(name, namespace)

    def claim(self, namespace: str, name: str) -> KubeObject | None:
        """The latest claim (assumed or from the informer)."""
        return self.claims.get(f"{namespace}/{name}")

    def claims_owned_by(self, namespace: str, pod_uid: str) -> list[KubeObject]:
        return self.claim_informer.store.by_index(CLAIMS_BY_POD_OWNER, f"{namespace}/{pod_uid}")

    def pods_using_claim(self, namespace: str, claim_name: str) -> list[KubeObject]:
        return self.pods.store.by_index(PODS_BY_CLAIM, f"{namespace}/{claim_name}")

    def pods_using_template(self, namespace: str, template_name: str) -> list[KubeObject]:
        return self.pods.store.by_index(PODS_BY_TEMPLATE, f"{namespace}/{template_name}")

    def template(self, namespace: str, name: str) -> KubeObject | None:
        return self.templates.store.get_by_name(name, namespace)


class CreatedClaims:
    """The claims this process created, by pod UID and pod claim name, so a retry that runs
    before the informer delivered the claim finds it. Bounded (LRU by pod) but large: upstream's
    100-entry cache caused duplicate claims under mass scale-out (kubernetes #140217).
    Thread-safe."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._by_pod: OrderedDict[str, dict[str, KubeObject]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, pod_uid: str, pod_claim: str, claim: KubeObject) -> None:
        with self._lock:
            self._by_pod.setdefault(pod_uid, {})[pod_claim] = claim
            self._by_pod.move_to_end(pod_uid)
            while len(self._by_pod) > self._capacity:
                self._by_pod.popitem(last=False)

    def get(self, pod_uid: str, pod_claim: str) -> KubeObject | None:
        with self._lock:
            return self._by_pod.get(pod_uid, {}).get(pod_claim)

    def forget_pod(self, pod_uid: str) -> None:
        with self._lock:
            self._by_pod.pop(pod_uid, None)


class DeletedPods:
    """UIDs of pods the informer reported deleted (LRU), with their schedulerName: a
    reservation for such a UID can be dropped without asking the API server. Thread-safe."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._uids: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, uid: str, scheduler_name: str) -> None:
        with self._lock:
            self._uids[uid] = scheduler_name
            while len(self._uids) > self._capacity:
                self._uids.popitem(last=False)

    def scheduler_of(self, uid: str) -> str | None:
        """The deleted pod's schedulerName, or None when the UID is not known as deleted."""
        with self._lock:
            return self._uids.get(uid)
