"""Several real nodes on one machine: a control plane and N nodes, each node in its own
network namespace on one bridge, with pod networking and kube-proxy.

    with NodeGroup(GroupConfig(nodes=3, work_dir=Path("/tmp/c"))) as group:
        group.kubeconfig            # admin, server https://198.19.0.1:PORT
        group.nodes[0].name         # drakit-node-1
        group.cut(group.nodes[0])   # eth0 down in its namespace: the node is partitioned

Needs root on Linux. ``start()`` returns once every node is Ready; ``stop()`` stops the
nodes, then the control plane, then restores the host's network (the bridge and its
routes) and sysctls; it is idempotent, and a launcher killed with SIGKILL is cleaned up
by the next real node's ``start()`` on this machine (``hoststate.sweep_nodes``: the
group's own record is of kind ``network``).

Addresses and names: ``netplan.py``; what the host gets: ``hostnet.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from drakit.localcluster import hoststate
from drakit.localcluster.cluster import ClusterConfig, LocalCluster
from drakit.localcluster.hostnet import (
    create_bridge,
    host_addresses_and_routes,
    set_link,
    set_node_routes,
)
from drakit.localcluster.netplan import (
    HOST_ADDRESS,
    check_unused,
    node_addresses,
    planned_networks,
)
from drakit.localcluster.node import LocalNode, NodeConfig, NodeNetwork, check_machine
from drakit.localcluster.noderecord import HostPath, NodeRecord, node_cgroup_name
from drakit.localcluster.process import StartedByWith


@dataclass
class GroupConfig:
    """How to run a group of real nodes and their control plane."""

    nodes: int = 3
    #: Folder for the control plane (``cluster/``) and the nodes (``node-<i>/``). None: a
    #: fresh temporary folder that stop() removes.
    work_dir: Path | None = None
    #: Node i is named ``<prefix><i>``.
    name_prefix: str = "drakit-node-"
    kube_version: str | None = field(
        default_factory=lambda: os.environ.get("DRAKIT_KUBE_VERSION") or None
    )
    start_timeout: float = 120.0
    machine_lock_timeout: float = 1800.0
    #: Host paths that each node has as a folder of its own (``NodeConfig.own_folders``).
    own_folders: tuple[str, ...] = ()
    #: Feature gates of every component (None: the default for the version); default:
    #: $DRAKIT_FEATURE_GATES, as ``ClusterConfig``.
    feature_gates: str | None = field(
        default_factory=lambda: os.environ.get("DRAKIT_FEATURE_GATES") or None
    )
    #: More ``--runtime-config`` entries and apiserver flags (``ClusterConfig``'s).
    runtime_config: str = ""
    extra_apiserver_args: tuple[str, ...] = ()


class NodeGroup(StartedByWith):
    """A running (or stoppable) control plane with several real nodes."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self._owns_work_dir = config.work_dir is None
        work = config.work_dir or Path(tempfile.mkdtemp(prefix="drakit-group-"))
        work.mkdir(parents=True, exist_ok=True)
        self.work_dir = work.resolve()
        self.plan = node_addresses(config.nodes)
        token = uuid.uuid4().hex[:8]
        self._record = NodeRecord(
            owner_pid=os.getpid(),
            token=token,
            work_dir=HostPath.of(self.work_dir),
            owns_work_dir=self._owns_work_dir,
            cgroup_name=node_cgroup_name(token),
            kind="network",
        )
        self.cluster: LocalCluster | None = None
        self.nodes: list[LocalNode] = []
        self._lock: hoststate.MachineLock | None = None

    @property
    def kubeconfig(self) -> str:
        """The control plane's admin kubeconfig (RuntimeError before ``start``)."""
        if self.cluster is None:
            raise RuntimeError("the node group is not started")
        return self.cluster.kubeconfig

    def start(self) -> None:
        """Make the nodes' network, start the control plane on it, then every node; return
        once all are Ready. On failure everything is stopped and the host restored."""
        check_machine()
        self._lock = hoststate.MachineLock.acquire(self.config.machine_lock_timeout)
        for line in hoststate.sweep_nodes():
            if line.startswith("refused"):
                print(f"drakit node group: {line}", file=sys.stderr)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        addresses, routes = host_addresses_and_routes()
        check_unused(planned_networks(self.config.nodes), addresses, routes)
        self._record.sysctls = hoststate.read_sysctls()
        self._record.save()
        bridge = create_bridge(self._record, self.plan)
        self.cluster = LocalCluster(
            ClusterConfig(
                work_dir=self.work_dir / "cluster",
                with_scheduler=True,
                with_controller_manager=True,
                real_nodes=True,
                kube_version=self.config.kube_version,
                bind_address=str(HOST_ADDRESS),
                feature_gates=self.config.feature_gates,
                runtime_config=self.config.runtime_config,
                extra_apiserver_args=self.config.extra_apiserver_args,
            )
        )
        self.cluster.start()
        for address in self.plan:
            others = tuple(a for a in self.plan if a != address)
            node = LocalNode(
                NodeConfig(
                    kubeconfig=Path(self.cluster.kubeconfig),
                    work_dir=self.work_dir / f"node-{address.index}",
                    node_name=f"{self.config.name_prefix}{address.index}",
                    kube_version=self.config.kube_version,
                    feature_gates=self.cluster.feature_gates,
                    start_timeout=self.config.start_timeout,
                    network=NodeNetwork(address, others, bridge),
                    take_machine_lock=False,
                    own_folders=self.config.own_folders,
                    host_sysctls=self._record.sysctls,
                )
            )
            self.nodes.append(node)
            node.start()

    def stop(self) -> None:
        """Stop every node, then the control plane, then restore the host. Idempotent."""
        for node in reversed(self.nodes):
            node.stop()
        self.nodes.clear()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        hoststate.restore(self._record)
        self._record.remove()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def node(self, name: str) -> LocalNode:
        """The running node called ``name`` (KeyError when there is none)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node {name!r} in this group")

    def cut(self, node: LocalNode) -> None:
        """Partition ``node``: its ``eth0`` goes down, so it reaches neither the
        apiserver nor another node, and nothing reaches it. Its processes keep running."""
        set_link("eth0", False, netns=node.netns)

    def reconnect(self, node: LocalNode) -> None:
        """Undo :meth:`cut`: ``eth0`` up again, with the routes it had (idempotent)."""
        set_link("eth0", True, netns=node.netns)
        if node.config.network is not None and node.netns is not None:
            set_node_routes(node.netns, node.config.network.others)
