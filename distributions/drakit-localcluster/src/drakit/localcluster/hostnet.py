"""The host side of the nodes' network: a bridge, one network namespace per node with a
veth pair into it, and the routes between them (``ip`` from iproute2, ``unshare``, ``nsenter``).

The layout (addresses in ``netplan.py``)::

    host: dkb<group> 198.19.0.1/24 ── dkv<node1>   routes: 198.18.i.0/24 via node i
                                  ── dkv<node2>
    node i (its own netns): eth0 198.19.0.1i/24; cni0 198.18.i.1/24 for its pods (the CNI
    bridge plugin); routes to the other nodes' pods via their addresses; no default route

Nodes talk to each other across the bridge (layer 2: the host forwards nothing, its
``ip_forward`` is left alone). A node has no default route, so whatever its pods send to an
address outside the plan is dropped in the node: nothing leaves the machine.

A node's namespace is a file in the node's run folder that the namespace is bound to
(``unshare --net=FILE``), not a name under ``/run/netns``: ``ip netns`` would make
``/run/netns`` a mount point of the host's. The file is a created path of the node's
record, unmounted and removed with the rest of it; the veth pair goes with the namespace.

Every link is written to its owner's ``NodeRecord`` *before* it is made, by a name that
carries the record's token; ``restore_links`` deletes exactly those names, and only what
still exists (idempotent).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from drakit.localcluster.netplan import (
    HOST_ADDRESS,
    NODE_NETWORK,
    SERVICE_NETWORK,
    NodeAddress,
    bridge_name,
    veth_name,
)
from drakit.localcluster.noderecord import NodeRecord


class HostNetError(RuntimeError):
    """An ``ip`` command failed; the message names the command and its error."""


def ip(*args: str, netns: Path | None = None, check: bool = True) -> str:
    """Run ``ip ARGS`` (in the namespace bound to the file ``netns``, if given); its output,
    or HostNetError with its stderr."""
    return _run([*in_netns(netns), "ip", *args], check)


def in_netns(netns: Path | None) -> list[str]:
    """The argv prefix that runs a command in the namespace bound to ``netns`` (nothing when
    None): ``nsenter --net`` only, so the command keeps the host's mounts, cgroups and pids."""
    return ["nsenter", f"--net={netns}", "--"] if netns is not None else []


def _run(argv: list[str], check: bool = True) -> str:
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


# -- making (record first) --------------------------------------------------------


def create_bridge(record: NodeRecord, nodes: Sequence[NodeAddress]) -> str:
    """Make the nodes' bridge with the host's address, and the host's routes to every node's
    pods and to the Services' range; returns the bridge's name.

    The control plane binds the host's bridge address, so the nodes reach it directly.
    ClusterIPs from the host go to the nodes (one route with every node as a next hop):
    a node's kube-proxy rewrites them and, the host being outside the cluster CIDR,
    masquerades, so the answer comes back the same way.
    """
    name = bridge_name(record.token)
    record.links.append(name)
    record.save()
    ip("link", "add", name, "type", "bridge")
    # No IPv6 on the bridge (no router solicitations, nothing to restore): the plan is IPv4.
    _write_sysctl(f"net/ipv6/conf/{name}/disable_ipv6", "1")
    ip("addr", "add", f"{HOST_ADDRESS}/{NODE_NETWORK.prefixlen}", "dev", name)
    ip("link", "set", name, "up")
    for node in nodes:
        ip("route", "add", str(node.pod_subnet), "via", str(node.ip), "dev", name)
    hops = [arg for node in nodes for arg in ("nexthop", "via", str(node.ip), "dev", name)]
    ip("route", "add", str(SERVICE_NETWORK), *hops)
    return name


def create_node_netns(
    record: NodeRecord, node: NodeAddress, bridge: str, others: Sequence[NodeAddress], file: Path
) -> None:
    """Make the node's network namespace, bound to ``file`` (in a folder the record owns),
    joined to ``bridge`` by a veth pair whose inner end is ``eth0``, with routes to the
    ``others``' pods."""
    outer = veth_name(record.token)
    record.links.append(outer)
    record.save()
    file.touch(mode=0o600)
    _run(["unshare", f"--net={file}", "true"])
    # The pair is made inside; its outer end goes to PID 1's namespace, the host's.
    ip("link", "add", "eth0", "type", "veth", "peer", "name", outer, "netns", "1", netns=file)
    _write_sysctl(f"net/ipv6/conf/{outer}/disable_ipv6", "1")
    ip("link", "set", outer, "master", bridge, "up")
    ip("link", "set", "lo", "up", netns=file)
    ip("addr", "add", f"{node.ip}/{NODE_NETWORK.prefixlen}", "dev", "eth0", netns=file)
    ip("link", "set", "eth0", "up", netns=file)
    set_node_routes(file, others)
    # The node routes its pods' traffic: the namespace's own setting, gone with it.
    _run([*in_netns(file), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])


def make_private_mount(folder: Path) -> None:
    """Make ``folder`` a private mount of itself, before any namespace is bound to a file
    in it: a mount namespace can be bound only on a mount that does not propagate (``ip
    netns`` does the same with ``/run/netns``). Unmounted with the node's other mounts."""
    _run(["mount", "--bind", str(folder), str(folder)])
    _run(["mount", "--make-private", str(folder)])


def create_node_mntns(file: Path, folders: dict[str, Path]) -> None:
    """Make the node's mount namespace, bound to ``file`` (in a folder made private by
    ``make_private_mount``), in which each key of ``folders`` (a host path such as
    ``/var/lib/kubelet``) is the node's own folder it names. The namespace's mounts are its
    own (private from the host, shared within: the kubelet's Bidirectional volumes), and
    go when it does."""
    file.touch(mode=0o600)
    binds = " && ".join(
        f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"
        for target, source in folders.items()
    )
    script = f"{binds} && mount --make-rshared /" if binds else "mount --make-rshared /"
    _run(["unshare", f"--mount={file}", "--propagation", "private", "sh", "-c", script])


def _write_sysctl(name: str, value: str) -> None:
    Path("/proc/sys", name).write_text(value)


def set_node_routes(file: Path, others: Sequence[NodeAddress]) -> None:
    """Give the node in the namespace bound to ``file`` its routes on ``eth0`` (idempotent:
    the kernel drops them when the link goes down, and a reconnect sets them again)."""
    for other in others:
        ip("route", "replace", str(other.pod_subnet), "via", str(other.ip), netns=file)
    # ClusterIPs from the node itself (its host-network pods, the kubelet): without a route
    # the connect fails before kube-proxy's DNAT can rewrite the address.
    ip("route", "replace", str(SERVICE_NETWORK), "dev", "eth0", "scope", "link", netns=file)


def set_link(name: str, up: bool, netns: Path | None = None) -> None:
    """Bring a link up or down (``eth0`` in a node's namespace: the node is cut off)."""
    ip("link", "set", name, "up" if up else "down", netns=netns)


# -- restoring --------------------------------------------------------------------


def restore_links(record: NodeRecord) -> list[str]:
    """Delete the record's links that still exist (a veth's peer and routes go with it)."""
    done = []
    for name in record.links:
        if Path("/sys/class/net", name).exists():
            ip("link", "del", name, check=False)
            done.append(f"deleted link {name}")
    return done
