"""The host side of the nodes' network: a bridge, one named network namespace per node with
a veth pair into it, and the routes between them (``ip`` from iproute2).

The layout (addresses in ``netplan.py``)::

    host netns: dkb<group> 198.19.0.1/24 ── dkv<node1> ┐        routes: 198.18.i.0/24 via node i,
                                        ── dkv<node2> ┤ (L2)   Services' range on the bridge
    drakit-<node1>: eth0 198.19.0.11/24, cni0 198.18.1.1/24 (pods), routes to the other nodes'
                    pods via their addresses, Services' range on eth0; no default route

Nodes talk to each other across the bridge (layer 2: the host forwards nothing, its
``ip_forward`` is left alone). A node has no default route, so whatever its pods send to an
address outside the plan is dropped in the node: nothing leaves the machine.

Every change is written to the owner's ``NodeRecord`` *before* it is made, by a name that
carries the record's token; ``restore_*`` deletes exactly those names, and only what still
exists (idempotent).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from drakit.localcluster.netplan import (
    HOST_ADDRESS,
    NODE_NETWORK,
    SERVICE_NETWORK,
    NodeAddress,
    bridge_name,
    netns_name,
    veth_name,
)
from drakit.localcluster.noderecord import NodeRecord
from drakit.localcluster.onefs import mounts

NETNS_DIR = Path("/run/netns")
_MNT_DETACH = 2


class HostNetError(RuntimeError):
    """An ``ip`` command failed; the message names the command and its error."""


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """Run ``ip [-n NETNS] ARGS``; its output, or HostNetError with its stderr."""
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    if check and proc.returncode != 0:
        raise HostNetError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc.stdout


def host_addresses_and_routes() -> tuple[list[str], list[str]]:
    """The host's IPv4 addresses (``a.b.c.d/len``) and route destinations, all tables."""
    addresses = [
        f"{a['local']}/{a['prefixlen']}"
        for link in json.loads(ip("-j", "-4", "addr", "show") or "[]")
        for a in link.get("addr_info", [])
        if a.get("local")
    ]
    routes = [
        str(r["dst"])
        for r in json.loads(ip("-j", "-4", "route", "show", "table", "all") or "[]")
        if r.get("type", "unicast") == "unicast" and r.get("dst")
    ]
    return addresses, routes


def netns_dir_is_mount_point() -> bool:
    """Whether ``/run/netns`` is a mount point now (``ip netns add`` makes it one)."""
    return any(point == str(NETNS_DIR) for point, _ in mounts())


# -- making (record first) --------------------------------------------------------


def create_bridge(record: NodeRecord, nodes: Sequence[NodeAddress]) -> str:
    """Make the nodes' bridge with the host's address, and the host's routes to every node's
    pods and to the Services' range; returns the bridge's name."""
    name = bridge_name(record.token)
    record.links.append(name)
    record.save()
    ip("link", "add", name, "type", "bridge")
    # No IPv6 on the bridge (no router solicitations, nothing to restore): the plan is IPv4.
    _write_sysctl(f"net/ipv6/conf/{name}/disable_ipv6", "1")
    # The apiserver stays on loopback: DNAT sends the nodes' traffic for the host's bridge
    # address there (hostfirewall.py), which the kernel allows only with route_localnet on
    # the interface the packets come in by. The setting goes with the bridge.
    _write_sysctl(f"net/ipv4/conf/{name}/route_localnet", "1")
    ip("addr", "add", f"{HOST_ADDRESS}/{NODE_NETWORK.prefixlen}", "dev", name)
    ip("link", "set", name, "up")
    for node in nodes:
        ip("route", "add", str(node.pod_subnet), "via", str(node.ip), "dev", name)
    # ClusterIPs from the host: kube-proxy's DNAT rewrites them; one without a Service stays
    # on the bridge rather than following the default route off the machine.
    ip("route", "add", str(SERVICE_NETWORK), "dev", name, "scope", "link")
    return name


def create_node_netns(
    record: NodeRecord, node: NodeAddress, bridge: str, others: Sequence[NodeAddress]
) -> str:
    """Make the node's network namespace, joined to ``bridge`` by a veth pair whose inner
    end is ``eth0``, with routes to the ``others``' pods; returns the namespace's name."""
    name = netns_name(record.token)
    outer = veth_name(record.token)
    record.netns.append(name)
    record.links.append(outer)
    record.save()
    ip("netns", "add", name)
    ip("link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", name)
    _write_sysctl(f"net/ipv6/conf/{outer}/disable_ipv6", "1")
    ip("link", "set", outer, "master", bridge, "up")
    ip("link", "set", "lo", "up", netns=name)
    ip("addr", "add", f"{node.ip}/{NODE_NETWORK.prefixlen}", "dev", "eth0", netns=name)
    ip("link", "set", "eth0", "up", netns=name)
    for other in others:
        ip("route", "add", str(other.pod_subnet), "via", str(other.ip), netns=name)
    ip("route", "add", str(SERVICE_NETWORK), "dev", "eth0", "scope", "link", netns=name)
    # The node routes its pods' traffic; the namespace's own setting, gone with it.
    run_in_netns(name, ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
    return name


def run_in_netns(name: str, argv: list[str]) -> None:
    """Run ``argv`` in the network namespace ``name`` (nsenter: no new mount namespace)."""
    full = ["nsenter", f"--net={NETNS_DIR / name}", "--", *argv]
    proc = subprocess.run(full, capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        raise HostNetError(f"{' '.join(full)} failed: {proc.stderr.strip()}")


def _write_sysctl(name: str, value: str) -> None:
    Path("/proc/sys", name).write_text(value)


def set_link(name: str, up: bool, netns: str | None = None) -> None:
    """Bring a link up or down (``eth0`` in a node's namespace: the node is cut off)."""
    ip("link", "set", name, "up" if up else "down", netns=netns)


# -- restoring --------------------------------------------------------------------


def restore_netns(record: NodeRecord) -> list[str]:
    """Delete the record's named network namespaces (the mount of each file, then the file).

    The namespace itself goes once nothing is left in it; its veth pair goes with it.
    """
    done = []
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    for name in record.netns:
        path = NETNS_DIR / name
        if not os.path.lexists(path):
            continue
        libc.umount2(str(path).encode(), _MNT_DETACH)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        done.append(f"deleted network namespace {name}")
    return done


def restore_links(record: NodeRecord) -> list[str]:
    """Delete the record's links that still exist (a veth's peer and routes go with it)."""
    done = []
    for name in record.links:
        if Path("/sys/class/net", name).exists():
            ip("link", "del", name, check=False)
            done.append(f"deleted link {name}")
    return done


def restore_netns_mount(record: NodeRecord) -> list[str]:
    """Unmount ``/run/netns`` when the record says it was no mount point before and no
    namespace (anyone's) is left in it."""
    if not record.netns_mount or not netns_dir_is_mount_point():
        return []
    if NETNS_DIR.is_dir() and any(NETNS_DIR.iterdir()):
        return [f"left the {NETNS_DIR} mount: other network namespaces are in it"]
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.umount2(str(NETNS_DIR).encode(), _MNT_DETACH) != 0:
        return [f"left the {NETNS_DIR} mount: {os.strerror(ctypes.get_errno())}"]
    return [f"unmounted {NETNS_DIR}"]
