"""``drakit node-plugin``'s flags of the PodResources cross-check (docs/podresources.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from drakit.cli.envflags import EnvDefault
from drakit.cli.flags import ConfigError
from drakit.node_plugin.crosscheck import CrossCheckConfig

__all__ = ["add_podresources_flags", "podresources_config"]

MODES = ("on", "off")
_MAX_SECONDS = 7 * 24 * 3600.0


def add_podresources_flags(p: argparse.ArgumentParser) -> None:
    """Add the ``--podresources-*`` flags (each with an environment-variable twin)."""
    env = EnvDefault
    g = p.add_argument_group(
        "PodResources cross-check",
        "compare the kubelet's PodResources API (which container uses which device) with the "
        "plugin's checkpoint: claims prepared but used by no container (leaks), containers "
        "using devices the checkpoint does not list, claims in use that the checkpoint lost; "
        "each finding is a metric, a log line and, for old leaks, an Event on the claim. The "
        "last round is served as JSON at /debug/node-view on --metrics-address (read by "
        "'drakit devices --node')",
    )
    g.add_argument(
        "--podresources-check",
        action=env,
        env="PODRESOURCES_CHECK",
        default="off",
        metavar="on|off",
        help="run the cross-check (default: %(default)s)",
    )
    g.add_argument(
        "--podresources-socket",
        action=env,
        env="PODRESOURCES_SOCKET",
        default="/var/lib/kubelet/pod-resources/kubelet.sock",
        metavar="PATH",
        help="the kubelet's PodResources socket; mount its folder read-only (default: %(default)s)",
    )
    g.add_argument(
        "--podresources-period",
        action=env,
        env="PODRESOURCES_PERIOD",
        default="60",
        metavar="SECONDS",
        help="seconds between two rounds (default: %(default)s)",
    )
    g.add_argument(
        "--podresources-grace",
        action=env,
        env="PODRESOURCES_GRACE",
        default="300",
        metavar="SECONDS",
        help="a disagreement counts only after it persisted this long; covers the time "
        "between prepare and container start (image pulls) (default: %(default)s)",
    )
    g.add_argument(
        "--podresources-event-after",
        action=env,
        env="PODRESOURCES_EVENT_AFTER",
        default="1800",
        metavar="SECONDS",
        help="a leak this old gets a Warning Event PreparedClaimUnused on its claim; at "
        "least --podresources-grace (default: %(default)s)",
    )


def _seconds(flag: str, value: str, *, minimum: float) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not minimum <= seconds <= _MAX_SECONDS:
        raise ConfigError(
            f"{flag} {value!r} must be seconds in [{minimum:g}, {_MAX_SECONDS:g}] (7 days)"
        )
    return seconds


def podresources_config(args: argparse.Namespace) -> CrossCheckConfig | None:
    """The cross-check of the flags, None when off; ConfigError names the flag and reason."""
    if args.podresources_check not in MODES:
        raise ConfigError(f"--podresources-check {args.podresources_check!r} must be on or off")
    socket = Path(args.podresources_socket)
    if not socket.is_absolute():
        raise ConfigError(f"--podresources-socket {args.podresources_socket!r} must be absolute")
    period = _seconds("--podresources-period", args.podresources_period, minimum=1)
    grace = _seconds("--podresources-grace", args.podresources_grace, minimum=0)
    event_after = _seconds("--podresources-event-after", args.podresources_event_after, minimum=0)
    if event_after < grace:
        raise ConfigError(
            f"--podresources-event-after {args.podresources_event_after!r} must be at least "
            f"--podresources-grace ({grace:g})"
        )
    if args.podresources_check == "off":
        return None
    return CrossCheckConfig(socket, period=period, grace=grace, event_after=event_after)
