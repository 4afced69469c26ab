"""Wiring of one controller process: API client, metrics endpoint, Events, leader election.

``drakit controller`` validates its flags into a frozen :class:`RunConfig` and calls
:func:`run`; nothing here reads flags or the environment.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drakit.controller.app import Controller
from drakit.controller.config import ControllerConfig
from drakit.controller.leader import run_leader_elected
from drakit.controller.metrics import ControllerMetrics
from drakit.kubeapi.errors import ConfigError as KubeConfigError
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.leaderelection import LeaderElectionConfig
from drakit.kubeapi.lightclient import load_light_client
from drakit.telemetry.logs import get_logger

if TYPE_CHECKING:
    from drakit.telemetry.endpoint import MetricsEndpoint

__all__ = ["EXIT_FAILED", "LeaderElection", "RunConfig", "run"]

EXIT_FAILED = 1  # start-up failed, or leadership was lost (the process should restart)
#: The cycle collector's thresholds in the controller process (Python's default: 700, 10, 10).
#: The informer caches hold hundreds of thousands of containers and every watch event
#: allocates hundreds more, so the default ran a young collection every few events and
#: full ones over the whole cache again and again: 0.49 s of the controller's 5 s of CPU
#: per 1,000 scheduled pods, against 0.07 s with these (16 young collections, no older).
#: The objects are JSON trees, without cycles; the rare cyclic garbage is still
#: collected, in larger batches.
GC_THRESHOLDS = (20_000, 20, 10)

log = get_logger("drakit.controller")


@dataclass(frozen=True)
class LeaderElection:
    """Where the leader Lease lives and how long a term lasts (seconds)."""

    lease_name: str = "drakit-controller"
    namespace: str = "kube-system"
    lease_duration: float = 10.0


@dataclass(frozen=True)
class RunConfig:
    """Everything ``drakit controller`` decided, already validated."""

    controller: ControllerConfig
    kubeconfig: str | None = None
    leader_election: LeaderElection | None = None
    metrics_address: tuple[str, int] | None = None
    metrics_claim_namespaces: int = 20
    qps: float = 70.0
    burst: int = 130


def _fail(message: str) -> int:
    print(f"drakit controller: {message}", file=sys.stderr)
    return EXIT_FAILED


def _serve_metrics(address: tuple[str, int], metrics: ControllerMetrics) -> MetricsEndpoint:
    # prometheus_client loads here, only for a controller that serves /metrics.
    from drakit.telemetry.endpoint import MetricsEndpoint  # noqa: PLC0415

    # On the host network a new replica starts while the old one still holds the port
    # (rolling update); the endpoint waits for the port instead of failing the controller.
    endpoint = MetricsEndpoint(metrics.registry, *address)
    if not endpoint.serving:
        log.warning("Metrics port in use; serving metrics once it is free", port=address[1])
    return endpoint


def run(config: RunConfig) -> int:
    """Serve until SIGTERM/SIGINT (0) or until leadership is lost or start-up fails (1)."""
    identity = config.controller.identity
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        api, events_api, election_api = (
            # The light client: only kubeapi.resources talks to the apiserver here, and
            # the kubernetes client's request path costs about 1 ms of CPU more per call.
            load_light_client(config.kubeconfig, qps=config.qps, burst=config.burst,
                              user_agent=f"drakit-controller{suffix}", pool_size=pool,
                              fast_json=True)
            for suffix, pool in (
                ("", config.controller.workers + 8),  # workers and informers
                ("/events", 2),
                ("/leader-election", 2),
            )
        )  # fmt: skip
    except KubeConfigError as err:
        return _fail(str(err))
    metrics = ControllerMetrics(top_namespaces=config.metrics_claim_namespaces)
    endpoint = None
    if config.metrics_address is not None:
        try:
            endpoint = _serve_metrics(config.metrics_address, metrics)
        except OSError as err:
            return _fail(f"--metrics-address: {err}")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # Events and the leader Lease each have a client (and token bucket) of their own, as
    # kube-scheduler's do: a burst of Events must not delay an allocation, and a busy bucket
    # must not hold a Lease renewal past the renew deadline.
    events = EventRecorder(
        events_api, reporting_controller="drakit.dev/controller", reporting_instance=identity
    )

    def build() -> Controller:
        return Controller(api, config.controller, metrics=metrics, events=events)

    log.info(
        "Starting controller",
        identity=identity,
        schedulerName=config.controller.scheduler_name,
        claimGeneration=str(config.controller.claim_generation),
        workers=config.controller.workers,
        leaderElect=config.leader_election is not None,
    )
    try:
        if config.leader_election is None:
            build().run(stop)
            return 0
        if run_leader_elected(
            election_api, _election(config.leader_election, identity), build, stop
        ):
            return 0
        log.error("Leadership lost; exiting so that a fresh process campaigns again")
        return EXIT_FAILED
    finally:
        events.stop(timeout=5)
        if endpoint is not None:
            endpoint.close()


def _election(settings: LeaderElection, identity: str) -> LeaderElectionConfig:
    lease = settings.lease_duration
    return LeaderElectionConfig(
        lease_name=settings.lease_name,
        namespace=settings.namespace,
        identity=identity,
        lease_duration=lease,
        renew_deadline=lease * 0.7,
        retry_period=lease * 0.15,
    )
