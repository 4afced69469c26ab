"""``drakit driver-controller``: a driver's own controller (binding conditions).

Every flag has an environment-variable twin (shown in ``--help``). Validation, including
loading the ``--binding-check`` class, happens before anything connects: a bad value is one
line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from drakit.cli.envflags import EnvDefault
from drakit.cli.flags import (
    ConfigError,
    Subcommands,
    add_client_limit_flags,
    add_command,
    add_driver_name_flag,
    add_kubeconfig_flag,
    add_leader_election_flags,
    add_log_flags,
    add_workers_flag,
    check_log_flags,
    check_number,
    client_limits_of,
)
from drakit.telemetry.logs import configure as configure_logging
from drakit.telemetry.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from drakit.controller.bindingconditions import (
        BindingConditionsController,
        DriverControllerConfig,
    )
    from drakit.plugin.binding import BindingCheck

EXIT_INVALID = 2  # bad flags or environment: nothing was started
EXIT_FAILED = 1  # start-up failed or leadership was lost

log = get_logger("drakit.driver_controller")

DESCRIPTION = """\
Run a DRA driver's controller: it satisfies the binding conditions of the driver's devices.

A device published with bindingConditions keeps the pod that gets it waiting in
kube-scheduler (PreBind) until each condition is True in the claim's
status.devices[].conditions. This controller watches ResourceClaims, and for every
allocated device of --driver-name that still waits it asks the --binding-check class
(MODULE:CLASS, implementing drakit.plugin.BindingCheck; instantiated without arguments)
and writes the conditions it reports as met, or a binding failure condition (then
kube-scheduler deallocates the claim and tries again). Only this driver's entries of
status.devices change; writes are JSON patches of the driver's own entries of
status.devices guarded by the claim's resourceVersion (the allocation and other
drivers' entries are never sent back). Devices that still wait are checked again
every --recheck-period seconds and on every claim change. A claim nested deeper
than 100 levels is not checked: a NestedTooDeep Warning Event says where.

Permissions (least privilege; docs/writing-a-driver.md "Binding conditions"):
  resourceclaims           get, list, watch
  resourceclaims/status    patch
  resourceclaims/driver    arbitrary-node:patch, resourceNames: [DRIVER]
                           (granular status authorization, Kubernetes 1.36+)
  events                   create, patch
  leases                   get, create, update in the Lease namespace (--leader-elect only)
"""

EPILOG = """\
example:
  drakit driver-controller --driver-name gpu.example.com \\
    --binding-check example_driver.controller:BindingConditions
"""


def add_parser(sub: Subcommands) -> None:
    p = add_command(
        sub,
        "driver-controller",
        summary="run a driver's controller (binding conditions of its devices)",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    env = EnvDefault
    add_kubeconfig_flag(p, "in-cluster service account")
    add_driver_name_flag(
        p, "the DRA driver whose devices this controller serves (required)", required=False
    )
    p.add_argument(
        "--binding-check",
        metavar="MODULE:CLASS",
        action=env,
        env="BINDING_CHECK",
        help="the class that decides when binding conditions are met (required)",
    )
    add_workers_flag(p, 4, "claims checked in parallel")
    p.add_argument(
        "--recheck-period",
        metavar="SECONDS",
        action=env,
        env="RECHECK_PERIOD",
        default="5",
        help="how soon a device whose conditions are not all met is "
        "checked again, unless its verdict says otherwise (default: %(default)s)",
    )
    add_leader_election_flags(p, "drakit-driver-controller-DRIVER, dots as dashes")
    add_client_limit_flags(p, 20, 30)
    add_log_flags(p)
    p.set_defaults(func=run)  # fmt: skip


def load_binding_check(spec: str) -> BindingCheck:
    """An instance of the class ``spec`` (``module:Class``); ConfigError naming the flag."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--binding-check {spec!r}: not of the form module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"--binding-check {spec!r}: cannot import {module_name!r}: {err}"
        ) from None
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise ConfigError(f"--binding-check {spec!r}: {module_name!r} has no class {attr!r}")
    try:
        instance: Any = cls()
    except Exception as err:
        raise ConfigError(f"--binding-check {spec!r}: {attr}() failed: {err}") from None
    if not callable(getattr(instance, "check", None)):
        raise ConfigError(
            f"--binding-check {spec!r}: {attr} does not implement BindingCheck (no check method)"
        )
    return instance  # type: ignore[no-any-return]


def build_config(args: argparse.Namespace) -> DriverControllerConfig:
    """Validate the flags; raises ConfigError naming the flag."""
    from drakit.controller.bindingconditions import DriverControllerConfig  # noqa: PLC0415

    check_log_flags(args)
    if not args.driver_name:
        raise ConfigError("--driver-name is required")
    if not args.binding_check:
        raise ConfigError("--binding-check is required")
    return DriverControllerConfig(
        driver_name=args.driver_name,
        check=load_binding_check(args.binding_check),
        workers=check_number("--workers", args.workers, int, 1),
        recheck_period=check_number("--recheck-period", args.recheck_period, float, 0.1),
    )


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def run(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
        qps, burst = client_limits_of(args)
    except ConfigError as err:
        print(f"drakit driver-controller: {err}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging(args.log_format, args.log_level)
    return _serve(args, config, qps, burst)


def _serve(args: argparse.Namespace, config: DriverControllerConfig, qps: float, burst: int) -> int:
    from drakit.controller.bindingconditions import BindingConditionsController  # noqa: PLC0415
    from drakit.kubeapi.errors import ConfigError as KubeConfigError  # noqa: PLC0415
    from drakit.kubeapi.events import EventRecorder  # noqa: PLC0415
    from drakit.kubeapi.leaderelection import default_identity  # noqa: PLC0415
    from drakit.kubeapi.lightclient import load_light_client  # noqa: PLC0415

    try:
        api = load_light_client(args.kubeconfig, qps=qps, burst=burst,
                                user_agent="drakit-driver-controller",
                                pool_size=config.workers + 4, fast_json=True)  # fmt: skip
    except KubeConfigError as err:
        print(f"drakit driver-controller: {err}", file=sys.stderr)
        return EXIT_FAILED
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    events = EventRecorder(
        api,
        reporting_controller="drakit.dev/driver-controller",
        reporting_instance=f"{config.driver_name}-{default_identity()}"[:128],
    )

    def build() -> BindingConditionsController:
        return BindingConditionsController(api, config, events=events)

    try:
        return _run(args, config, api, build, stop)
    finally:
        events.stop(timeout=5)


def _run(
    args: argparse.Namespace,
    config: DriverControllerConfig,
    api: Any,
    build: Callable[[], BindingConditionsController],
    stop: threading.Event,
) -> int:
    from drakit.controller.leader import run_leader_elected  # noqa: PLC0415
    from drakit.kubeapi.leaderelection import (  # noqa: PLC0415
        LeaderElectionConfig,
        default_identity,
    )

    if not _bool(args.leader_elect):
        build().run(stop)
        return 0
    lease = args.leader_elect_lease_name or (
        "drakit-driver-controller-" + config.driver_name.replace(".", "-")
    )
    election = LeaderElectionConfig(
        lease_name=lease[:253],
        namespace=args.leader_elect_namespace,
        identity=default_identity(),
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
    )
    if run_leader_elected(api, election, build, stop):
        return 0
    log.error("Leadership lost; exiting so that a fresh process campaigns again")
    return EXIT_FAILED
