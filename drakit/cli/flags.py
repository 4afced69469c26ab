"""What drakit's subcommands share about flags: how a subcommand's parser is made, every flag
that more than one command takes (declared here once: name, variable, metavar and meaning;
a command says only what differs, its default or what the value means for it), and the
value checks of the long-running commands.

argparse checks ``choices`` only for values given on the command line, not for their
environment-variable twins, so every value is checked again here. Each check raises
:class:`ConfigError` with a message naming the flag and the reason; the command prints it
as one line and exits with code 2.
"""

from __future__ import annotations

import argparse
from typing import Any, TypeAlias, TypeVar

from drakit.cli.envflags import EnvDefault
from drakit.telemetry.address import parse_address
from drakit.telemetry.logs import LOG_FORMATS, LOG_LEVELS

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "ConfigError",
    "Subcommands",
    "add_backend_flags",
    "add_client_limit_flags",
    "add_command",
    "add_driver_name_flag",
    "add_kubeconfig_flag",
    "add_leader_election_flags",
    "add_log_flags",
    "add_metrics_address_flag",
    "add_workers_flag",
    "check_address",
    "check_choice",
    "check_log_flags",
    "check_number",
    "client_limits",
    "client_limits_of",
]


# A string: argparse's class cannot be subscripted at run time.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(
    sub: Subcommands, name: str, *, summary: str, description: str, epilog: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``drakit NAME`` as every subcommand has it: description and epilog
    printed as written, and no abbreviated flags (``--node`` must never silently mean
    ``--node-name``)."""
    return sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )


def add_kubeconfig_flag(parser: argparse.ArgumentParser, without: str) -> None:
    """``--kubeconfig FILE`` (``$KUBECONFIG``); ``without`` says what is used when it is unset."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        action=EnvDefault,
        env="KUBECONFIG",
        help=f"kubeconfig file (default: {without})",
    )


def add_log_flags(parser: argparse.ArgumentParser) -> None:
    """``--log-format`` (``$LOG_FORMAT``) and ``--log-level`` (``$LOG_LEVEL``); check the
    values with :func:`check_log_flags` (argparse checks choices of flags only)."""
    for flag, metavar, default, choices in (
        ("--log-format", "FORMAT", "json", LOG_FORMATS),
        ("--log-level", "LEVEL", "info", LOG_LEVELS),
    ):
        parser.add_argument(
            flag,
            metavar=metavar,
            action=EnvDefault,
            env=flag.removeprefix("--").replace("-", "_").upper(),
            default=default,
            choices=choices,
            help=f"{', '.join(choices)} (default: %(default)s)",
        )


def add_driver_name_flag(
    parser: argparse.ArgumentParser, meaning: str, *, required: bool = True, env: bool = True
) -> None:
    """``--driver-name NAME`` (``$DRIVER_NAME``); ``meaning`` says what the driver is to
    this command. ``env=False`` for commands a person types (``drakit dev``)."""
    kwargs: dict[str, Any] = {"action": EnvDefault, "env": "DRIVER_NAME"} if env else {}
    parser.add_argument("--driver-name", metavar="NAME", required=required, help=meaning, **kwargs)


def add_backend_flags(
    parser: argparse.ArgumentParser,
    meaning: str,
    *,
    default: str | None = None,
    config: str | None = None,
    env: bool = True,
) -> None:
    """``--backend`` (``$BACKEND``: a built-in backend name or ``module:Class``), required
    unless ``default`` is given; with ``config`` (what the file is for) also
    ``--backend-config FILE`` (``$BACKEND_CONFIG``)."""
    kwargs: dict[str, Any] = {"action": EnvDefault, "env": "BACKEND"} if env else {}
    parser.add_argument(
        "--backend",
        metavar="MODULE:CLASS",
        default=default,
        required=default is None,
        help=meaning,
        **kwargs,
    )
    if config is not None:
        kwargs = {"action": EnvDefault, "env": "BACKEND_CONFIG"} if env else {}
        parser.add_argument("--backend-config", metavar="FILE", help=config, **kwargs)


def add_workers_flag(parser: argparse.ArgumentParser, default: int, meaning: str) -> None:
    """``--workers N`` (``$WORKERS``); check with :func:`check_number` (at least 1)."""
    parser.add_argument(
        "--workers",
        metavar="N",
        action=EnvDefault,
        env="WORKERS",
        default=str(default),
        help=f"{meaning} (default: %(default)s)",
    )


def add_metrics_address_flag(parser: argparse.ArgumentParser, port: int) -> None:
    """``--metrics-address HOST:PORT`` (``$METRICS_ADDRESS``), off by default; ``port`` is
    the command's usual one, named in the help. Check with :func:`check_address`."""
    parser.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        action=EnvDefault,
        env="METRICS_ADDRESS",
        help=f"serve Prometheus metrics at HOST:PORT; :{port} binds $POD_IP, else 127.0.0.1 "
        f"(0.0.0.0:{port}: every interface) (default: off)",
    )


def add_client_limit_flags(
    parser: argparse.ArgumentParser, qps: int, burst: int, note: str = ""
) -> None:
    """``--kube-api-qps`` (``$KUBE_API_QPS``, 0: no limit) and ``--kube-api-burst``
    (``$KUBE_API_BURST``), the API client's token bucket; read them with
    :func:`client_limits_of`. ``note`` adds what the limit covers for this command."""
    parser.add_argument(
        "--kube-api-qps",
        metavar="QPS",
        action=EnvDefault,
        env="KUBE_API_QPS",
        default=str(qps),
        help=f"client-side request limit, 0 for none{'; ' + note if note else ''} "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--kube-api-burst",
        metavar="N",
        action=EnvDefault,
        env="KUBE_API_BURST",
        default=str(burst),
        help="client-side request burst (default: %(default)s)",
    )


def add_leader_election_flags(parser: argparse.ArgumentParser, lease_name: str) -> None:
    """``--leader-elect`` (``$LEADER_ELECT``), ``--leader-elect-namespace``
    (``$POD_NAMESPACE``, default kube-system) and ``--leader-elect-lease-name``
    (``$LEADER_ELECT_LEASE_NAME``); ``lease_name`` describes the default name, which the
    command fills in when the flag is unset."""
    parser.add_argument(
        "--leader-elect",
        action=EnvDefault,
        env="LEADER_ELECT",
        nargs=0,
        default=False,
        help="act only while holding the leader Lease (for 2+ replicas)",
    )
    parser.add_argument(
        "--leader-elect-namespace",
        metavar="NS",
        action=EnvDefault,
        env="POD_NAMESPACE",
        default="kube-system",
        help="namespace of the leader Lease (default: %(default)s)",
    )
    parser.add_argument(
        "--leader-elect-lease-name",
        metavar="NAME",
        action=EnvDefault,
        env="LEADER_ELECT_LEASE_NAME",
        help=f"name of the leader Lease (default: {lease_name})",
    )


class ConfigError(ValueError):
    """A flag or environment value is unusable; the message names it and says why."""


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{flag} {value!r} is not one of {', '.join(choices)}")
    return value


N = TypeVar("N", int, float)


def check_number(flag: str, value: object, kind: type[N], minimum: N) -> N:
    """``value`` as ``kind`` (int or float), at least ``minimum``."""
    try:
        number = kind(str(value))
    except ValueError:
        raise ConfigError(f"{flag} {value!r} is not a number ({kind.__name__})") from None
    if number < minimum:
        raise ConfigError(f"{flag} must be at least {minimum}, got {value}")
    return number


def check_log_flags(args: argparse.Namespace) -> None:
    """The values of :func:`add_log_flags`' flags, also when they came from the environment."""
    check_choice("--log-format", args.log_format, LOG_FORMATS)
    check_choice("--log-level", args.log_level, LOG_LEVELS)


def check_address(flag: str, value: str | None) -> tuple[str, int] | None:
    """``HOST:PORT`` as (host, port) (``:PORT``: ``$POD_IP``, else loopback); None when unset."""
    if not value:
        return None
    try:
        return parse_address(value)
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from exc


def client_limits(qps_flag: str, qps: object, burst_flag: str, burst: object) -> tuple[float, int]:
    """Client-side API limits: QPS of 0 means no limit (client-go's meaning), burst >= 1."""
    return check_number(qps_flag, qps, float, 0.0), check_number(burst_flag, burst, int, 1)


def client_limits_of(args: argparse.Namespace) -> tuple[float, int]:
    """The values of :func:`add_client_limit_flags`' flags, checked."""
    return client_limits("--kube-api-qps", args.kube_api_qps,
                         "--kube-api-burst", args.kube_api_burst)  # fmt: skip
