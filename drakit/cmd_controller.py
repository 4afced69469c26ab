"""``drakit controller``: run the companion controller.

Every flag has an environment-variable twin (shown in ``--help``). Validation happens before
anything connects: a bad value is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from drakit.envflags import EnvDefault

EXIT_INVALID = 2  # bad flags or environment: nothing was started
EXIT_FAILED = 1  # start-up failed, or leadership was lost (the process should restart)
CLAIM_GENERATION_MODES = ("all", "scoped", "off")
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")

DESCRIPTION = """\
Run the drakit companion controller.

The controller generates ResourceClaims from ResourceClaimTemplates for pods, keeps every
claim's reservations, allocation and finalizer consistent with the pods that use it, and
schedules the pods whose spec.schedulerName is --scheduler-name: it picks a node, allocates
their claims with drakit's structured-parameters allocator and binds them.

--claim-generation decides which pods get claims generated (and claim lifecycle):
  all      every pod; use when kube-controller-manager does not run its
           resourceclaim-controller (drakit replaces it)
  scoped   only pods that name --scheduler-name; use beside kube-controller-manager
           (the default). That controller generates claims for every pod, so drakit
           leaves a new pod's claims to it for --scoped-generation-grace seconds and
           generates only what is still missing then: the two never race on a pod
  off      none; kube-controller-manager generates claims for every pod

Run two or more replicas with --leader-elect: exactly one acts at a time, a standby takes
over within the lease duration plus one retry period (about 13 s with the defaults).
"""

EPILOG = """\
example:
  drakit controller --kubeconfig ~/.kube/config --claim-generation all \\
    --leader-elect --metrics-address :9401
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "controller",
        help="run the companion controller (claim generation, lifecycle, scheduling)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    env = EnvDefault
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        action=env,
        env="KUBECONFIG",
        help="kubeconfig file (default: in-cluster service account)",
    )
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        action=env,
        env="SCHEDULER_NAME",
        default="drakit",
        help="schedule pods whose spec.schedulerName is NAME (default: %(default)s)",
    )
    p.add_argument(
        "--claim-generation",
        metavar="MODE",
        action=env,
        env="CLAIM_GENERATION",
        default="scoped",
        help="all, scoped or off: which pods get claims generated, see above "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--leader-elect",
        action=env,
        env="LEADER_ELECT",
        nargs=0,
        default=False,
        help="act only while holding the leader Lease (for 2+ replicas)",
    )
    p.add_argument(
        "--leader-elect-namespace",
        metavar="NS",
        action=env,
        env="POD_NAMESPACE",
        default="kube-system",
        help="namespace of the leader Lease (default: %(default)s)",
    )
    p.add_argument(
        "--leader-elect-lease-name",
        metavar="NAME",
        action=env,
        env="LEADER_ELECT_LEASE_NAME",
        default="drakit-controller",
        help="name of the leader Lease (default: %(default)s)",
    )
    p.add_argument(
        "--leader-elect-lease-duration",
        metavar="SECONDS",
        action=env,
        env="LEADER_ELECT_LEASE_DURATION",
        default="10",
        help="how long a standby waits before taking over an unrenewed Lease "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--identity",
        metavar="NAME",
        action=env,
        env="POD_NAME",
        help="this replica's name in the Lease and in Events "
        "(default: host name plus a random suffix)",
    )
    p.add_argument(
        "--workers",
        metavar="N",
        action=env,
        env="WORKERS",
        default="10",
        help="keys synced in parallel (default: %(default)s)",
    )
    p.add_argument(
        "--scoped-generation-grace",
        metavar="SECONDS",
        action=env,
        env="SCOPED_GENERATION_GRACE",
        default="5",
        help="with --claim-generation scoped: seconds a new pod's claims are left to "
        "kube-controller-manager before drakit generates them (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        action=env,
        env="METRICS_ADDRESS",
        help="serve Prometheus metrics at HOST:PORT, e.g. :9401 (default: off)",
    )
    p.add_argument(
        "--metrics-claim-namespaces",
        metavar="N",
        action=env,
        env="METRICS_CLAIM_NAMESPACES",
        default="20",
        help="drakit_resource_claims keeps a namespace label for the N namespaces with the "
        "most claims and sums the rest under namespace=_other (default: %(default)s)",
    )
    # The defaults are the sum of the two upstream components drakit stands in for:
    # kube-scheduler (50 QPS, burst 100) and kube-controller-manager (20, burst 30).
    p.add_argument(
        "--kube-api-qps",
        metavar="QPS",
        action=env,
        env="KUBE_API_QPS",
        default="70",
        help="client-side request limit, 0 for none (default: %(default)s)",
    )
    p.add_argument(
        "--kube-api-burst",
        metavar="N",
        action=env,
        env="KUBE_API_BURST",
        default="130",
        help="client-side request burst (default: %(default)s)",
    )
    p.add_argument(
        "--log-format",
        metavar="FORMAT",
        action=env,
        env="LOG_FORMAT",
        default="json",
        help="json or text (default: %(default)s)",
    )
    p.add_argument(
        "--log-level",
        metavar="LEVEL",
        action=env,
        env="LOG_LEVEL",
        default="info",
        help="debug, info, warning or error (default: %(default)s)",
    )
    p.set_defaults(func=run)  # fmt: skip


class ConfigError(ValueError):
    """A flag or environment value is unusable; the message names it and says why."""


def _choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{flag}: {value!r} is not one of {', '.join(choices)}")
    return value


def _number(flag: str, value: Any, kind: type, minimum: float) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag}: {value!r} is not a {kind.__name__}") from None
    if number < minimum:
        raise ConfigError(f"{flag}: must be at least {minimum}, got {value}")
    return number


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _address(flag: str, value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{flag}: {value!r} is not HOST:PORT (e.g. :9401)")
    return host.strip("[]") or "0.0.0.0", int(port)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from controller.config import ClaimGeneration  # noqa: PLC0415

    lease = _number("--leader-elect-lease-duration", args.leader_elect_lease_duration, float, 2)
    return {
        "scheduler_name": args.scheduler_name or "",
        "claim_generation": ClaimGeneration(
            _choice("--claim-generation", args.claim_generation, CLAIM_GENERATION_MODES)
        ),
        "workers": _number("--workers", args.workers, int, 1),
        "scoped_generation_grace": _number(
            "--scoped-generation-grace", args.scoped_generation_grace, float, 0
        ),
        "leader_elect": _bool(args.leader_elect),
        "lease_duration": lease,
        "metrics": _address("--metrics-address", args.metrics_address),
        "metrics_claim_namespaces": _number(
            "--metrics-claim-namespaces", args.metrics_claim_namespaces, int, 0
        ),
        "qps": _number("--kube-api-qps", args.kube_api_qps, float, 0),
        "burst": _number("--kube-api-burst", args.kube_api_burst, int, 1),
        "log_format": _choice("--log-format", args.log_format, LOG_FORMATS),
        "log_level": _choice("--log-level", args.log_level, LOG_LEVELS),
    }


def run(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
        if not settings["scheduler_name"]:
            raise ConfigError("--scheduler-name: must not be empty")
    except ConfigError as err:
        print(f"drakit controller: {err}", file=sys.stderr)
        return EXIT_INVALID
    return _serve(args, settings)


def _serve(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    import logging  # noqa: PLC0415

    from controller.app import Controller  # noqa: PLC0415
    from controller.config import ControllerConfig  # noqa: PLC0415
    from controller.leader import run_leader_elected  # noqa: PLC0415
    from controller.logs import configure_logging  # noqa: PLC0415
    from controller.metrics import ControllerMetrics  # noqa: PLC0415
    from kubeapi.client import load_client  # noqa: PLC0415
    from kubeapi.errors import ConfigError as KubeConfigError  # noqa: PLC0415
    from kubeapi.events import EventRecorder  # noqa: PLC0415
    from kubeapi.leaderelection import LeaderElectionConfig, default_identity  # noqa: PLC0415
    from kubeapi.pool import widen_connection_pool  # noqa: PLC0415

    # The retrying endpoint is the node plugin's: on the host network a new replica starts
    # while the old one still holds the port (rolling update), and must not crash for it.
    from node_plugin.metrics import MetricsEndpoint  # noqa: PLC0415

    configure_logging(settings["log_format"], settings["log_level"])
    log = logging.getLogger("drakit.controller")
    # A suffix per process: a restarted container must not mistake its predecessor's Lease for
    # its own and act before the predecessor's term has visibly ended.
    identity = f"{args.identity}_{os.urandom(4).hex()}" if args.identity else default_identity()
    try:
        api = load_client(
            args.kubeconfig, qps=settings["qps"], burst=settings["burst"],
            user_agent="drakit-controller",
        )  # fmt: skip
    except KubeConfigError as err:
        print(f"drakit controller: {err}", file=sys.stderr)
        return EXIT_FAILED
    widen_connection_pool(api, settings["workers"] + 8)  # workers, informers, events, lease
    config = ControllerConfig(
        scheduler_name=settings["scheduler_name"],
        claim_generation=settings["claim_generation"],
        workers=settings["workers"],
        scoped_generation_grace=settings["scoped_generation_grace"],
        identity=identity,
    )
    metrics = ControllerMetrics(top_namespaces=settings["metrics_claim_namespaces"])
    if settings["metrics"] is not None:
        host, port = settings["metrics"]
        try:
            endpoint = MetricsEndpoint(metrics.registry, host, port)
        except OSError as err:
            print(f"drakit controller: --metrics-address: {err}", file=sys.stderr)
            return EXIT_FAILED
        if not endpoint.serving:
            log.warning(
                "Metrics port in use; serving metrics once it is free", extra={"port": port}
            )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    events = EventRecorder(
        api, reporting_controller="drakit.dev/controller", reporting_instance=identity
    )

    def build() -> Controller:
        return Controller(api, config, metrics=metrics, events=events)

    log.info(
        "Starting controller",
        extra={"identity": identity, "schedulerName": config.scheduler_name,
               "claimGeneration": str(config.claim_generation), "workers": config.workers,
               "leaderElect": settings["leader_elect"]},
    )  # fmt: skip
    try:
        if not settings["leader_elect"]:
            build().run(stop)
            return 0
        lease = settings["lease_duration"]
        election = LeaderElectionConfig(
            lease_name=args.leader_elect_lease_name,
            namespace=args.leader_elect_namespace,
            identity=identity,
            lease_duration=lease,
            renew_deadline=lease * 0.7,
            retry_period=lease * 0.15,
        )
        if run_leader_elected(api, election, build, stop):
            return 0
        log.error("Leadership lost; exiting so that a fresh process campaigns again")
        return EXIT_FAILED
    finally:
        events.stop(timeout=5)
