"""NodePorts: a pod's host ports must be free on the node.

A host port is ``(host IP, protocol, port)`` with an empty IP meaning 0.0.0.0 and an empty
protocol TCP. It conflicts with a port in use with the same protocol and number when either
IP is 0.0.0.0 or the IPs are equal (kube-scheduler's ``HostPortInfo.CheckConflict``). The
ports of a pod are those of its containers and of its restartable (sidecar) init containers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ALL_IPS", "REASON_PORTS", "HostPort", "host_ports", "ports_conflict"]

REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
ALL_IPS = "0.0.0.0"

#: (host IP, protocol, port), sanitised.
HostPort = tuple[str, str, int]


def host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports ``pod`` binds on its node."""
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    found: list[HostPort] = []
    for container in [*sidecars, *(spec.get("containers") or ())]:
        for port in container.get("ports") or ():
            number = int(port.get("hostPort") or 0)
            if number > 0:
                found.append((port.get("hostIP") or ALL_IPS, port.get("protocol") or "TCP", number))
    return tuple(found)


def ports_conflict(wanted: Iterable[HostPort], in_use: Iterable[HostPort]) -> bool:
    """True when one of ``wanted`` collides with one of ``in_use``."""
    used = list(in_use)
    for ip, protocol, number in wanted:
        for used_ip, used_protocol, used_number in used:
            if (used_protocol, used_number) != (protocol, number):
                continue
            if ALL_IPS in (ip, used_ip) or ip == used_ip:
                return True
    return False
