"""``HOST:PORT`` addresses of the metrics endpoints (no Prometheus import: CLIs check flags
with it before anything heavy is loaded).

``:PORT`` (no host) does not mean every interface: it means the pod's own IP, which the
chart passes in ``POD_IP`` through the downward API, and the loopback address where that
variable is unset (a process started by hand or by the tests). Every interface stays
available as an explicit ``0.0.0.0:PORT`` (or ``[::]:PORT``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["LOOPBACK", "POD_IP_ENV", "default_host", "parse_address"]

#: The environment variable holding the pod's IP (downward API ``status.podIP``).
POD_IP_ENV = "POD_IP"
#: Where ``:PORT`` binds without ``POD_IP``: reachable only from the same network namespace.
LOOPBACK = "127.0.0.1"


def default_host(environ: Mapping[str, str] | None = None) -> str:
    """The host ``:PORT`` binds: ``$POD_IP`` when set, else the loopback address."""
    env = os.environ if environ is None else environ
    return env.get(POD_IP_ENV, "").strip() or LOOPBACK


def parse_address(address: str, environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    """Split ``HOST:PORT``; ``:PORT`` gets :func:`default_host`. ValueError if malformed."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{address!r} is not HOST:PORT (for example :8080 or 127.0.0.1:8080)")
    return host.strip("[]") or default_host(environ), int(port_text)
