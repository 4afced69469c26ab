"""What drakit's subcommands share about flags: how a subcommand's parser is made, the
``--kubeconfig`` flag, and the value checks of the long-running commands (``node-plugin``,
``controller``).

argparse checks ``choices`` only for values given on the command line, not for their
environment-variable twins, so every value is checked again here. Each check raises
:class:`ConfigError` with a message naming the flag and the reason; the command prints it
as one line and exits with code 2.
"""

from __future__ import annotations

import argparse
from typing import TypeAlias, TypeVar

from drakit.envflags import EnvDefault
from drakit.telemetry.address import parse_address
from drakit.telemetry.logs import LOG_FORMATS, LOG_LEVELS

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "ConfigError",
    "Subcommands",
    "add_command",
    "add_kubeconfig_flag",
    "add_log_flags",
    "check_address",
    "check_choice",
    "check_log_flags",
    "check_number",
    "client_limits",
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
