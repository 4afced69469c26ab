"""``drakit controller``: run the companion controller.

Every flag has an environment-variable twin (shown in ``--help``). Validation happens before
anything connects: a bad value is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from drakit.cli.envflags import EnvDefault
from drakit.cli.flags import (
    ConfigError,
    Subcommands,
    add_client_limit_flags,
    add_command,
    add_kubeconfig_flag,
    add_leader_election_flags,
    add_log_flags,
    add_metrics_address_flag,
    add_workers_flag,
    check_address,
    check_choice,
    check_log_flags,
    check_number,
    client_limits_of,
)
from drakit.telemetry.logs import configure as configure_logging

if TYPE_CHECKING:
    from drakit.controller.main import RunConfig
    from drakit.controller.noexecute.decision import Budget

EXIT_INVALID = 2  # bad flags or environment: nothing was started
CLAIM_GENERATION_MODES = ("all", "scoped", "off")

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
           leaves a new pod's claims to it for --scoped-generation-grace seconds, and
           after that generates them only while kube-controller-manager is not leading
           (its leader Lease, --controller-manager-lease, is unheld or has not changed
           for its lease duration). A kube-controller-manager that runs with leader
           election but without its resourceclaim-controller therefore needs "all"
  off      none; kube-controller-manager generates claims for every pod

Run two or more replicas with --leader-elect: exactly one acts at a time, a standby takes
over within the lease duration plus one retry period (about 13 s with the defaults).
"""

EPILOG = """\
example:
  drakit controller --kubeconfig ~/.kube/config --claim-generation all \\
    --leader-elect --metrics-address :9401
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "controller",
        summary="run the companion controller (claim generation, lifecycle, scheduling)",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    env = EnvDefault
    add_kubeconfig_flag(p, "in-cluster service account")
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
    add_leader_election_flags(p, "drakit-controller")
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
        help="this replica's name; the Lease holder and Events carry it with a random "
        "suffix (NAME_1a2b3c4d), so a restarted replica never mistakes its predecessor's "
        "lease for its own (default: host name plus a random suffix)",
    )
    add_workers_flag(p, 10, "scheduling workers")
    p.add_argument(
        "--lifecycle-workers",
        metavar="N",
        action=env,
        env="LIFECYCLE_WORKERS",
        default="16",
        help="workers of their own for claim generation and the claim lifecycle, so slow "
        "scheduling never holds them up (default: %(default)s)",
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
        "--controller-manager-lease",
        metavar="NAMESPACE/NAME",
        action=env,
        env="CONTROLLER_MANAGER_LEASE",
        default="kube-system/kube-controller-manager",
        help="with --claim-generation scoped: kube-controller-manager's leader Lease; drakit "
        "generates claims only while it is not held. Empty: not checked (only for a "
        "kube-controller-manager without leader election; the grace period alone then keeps "
        "the two apart, and a slow kube-controller-manager can race drakit) "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--noexecute-per-node",
        metavar="K",
        action=env,
        env="NOEXECUTE_PER_NODE",
        default="1",
        help="NoExecute budget: most devices of one node that hold NoExecute at once; a node "
        "plugin's request past it waits, its device keeps NoSchedule (default: %(default)s)",
    )
    p.add_argument(
        "--noexecute-cluster-percent",
        metavar="P",
        action=env,
        env="NOEXECUTE_CLUSTER_PERCENT",
        default="10",
        help="NoExecute budget: most of a driver's devices, in percent of those its slices "
        "publish (rounded down, at least one when P > 0), that hold NoExecute at once "
        "cluster-wide; 0: nothing gets NoExecute (default: %(default)s)",
    )
    p.add_argument(
        "--noexecute-forget-after",
        metavar="SECONDS",
        action=env,
        env="NOEXECUTE_FORGET_AFTER",
        default="600",
        help="NoExecute budget: seconds a device's DeviceTaintRule outlives the device's "
        "absence from the slices (a node plugin restarting) (default: %(default)s)",
    )
    add_metrics_address_flag(p, 9401)
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
    add_client_limit_flags(
        p,
        70,
        130,
        "Events and the leader Lease each have a client with the same limits of "
        "their own, as kube-scheduler's do",
    )
    add_log_flags(p)
    p.set_defaults(func=run)  # fmt: skip


def build_config(args: argparse.Namespace) -> RunConfig:
    """Validate the flags into a ``RunConfig``; raises ConfigError naming the flag."""
    from drakit.controller.config import ClaimGeneration, ControllerConfig  # noqa: PLC0415
    from drakit.controller.main import LeaderElection, RunConfig  # noqa: PLC0415
    from drakit.kubeapi.leaderelection import default_identity  # noqa: PLC0415

    check_log_flags(args)
    scheduler_name = args.scheduler_name or ""
    if not scheduler_name:
        raise ConfigError("--scheduler-name must not be empty")
    mode = check_choice("--claim-generation", args.claim_generation, CLAIM_GENERATION_MODES)
    lease = check_number(
        "--leader-elect-lease-duration", args.leader_elect_lease_duration, float, 2.0
    )
    qps, burst = client_limits_of(args)
    # A suffix per process: a restarted container must not mistake its predecessor's Lease for
    # its own and act before the predecessor's term has visibly ended.
    identity = f"{args.identity}_{os.urandom(4).hex()}" if args.identity else default_identity()
    return RunConfig(
        controller=ControllerConfig(
            scheduler_name=scheduler_name,
            claim_generation=ClaimGeneration(mode),
            workers=check_number("--workers", args.workers, int, 1),
            lifecycle_workers=check_number("--lifecycle-workers", args.lifecycle_workers, int, 1),
            scoped_generation_grace=check_number(
                "--scoped-generation-grace", args.scoped_generation_grace, float, 0.0
            ),
            controller_manager_lease=check_lease_key(
                "--controller-manager-lease", args.controller_manager_lease
            ),
            identity=identity,
            noexecute=_budget(args),
        ),
        kubeconfig=args.kubeconfig,
        leader_election=(
            LeaderElection(
                args.leader_elect_lease_name or "drakit-controller",
                args.leader_elect_namespace,
                lease,
            )
            if _bool(args.leader_elect)
            else None
        ),
        metrics_address=check_address("--metrics-address", args.metrics_address),
        metrics_claim_namespaces=check_number(
            "--metrics-claim-namespaces", args.metrics_claim_namespaces, int, 0
        ),
        qps=qps,
        burst=burst,
    )


def _budget(args: argparse.Namespace) -> Budget:
    from drakit.controller.noexecute.decision import Budget  # noqa: PLC0415

    percent = check_number("--noexecute-cluster-percent", args.noexecute_cluster_percent,
                           float, 0.0)  # fmt: skip
    if percent > 100:
        raise ConfigError(
            f"--noexecute-cluster-percent {args.noexecute_cluster_percent!r} must be a "
            "percentage in [0, 100]"
        )
    return Budget(
        per_node=check_number("--noexecute-per-node", args.noexecute_per_node, int, 0),
        percent=percent,
        forget_after=check_number(
            "--noexecute-forget-after", args.noexecute_forget_after, float, 0.0
        ),
    )


def check_lease_key(flag: str, value: str | None) -> str:
    """``NAMESPACE/NAME`` or empty; ConfigError naming the flag otherwise."""
    from drakit.kubeapi.leaseobserver import parse_lease_key  # noqa: PLC0415 - kubeapi only when run

    if not value:
        return ""
    try:
        parse_lease_key(value)
    except ValueError as err:
        raise ConfigError(f"{flag}: {err}") from None
    return value


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def run(args: argparse.Namespace) -> int:
    from drakit.controller import main  # noqa: PLC0415

    try:
        config = build_config(args)
    except ConfigError as err:
        print(f"drakit controller: {err}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging(args.log_format, args.log_level)
    return main.run(config)
