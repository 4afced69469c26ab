"""When a scoped drakit may generate a pod's claims itself, beside kube-controller-manager.

kube-controller-manager's resourceclaim controller generates claims for every pod, drakit's
included, and records them in the pod status by a forced server-side apply without a
precondition. Two generators racing on one pod claim each create a claim, and the later status
write wins even under a running pod (soak seed 7: kube-controller-manager slowed down, not
gone, recorded its own claim after drakit had allocated and started the pod with another). So
in ``scoped`` mode drakit generates only while kube-controller-manager is not leading:

1. a new pod is left to kube-controller-manager for the grace period;
2. after it, drakit generates only if kube-controller-manager's leader Lease is not held (no
   Lease, no holder, or not changed for its lease duration on our clock); while it is held the
   pod stays kube-controller-manager's, however long that takes. A Lease drakit may not
   read (RBAC) counts as held: drakit fails closed and generates nothing, and says so;
3. after creating the claims and before recording them in the pod status, the Lease is read
   again. If it changed, a kube-controller-manager took it in between. It starts its
   informers only after taking the Lease, so it lists our new claim and adopts it (a claim the
   pod controls with the pod claim's annotation); drakit then records nothing.

What no reader of the Lease can close: a kube-controller-manager paused past its lease with no
other candidate wakes still holding it and may act once on its stale cache. Two
kube-controller-manager replicas have the same window with each other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.naming import age_seconds, has_pending_generated_claims
from drakit.kubeapi.errors import Forbidden
from drakit.kubeapi.leaseobserver import LeaseObserver, LeaseView
from drakit.kubeapi.objects import KubeObject
from drakit.telemetry.logs import get_logger

__all__ = ["MAX_RECHECK_SECONDS", "GenerationGate"]

logger = get_logger(__name__)

#: A pod left to a leading kube-controller-manager is looked at again this often at most.
MAX_RECHECK_SECONDS = 5.0
#: ...and at least this often apart.
MIN_RECHECK_SECONDS = 0.5


class GenerationGate:
    """Decides, per pod, whether drakit generates its claims now. Thread-safe.

    ``lease`` observes kube-controller-manager's leader Lease; None: no such check (``all``
    mode, or disabled), only the grace period applies.
    """

    def __init__(self, config: ControllerConfig, lease: LeaseObserver | None) -> None:
        self._config = config
        self._lease = lease if config.claim_generation is ClaimGeneration.SCOPED else None
        self._lock = threading.Lock()
        self._kcm_leading: bool | None = None  # last judgement, for transition logs
        self._forbidden_logged = False

    def wait_before_generating(self, pod: KubeObject) -> float | Callable[[], bool]:
        """Seconds to leave ``pod``'s claims to kube-controller-manager, or a check to call
        after creating claims and before recording them: True while recording is still safe.

        Raises the API error of a failed Lease read (the pod is retried with backoff).
        """
        if self._config.claim_generation is not ClaimGeneration.SCOPED:
            return _always
        if not has_pending_generated_claims(pod):
            return _always
        age = age_seconds(pod)
        grace_left = self._config.scoped_generation_grace - (age if age is not None else 0.0)
        if grace_left > 0:
            logger.debug(
                "Leaving the pod's claims to kube-controller-manager for the grace period",
                pod=_pod_key(pod),
                seconds=round(grace_left, 3),
            )
            return grace_left
        if self._lease is None:
            return _always
        view = self._read()
        if view is None or view.held:  # unreadable: kube-controller-manager may be leading
            wait = MAX_RECHECK_SECONDS if view is None else view.expires_in
            wait = min(max(wait, MIN_RECHECK_SECONDS), MAX_RECHECK_SECONDS)
            logger.debug(
                "Leaving the pod's claims to a leading kube-controller-manager",
                pod=_pod_key(pod),
                recheck_seconds=round(wait, 3),
            )
            return wait
        lease = self._lease
        return lambda: lease.unchanged_since(view)

    def _read(self) -> LeaseView | None:
        """The Lease now; None when we may not read it (logged once). The caller then treats
        kube-controller-manager as leading: generating on the grace period alone races it."""
        assert self._lease is not None
        try:
            view = self._lease.view()
        except Forbidden as err:
            with self._lock:
                first, self._forbidden_logged = not self._forbidden_logged, True
            if first:
                logger.error(
                    "RBAC missing: cannot read kube-controller-manager's leader Lease, so "
                    "drakit treats kube-controller-manager as leading and generates no claims; "
                    "grant 'get' on that Lease (the Helm chart does) or use "
                    "--claim-generation=off",
                    lease=self._lease_key(),
                    cause=str(err),
                )
            return None
        self._log_transition(view)
        return view

    def _log_transition(self, view: LeaseView) -> None:
        with self._lock:
            changed, self._kcm_leading = self._kcm_leading != view.held, view.held
        if not changed:
            return
        if view.held:
            logger.info(
                "kube-controller-manager is leading: it generates the claims of new pods",
                lease=self._lease_key(),
                holder=view.holder,
            )
        else:
            logger.warning(
                "kube-controller-manager is not leading: drakit generates the claims of its "
                "own pods after the grace period",
                lease=self._lease_key(),
                holder=view.holder or None,
            )

    def _lease_key(self) -> str:
        assert self._lease is not None
        return f"{self._lease.namespace}/{self._lease.name}"


def _pod_key(pod: KubeObject) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _always() -> bool:
    return True
