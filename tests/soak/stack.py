"""The soak's stack: the real control plane, two leader-elected controller replicas and
simulated nodes (kubelet harness + node plugin each), every component reaching the
apiserver through a chaos proxy of its own; with ``real_node``, also a real node
(``soak.realnode``: containerd + the real kubelet + the chart's plugin DaemonSet), whose
kubelet and plugin have a proxy each too.

Nodes ``soak-a`` and ``soak-b`` take pods scheduled by kube-scheduler, ``soak-c`` (and any
further node) pods scheduled by drakit (``schedulerName: drakit``); the real node
``soak-real`` takes pods of both, on devices split between them (``soak.workload``).
The split is deliberate: the API does not stop two different allocators from giving the
same device to two claims (controller-semantics.md, pitfall 25), so drakit's scheduler owns
its nodes' devices and kube-scheduler the others' — as an operator running both must
arrange.

Every child process is started by the thread that created the stack (``PR_SET_PDEATHSIG``
fires when the *thread* that forked a child ends): faults that restart a component run on
that thread too (soak.run drives them from its main loop).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.resources import RESOURCE_SLICES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster import stack as demo
from drakit.localcluster.leftovers import RunRecord, sweep
from drakit.localcluster.process import ManagedProcess, StartError
from drakit.localcluster.stack import DRIVER, Component, NodeFolders
from soak.chaosproxy import ChaosProxy
from soak.faultfs import FaultFs, can_mount
from soak.faultfs import sweep_leftovers as sweep_leftover_mounts
from soak.heartbeat import NodeHeartbeat
from soak.realnode import REAL_LABEL_VALUE, REAL_NODE, RealNode

P = TypeVar("P", bound=ManagedProcess)

#: The label that keeps each scheduler's pods on its own nodes.
SCHEDULER_LABEL = "soak.drakit.dev/scheduler"
LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "drakit-controller-soak"
CONTROLLER_REPLICAS = 2
#: Per node: 4 whole GPUs and one partitionable GPU (the whole of it or 4 partitions
#: consuming a shared counter), so claims exercise counters.
BACKEND_CONFIG = {"gpus": 4, "partitionable": {"gpus": 1, "memory": "40Gi", "partitions": 4}}
WAIT = 180.0
#: kube-apiserver's --watch-cache-sizes: no watch cache for claims and slices, so their
#: watches are served by etcd and an etcd compaction reaches them (410 Gone); with the
#: cache, the apiserver serves an old revision from memory and compaction goes unnoticed.
UNCACHED_WATCHES = "resourceclaims.resource.k8s.io#0,resourceslices.resource.k8s.io#0"
#: Size of each plugin data folder's tmpfs: room for the checkpoint and its journal.
DATAFS_BYTES = 8 * 1024 * 1024


def node_names(count: int) -> list[str]:
    return [f"soak-{chr(ord('a') + i)}" for i in range(count)]


def scheduler_of(node: str) -> str:
    """Which scheduler owns ``node``'s devices: ``kube`` for soak-a/b, else ``drakit``."""
    return "kube" if node in ("soak-a", "soak-b") else "drakit"


@dataclass
class Proxied:
    """A component's proxy and the kubeconfig that points at it."""

    proxy: ChaosProxy
    kubeconfig: str


@dataclass
class SoakNode:
    """One simulated node: folders, its harness and its current plugin instance."""

    name: str
    folders: NodeFolders
    harness: Component
    plugin: Component
    plugin_uid: str
    events_path: Path
    instances: int = 1
    #: The small tmpfs under the plugin's data folder (None when not root: no fs faults).
    datafs: FaultFs | None = None
    #: Plugins of a rolling update still running beside ``plugin`` (old instances).
    outgoing: list[Component] = field(default_factory=list)

    @property
    def checkpoint_path(self) -> Path:
        return self.folders.plugins / DRIVER / "checkpoint.json"


class SoakStack:
    """Start with :meth:`start`, stop with :meth:`stop` (idempotent, also after a failure)."""

    def __init__(
        self,
        root: Path,
        node_count: int = 3,
        log: Callable[[str], None] = print,
        *,
        real_node: bool = False,
    ):
        self.root = root
        self.node_count = node_count
        self.log = log
        self.real_node = real_node
        #: The real node, once started (``real_node`` only).
        self.real: RealNode | None = None
        #: Leases for the simulated nodes while node-lifecycle runs (``real_node`` only).
        self.heartbeat: NodeHeartbeat | None = None
        self.cluster: LocalCluster | None = None
        self.client: Any = None
        self.proxies: dict[str, Proxied] = {}
        self.controllers: dict[str, Component] = {}
        self.nodes: dict[str, SoakNode] = {}
        self.harness_binary: Path | None = None
        self.backend_config = root / "backend.yaml"
        self._record = RunRecord(owner_pid=os.getpid(), token=uuid.uuid4().hex[:8])
        self._record.owned_dirs.append(str(root))
        #: Components the supervisor must not restart (a fault holds them down).
        self.held_down: set[str] = set()
        #: Restarts by :meth:`supervise` (after a kill, a crash or a lost Lease).
        self.restarts = 0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        # What a soak killed with SIGKILL left: its tmpfs mounts first (a folder holding a
        # mount point cannot be removed), then its processes and folders.
        sweep_leftover_mounts()
        sweep()
        self.root.mkdir(parents=True, exist_ok=True)
        self._record.save()
        self.backend_config.write_text(yaml.safe_dump(BACKEND_CONFIG))
        self.harness_binary = demo.build_harness(demo.REPO_ROOT)
        if self.real_node:
            self.real = RealNode(self.root / "real", self.log)
            self.real.prepare()
        config = ClusterConfig(
            work_dir=self.root / "cluster",
            extra_apiserver_args=(f"--watch-cache-sizes={UNCACHED_WATCHES}",),
            # A real kubelet needs the apiserver's kubelet client certificate, the
            # ServiceAccount admission (the chart's pods) and node-lifecycle (its taints).
            real_nodes=self.real_node,
        )
        self.cluster = LocalCluster(config)
        self.cluster.start()
        self.client = load_client(self.cluster.kubeconfig, qps=200, burst=400)
        if self.real_node:
            self.heartbeat = NodeHeartbeat(self.client)
            self.heartbeat.start()
        demo.ensure_device_class(self.client)
        self.cluster.start_scheduler(self._proxied("kube-scheduler").kubeconfig)
        self.cluster.start_controller_manager(self._proxied("kube-controller-manager").kubeconfig)
        for i in range(CONTROLLER_REPLICAS):
            self._start_controller(f"controller-{i}")
        demo.wait_until(
            lambda: self.leader() is not None,
            timeout=WAIT,
            what="a drakit controller replica to lead",
            interval=0.2,
            watch=list(self.controllers.values()),
        )
        for name in node_names(self.node_count):
            self._start_node(name)
        if self.real_node:
            self._start_real_node()

    def _start_real_node(self) -> None:
        assert self.cluster is not None
        kubelet = self._proxied(f"{REAL_NODE}/kubelet")
        plugin = self._proxied(f"{REAL_NODE}/plugin")
        assert self.real is not None
        self.real.start(
            admin_kubeconfig=self.cluster.kubeconfig,
            kubelet_kubeconfig=kubelet.kubeconfig,
            plugin_server=f"https://127.0.0.1:{plugin.proxy.port}",
            backend_config=BACKEND_CONFIG,
            labels={SCHEDULER_LABEL: REAL_LABEL_VALUE},
        )
        demo.wait_until(
            lambda: self.node_has_slices(REAL_NODE),
            timeout=WAIT,
            what=f"ResourceSlices of {REAL_NODE} (the chart's plugin DaemonSet)",
            interval=0.5,
        )

    def node_views(self) -> list[tuple[str, Path, Path]]:
        """(node, checkpoint file, CDI folder) of every node's plugin, the real one too."""
        views = [(n.name, n.checkpoint_path, n.folders.cdi) for n in self.nodes.values()]
        if self.real is not None:
            views.append((REAL_NODE, self.real.checkpoint_path, self.real.cdi_dir))
        return views

    def stop(self) -> None:
        """Stop everything this stack started (by PID) and remove its folder."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        try:
            if self.real is not None:
                self.real.stop()  # before the control plane; restores the machine
        finally:
            self._stop_the_rest()

    def _stop_the_rest(self) -> None:
        for node in self.nodes.values():
            for proc in (node.plugin, *node.outgoing, node.harness):
                proc.stop(timeout=5)
            if node.datafs is not None:
                node.datafs.unmount()
        for proc in self.controllers.values():
            proc.stop(timeout=5)
        if self.cluster is not None:
            self.cluster.stop()
        for proxied in self.proxies.values():
            proxied.proxy.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self._record.remove()

    # -- components ----------------------------------------------------------------------

    def _proxied(self, component: str) -> Proxied:
        """A proxy of its own in front of the apiserver, and a kubeconfig pointing at it."""
        assert self.cluster is not None
        port = int(self.cluster.server.rsplit(":", 1)[1])
        proxy = ChaosProxy("127.0.0.1", port)
        proxy.start()
        path = self.root / "kubeconfigs" / f"{component}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.cluster.write_kubeconfig(path, f"https://127.0.0.1:{proxy.port}")
        proxied = Proxied(proxy, str(path))
        self.proxies[component] = proxied
        return proxied

    def _spawn(self, component: P) -> P:
        component.start()
        assert component.pid is not None
        self._record.processes.append((component.pid, str(Path(component.argv[0]).resolve())))
        self._record.save()
        return component

    def _start_controller(self, name: str) -> None:
        proxied = self.proxies.get(name) or self._proxied(name)
        argv = demo.controller_command(
            kubeconfig=proxied.kubeconfig,
            metrics_port=demo.allocate_port(),
            claim_generation="scoped",
        )
        argv += [
            "--leader-elect",
            f"--leader-elect-namespace={LEASE_NAMESPACE}",
            f"--leader-elect-lease-name={LEASE_NAME}",
            f"--identity={name}",
        ]
        self.controllers[name] = self._spawn(
            Component(name, argv, self.root / "logs" / f"{name}.log")
        )

    def _harness(self, name: str, folders: NodeFolders, events: Path) -> Component:
        assert self.cluster is not None and self.harness_binary is not None
        component = f"{name}/harness"
        proxied = self.proxies.get(component) or self._proxied(component)
        argv = demo.harness_command(
            self.harness_binary,
            kubeconfig=proxied.kubeconfig,
            node=name,
            folders=folders,
            feature_gates=self.cluster.feature_gates,
            events=events,
        )
        return Component(component, argv, self.root / "logs" / f"{name}-harness.log")

    def plugin_process(self, node: str, folders: NodeFolders, pod_uid: str) -> Component:
        component = f"{node}/plugin"
        proxied = self.proxies.get(component) or self._proxied(component)
        argv = demo.node_plugin_command(
            kubeconfig=proxied.kubeconfig,
            node=node,
            folders=folders,
            metrics_port=demo.allocate_port(),
            pod_uid=pod_uid,
            backend_config=self.backend_config,
        )
        return Component(
            f"{node}/plugin ({pod_uid})", argv, self.root / "logs" / f"{node}-plugin.log"
        )

    def _start_node(self, name: str) -> None:
        demo.create_ready_node(self.client, name)
        if self.heartbeat is not None:
            self.heartbeat.add(name)
        _label_node(self.client, name, {SCHEDULER_LABEL: scheduler_of(name)})
        folders = NodeFolders(self.root / "n" / name).create()
        # The plugin's data folder (checkpoint, sockets) on a tmpfs of its own, so that a
        # fault can make it full or read-only; as root only (mount).
        datafs = FaultFs(folders.plugins / DRIVER, DATAFS_BYTES).mount() if can_mount() else None
        events = self.root / "logs" / f"{name}-events.jsonl"
        harness = self._spawn(self._harness(name, folders, events))
        demo.wait_until(
            lambda: _event_seen(events, "ready"),
            timeout=WAIT,
            what=f"kubelet harness of {name} ready",
            interval=0.2,
            watch=[harness],
        )
        uid = f"{name}-plugin-1"
        plugin = self._spawn(self.plugin_process(name, folders, uid))
        self.nodes[name] = SoakNode(name, folders, harness, plugin, uid, events, datafs=datafs)
        demo.wait_until(
            lambda: self.node_has_slices(name),
            timeout=WAIT,
            what=f"ResourceSlices of {name}",
            interval=0.2,
            watch=[plugin],
        )

    # -- what faults use ------------------------------------------------------------------

    def node_has_slices(self, node: str) -> bool:
        try:
            found = Resource(self.client, RESOURCE_SLICES).list(
                field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
            )
        except (ApiError, OSError):
            return False
        return bool(found.items)

    def leader(self) -> str | None:
        """The controller replica holding the Lease now (None when unknown or when the
        apiserver does not answer within 3 s: faults must not stall on a paused apiserver)."""
        assert self.cluster is not None
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
        try:
            status, body = self.cluster.request(path, timeout=3.0)
            lease = json.loads(body) if status == 200 else {}
        except (OSError, ValueError):
            return None
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        # The controller adds a random suffix to --identity: "controller-0_1a2b3c4d".
        return next((r for r in self.controllers if holder.partition("_")[0] == r), None)

    def start_rolling_update(self, node: str) -> Component:
        """Start a second plugin instance with a new pod UID; the old one keeps running
        (in ``outgoing``) until the caller kills or stops it."""
        rig = self.nodes[node]
        rig.instances += 1
        uid = f"{node}-plugin-{rig.instances}"
        new = self._spawn(self.plugin_process(node, rig.folders, uid))
        rig.outgoing.append(rig.plugin)
        rig.plugin, rig.plugin_uid = new, uid
        return new

    def all_components(self) -> Iterator[tuple[str, ManagedProcess]]:
        """Every long-running process by component name (for the supervisor and logs)."""
        for proc in self.cluster.processes if self.cluster is not None else ():
            yield proc.name, proc
        yield from self.controllers.items()
        for node in self.nodes.values():
            yield f"{node.name}/harness", node.harness
            yield f"{node.name}/plugin", node.plugin
        if self.real is not None:
            yield from self.real.components()

    def supervise(self) -> list[str]:
        """Restart what exited by itself (as kubelet/systemd would); returns their names.

        Controller replicas exit on lost leadership by design; anything in ``held_down``
        is left alone.
        """
        restarted = []
        for name, proc in list(self.all_components()):
            if name in self.held_down or proc.running():
                continue
            try:
                if self.cluster is not None and proc in self.cluster.processes:
                    self.cluster.restart(proc.name)
                elif self.real is not None and name.startswith(f"{REAL_NODE}/"):
                    self.real.respawn(name)  # recorded by the node, for its restore
                else:
                    self._spawn(proc)
            except StartError as err:
                self.log(f"supervisor: {name} did not come back yet: {err}")
                continue
            restarted.append(name)
        self.restarts += len(restarted)
        for node in self.nodes.values():  # outgoing instances that died are simply gone
            node.outgoing = [p for p in node.outgoing if p.running()]
        return restarted


def _label_node(client: Any, name: str, labels: dict[str, str]) -> None:
    from drakit.kubeapi.resources import NODES  # noqa: PLC0415

    Resource(client, NODES).patch(name, {"metadata": {"labels": labels}})


def _event_seen(path: Path, event: str) -> bool:
    with contextlib.suppress(OSError):
        return f'"event":"{event}"' in path.read_text().replace(" ", "")
    return False
