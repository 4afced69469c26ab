"""The address plan of several real nodes on one machine, and the names of what they make.

Every address is in the benchmarking range 198.18.0.0/15 (RFC 2544, never routed on the
internet), which the single node's carrier-less pods already use (198.18.0.0/24):

- the nodes' network, ``198.19.0.0/24``: a Linux bridge on the host holding
  ``198.19.0.1`` (where the nodes reach the apiserver), node *i* at ``198.19.0.<10+i>``;
- node *i*'s pods, ``198.18.<i>.0/24`` (the CNI ``bridge`` plugin and ``host-local``),
  all inside the cluster CIDR ``198.18.0.0/16`` that kube-proxy calls local;
- Services, the control plane's ``--service-cluster-ip-range`` (``10.0.0.0/24``).

Names carry the record's token, so a restore acts only on what that record made (a bridge
``dkb<token>``, a node's host-side veth ``dkv<token>``, its network namespace
``drakit-<token>``, the host's firewall chain ``DRAKIT-<token>``). This module is pure:
``check_unused`` decides from the host's addresses and routes, which the caller reads.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

NODE_NETWORK = ipaddress.IPv4Network("198.19.0.0/24")
#: The host's address on the nodes' bridge.
HOST_ADDRESS = ipaddress.IPv4Address("198.19.0.1")
CLUSTER_CIDR = ipaddress.IPv4Network("198.18.0.0/16")
#: The control plane's ``--service-cluster-ip-range`` (``cluster.py``).
SERVICE_NETWORK = ipaddress.IPv4Network("10.0.0.0/24")
#: The first address of the Service range: the ``kubernetes`` Service's ClusterIP.
KUBERNETES_SERVICE_IP = next(SERVICE_NETWORK.hosts())
#: Node i's address is .<10+i> and its pods get 198.18.<i>.0/24.
MAX_NODES = 16
_FIRST_NODE_HOST = 10


class PlanError(ValueError):
    """The plan cannot be used on this machine (a range is taken) or was asked wrongly."""


@dataclass(frozen=True)
class NodeAddress:
    """Where node ``index`` (1-based) lives on the nodes' network."""

    index: int
    ip: ipaddress.IPv4Address
    pod_subnet: ipaddress.IPv4Network

    @property
    def pod_gateway(self) -> ipaddress.IPv4Address:
        """The node's own address on its pods' bridge (their default route)."""
        return next(self.pod_subnet.hosts())


def node_address(index: int) -> NodeAddress:
    """Node ``index``'s addresses; PlanError unless 1 <= index <= MAX_NODES."""
    if not 1 <= index <= MAX_NODES:
        raise PlanError(f"node index {index} is outside 1..{MAX_NODES}")
    return NodeAddress(
        index=index,
        ip=NODE_NETWORK.network_address + _FIRST_NODE_HOST + index,
        pod_subnet=ipaddress.IPv4Network(f"198.18.{index}.0/24"),
    )


def node_addresses(count: int) -> list[NodeAddress]:
    """The addresses of nodes 1..``count``; PlanError naming the limit when out of range."""
    if not 1 <= count <= MAX_NODES:
        raise PlanError(f"--nodes {count}: between 1 and {MAX_NODES} nodes fit the address plan")
    return [node_address(i) for i in range(1, count + 1)]


def planned_networks(count: int) -> list[ipaddress.IPv4Network]:
    """Every range the plan for ``count`` nodes puts on this machine."""
    return [NODE_NETWORK, SERVICE_NETWORK, *(a.pod_subnet for a in node_addresses(count))]


def check_unused(
    planned: Iterable[ipaddress.IPv4Network],
    addresses: Iterable[str],
    routes: Iterable[str],
) -> None:
    """PlanError naming the range and what holds it when a planned range overlaps one of the
    host's ``addresses`` (``a.b.c.d/len``) or ``routes`` (a destination, ``default``
    excluded: a default route covers everything and takes nothing)."""
    taken: list[tuple[ipaddress.IPv4Network, str]] = []
    for address in addresses:
        taken.append((ipaddress.IPv4Interface(address).network, f"address {address}"))
    for route in routes:
        if route != "default":
            taken.append((ipaddress.IPv4Network(route, strict=False), f"route {route}"))
    for network in planned:
        for held, what in taken:
            if network.overlaps(held):
                raise PlanError(
                    f"{network} is part of the nodes' address plan, but this machine already "
                    f"has {what}: several real nodes need that range to themselves"
                )


def bridge_name(token: str) -> str:
    """The host bridge of the nodes' network (15 characters at most, a Linux limit)."""
    return f"dkb{token}"


def veth_name(token: str) -> str:
    """A node's veth end on the host (its other end is ``eth0`` in the node's namespace)."""
    return f"dkv{token}"


def netns_name(token: str) -> str:
    """A node's named network namespace (``/run/netns/<name>``, ``ip netns list``)."""
    return f"drakit-{token}"


def firewall_chain(token: str) -> str:
    """The host's nat chain that sends the nodes' apiserver traffic to loopback."""
    return f"DRAKIT-{token}"
