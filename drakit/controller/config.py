"""The controller's settings, validated once at start-up."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from drakit.allocator.features import Features
from drakit.controller.noexecute.decision import Budget
from drakit.kubeapi.leaseobserver import parse_lease_key

__all__ = ["DEFAULT_SCHEDULER_NAME", "ClaimGeneration", "ControllerConfig"]

DEFAULT_SCHEDULER_NAME = "drakit"


class ClaimGeneration(enum.StrEnum):
    """Which pods get ResourceClaims generated from their templates (and claim lifecycle).

    ``all``: every pod, like kube-controller-manager's resourceclaim controller; use it when
    kube-controller-manager runs without that controller. ``scoped``: only pods whose
    ``spec.schedulerName`` is drakit's, so drakit can run beside kube-controller-manager. That
    controller generates claims for *every* pod, drakit's included, so in ``scoped`` mode drakit
    leaves a new pod to it for ``scoped_generation_grace`` seconds and after that generates
    only while kube-controller-manager is not leading (its leader Lease,
    ``controller_manager_lease``; controller.handover says why and how). Two generators racing
    on one pod claim each create a claim and overwrite the other's status entry: the pod can
    end up bound with a claim nobody allocated, which a real node showed.
    ``off``: no claims are generated (kube-controller-manager does it for every pod).
    """

    ALL = "all"
    SCOPED = "scoped"
    OFF = "off"


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller does and how hard it works."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    claim_generation: ClaimGeneration = ClaimGeneration.SCOPED
    #: Workers that run scheduling attempts (pods that name drakit).
    workers: int = 10
    #: Workers of their own for claim generation and the claim lifecycle (reservations,
    #: deallocation, deletion of generated claims): slow scheduling attempts never hold
    #: them up. Each sync mostly waits on one or two API writes, so the count bounds claim
    #: generation throughput: 16 took a burst of 1,000 pods 20 % faster than 4 on two cores
    #: (kube-controller-manager's resourceclaim controller runs 50 concurrent syncs).
    lifecycle_workers: int = 16
    #: Seconds between full resyncs of the informers (level-triggered repair).
    resync_period: float = 300.0
    #: Seconds the allocator may search for one pod on one node.
    allocation_timeout: float = 10.0
    #: Seconds one scheduling attempt may spend allocating, over every node it tries: past
    #: it the pod is unschedulable for this attempt and backs off.
    attempt_timeout: float = 10.0
    #: Backoff of unschedulable pods (kube-scheduler's podInitialBackoffSeconds and
    #: podMaxBackoffSeconds): the first retry waits ``initial``, each further one twice as
    #: long, at most ``max``; a success resets it.
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    #: Seconds a new pod's template claims are left to kube-controller-manager in ``scoped``
    #: mode before drakit generates them itself.
    scoped_generation_grace: float = 5.0
    #: ``NAMESPACE/NAME`` of kube-controller-manager's leader Lease: in ``scoped`` mode drakit
    #: generates claims only while it is not held (controller.handover). Empty: not checked,
    #: the grace period alone decides (a kube-controller-manager without leader election).
    controller_manager_lease: str = "kube-system/kube-controller-manager"
    #: Identity in Events and the leader Lease.
    identity: str = "drakit-controller"
    #: Allocation features; None: those of the cluster met at start (its enabled gates
    #: where /metrics is readable, else its version's defaults; kubeapi.clusterversion).
    allocator_features: Features | None = None
    #: Ask the apiserver for its version and gates when allocator_features is None.
    detect_cluster: bool = True
    #: The NoExecute budget the controller grants node plugins' requests within
    #: (drakit.controller.noexecute; docs/health.md); None: it does not run.
    noexecute: Budget | None = field(default_factory=Budget)

    def __post_init__(self) -> None:
        if not self.scheduler_name:
            raise ValueError("scheduler name must not be empty")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if self.lifecycle_workers < 1:
            raise ValueError(f"lifecycle workers must be at least 1, got {self.lifecycle_workers}")
        if self.attempt_timeout <= 0:
            raise ValueError(f"attempt timeout must be positive, got {self.attempt_timeout}")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ValueError(
                "backoff needs 0 < initial <= max, got "
                f"{self.initial_backoff} and {self.max_backoff}"
            )
        if self.controller_manager_lease:
            parse_lease_key(self.controller_manager_lease)

    def generates_for(self, scheduler_name: str | None) -> bool:
        """True when claim generation and lifecycle apply to a pod with this schedulerName."""
        if self.claim_generation is ClaimGeneration.ALL:
            return True
        if self.claim_generation is ClaimGeneration.SCOPED:
            return scheduler_name == self.scheduler_name
        return False

    def manages_claims_of(self, scheduler_name: str | None) -> bool:
        """True when the claim lifecycle (reservedFor cleanup, deallocation, deletion of
        generated claims) applies to claims of a pod with this schedulerName: every pod with
        ``all``, otherwise the pods drakit schedules (it allocated their claims)."""
        if self.claim_generation is ClaimGeneration.ALL:
            return True
        return scheduler_name == self.scheduler_name

    def schedules(self, scheduler_name: str | None) -> bool:
        """True when drakit allocates and binds a pod with this schedulerName."""
        return scheduler_name == self.scheduler_name
