"""A real Kubernetes node on this machine: containerd, runc and the kubelet.

    with LocalCluster(ClusterConfig(with_scheduler=True, with_controller_manager=True,
                                    real_nodes=True)) as cluster:
        with LocalNode(NodeConfig(kubeconfig=Path(cluster.kubeconfig))) as node:
            node.import_image(Path("drakit.oci.tar"))
            ...

Needs root on Linux. ``start()`` registers the node with the control plane
and returns once it is Ready (kube-controller-manager's node-lifecycle
controller lifts the not-ready taint). ``stop()`` restores the machine as it
was (see ``hoststate.py``): it is idempotent, and a launcher killed with
SIGKILL is cleaned up by the next ``start()`` on this machine.

Network: every listener is on 127.0.0.1 or a Unix socket. The node IP is the
host's own address (the kubelet refuses a loopback one) and nothing connects
to it: the apiserver reaches the kubelet (logs, exec) by the node's hostname,
which a line in /etc/hosts (removed at teardown) resolves to 127.0.0.1. Pods
meant to talk to the apiserver run on the host network.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drakit.localcluster import assets, hoststate
from drakit.localcluster.cluster import DEFAULT_FEATURE_GATES
from drakit.localcluster.hostnet import create_node_mntns, create_node_netns, make_private_mount
from drakit.localcluster.images import PAUSE_IMAGE, busybox_spec, pause_spec, write_oci_archive
from drakit.localcluster.netplan import CLUSTER_CIDR, NodeAddress
from drakit.localcluster.nodeconfig import (
    KubeletPorts,
    NodePaths,
    cni_conflist,
    containerd_toml,
    kube_proxy_config,
    kubelet_config,
    parse_feature_gates,
)
from drakit.localcluster.noderecord import HostPath, NodeRecord, node_cgroup_name
from drakit.localcluster.process import (
    ManagedProcess,
    StartedByWith,
    StartError,
    free_port,
    http_ok,
)

NODE_BINARIES = (
    "kubelet",
    "containerd",
    "ctr",
    "containerd-shim-runc-v2",
    "runc",
    "crictl",
    "pause",
)
CNI_PLUGINS = ("loopback", "tap", "host-local", "bridge", "portmap")
KUBE_PROXY_HEALTHZ_PORT = 10256
K8S_NAMESPACE = "k8s.io"  # containerd namespace of the CRI plugin


class NodeError(StartError):
    """The node could not be started (wrong machine, missing tool, not Ready)."""


@dataclass(frozen=True)
class NodeNetwork:
    """Where a node of a group lives (``nodegroup.py``): its address on the nodes' bridge,
    the other nodes (routes to their pods) and the bridge's name."""

    address: NodeAddress
    others: tuple[NodeAddress, ...]
    bridge: str


@dataclass
class NodeConfig:
    """How to run one local node."""

    #: Admin kubeconfig of the control plane (``LocalCluster.kubeconfig``).
    kubeconfig: Path
    work_dir: Path | None = None
    node_name: str = field(default_factory=lambda: f"drakit-node-{uuid.uuid4().hex[:6]}")
    #: None: the host's first global IPv4 address.
    node_ip: str | None = None
    feature_gates: str = field(
        default_factory=lambda: os.environ.get("DRAKIT_FEATURE_GATES", DEFAULT_FEATURE_GATES)
    )
    start_timeout: float = 120.0
    build_missing: bool = True
    #: Seconds to wait for another real node on this machine to stop (see ``start``).
    machine_lock_timeout: float = 1800.0
    #: The kubelet's Kubernetes version (a supported one, or its minor); None: the default.
    #: It must match the control plane's (a kubelet may not be newer than its apiserver).
    #: containerd, runc, the CNI plugins and crictl do not depend on it.
    kube_version: str | None = None
    #: None: the node runs on the host's network, every listener on 127.0.0.1. Set: it
    #: gets its own network namespace on the nodes' bridge, pods on the CNI bridge plugin
    #: and a kube-proxy.
    network: NodeNetwork | None = None
    #: Take the machine's real-node lock (a group of nodes holds it for all of them).
    take_machine_lock: bool = True
    #: More host paths that are folders of the node's own in its mount namespace (network
    #: only), each bound to ``<work>/folders/<name>`` (a test's per-node ``/dev`` folder).
    own_folders: tuple[str, ...] = ()
    #: The host's sysctls as they were before any node of a group started (each node's
    #: record restores these, not what an earlier node of the group left). None: read now.
    host_sysctls: dict[str, str] | None = None


class LocalNode(StartedByWith):
    """One running (or stoppable) real node."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.name = config.node_name
        self._owns_work_dir = config.work_dir is None
        work = config.work_dir or Path(tempfile.mkdtemp(prefix="drakit-node-"))
        work.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex[:8]
        #: Names what this node made on the host (its cgroup ``drakit-<token>``, run folder).
        self.token = token
        # containerd's sockets need a short path (104 bytes at most): a folder of their own.
        run = Path("/run") / f"drakit-node-{token}"
        self.paths = NodePaths(work.resolve(), run=run)
        self.processes: list[ManagedProcess] = []
        self._envs: dict[str, dict[str, str] | None] = {}  # by process name, for respawn()
        self._record = NodeRecord(
            owner_pid=os.getpid(),
            token=token,
            work_dir=HostPath.of(self.paths.root),
            owns_work_dir=self._owns_work_dir,
            cgroup_name=node_cgroup_name(token),
            containerd_address=str(self.paths.containerd_socket),
        )
        self._api = _AdminAccess(config.kubeconfig, self.paths.root / "admin")
        self.bins: dict[str, Path] = {}
        self._machine_lock: hoststate.MachineLock | None = None
        self._healthz_port = 0  # the kubelet's, set when it starts
        #: The node's network and mount namespaces, bound to files in its run folder
        #: (network only). In its mount namespace the chart's default folders are the node's
        #: own (``node_folders``).
        run = Path("/run") / f"drakit-node-{token}"
        self.netns: Path | None = run / "net" if config.network else None
        self.mntns: Path | None = run / "mnt" if config.network else None

    def enter(self) -> list[str]:
        """The argv prefix that runs a command in the node's namespaces (nothing for a node
        on the host's network). nsenter execs the command: its pid is the command's."""
        if self.netns is None or self.mntns is None:
            return []
        return ["nsenter", f"--net={self.netns}", f"--mount={self.mntns}", "--"]

    @property
    def node_folders(self) -> dict[str, Path]:
        """Where the kubelet and the runtime see the node's own folders (network only):
        the host paths of a real node, bound in its mount namespace to folders of its own."""
        if self.config.network is None:
            return {}
        folders = {"/var/lib/kubelet": self.paths.kubelet_root, "/run/cdi": self.paths.cdi_root}
        for host_path in self.config.own_folders:
            folders[host_path] = self.own_folder(host_path)
        return folders

    def own_folder(self, host_path: str) -> Path:
        """Where the folder the node sees at ``host_path`` (one of ``own_folders``) is on
        the host."""
        return self.paths.root / "folders" / host_path.strip("/").replace("/", "_")

    @property
    def listen_address(self) -> str:
        """Where the kubelet listens: 127.0.0.1, or the node's address in its namespace."""
        network = self.config.network
        return str(network.address.ip) if network else "127.0.0.1"

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's root folder (the chart's ``kubeletDir``)."""
        return self.paths.kubelet_root

    @property
    def cdi_root(self) -> Path:
        """Where containerd reads CDI specs (the chart's ``cdiRoot``)."""
        return self.paths.cdi_root

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start containerd and the kubelet; return once the node is Ready.

        On failure everything is stopped and the machine restored before the
        error propagates.
        """
        check_machine()
        if self.config.take_machine_lock:
            # One launcher of real nodes per machine: the kubelet's device-plugin folder and
            # the shims' socket folder are fixed host paths, and a teardown removes what it
            # made. A group of nodes takes it once for all of them.
            self._machine_lock = hoststate.MachineLock.acquire(self.config.machine_lock_timeout)
            for line in hoststate.sweep_nodes():
                if line.startswith("refused"):
                    print(f"drakit node: {line}", file=sys.stderr)
        self.bins = self._binaries()
        self._record_host_state()
        try:
            self._make_network()
            self._start_containerd()
            self._import_base_images()
            self._start_kubelet()
            self._wait_ready()
            self._start_kube_proxy()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop everything and restore the machine. Idempotent."""
        self._remove_pods()
        for proc in reversed(self.processes):
            proc.stop(timeout=15)
        self.processes.clear()
        hoststate.restore(self._record)
        self._record.remove()
        self._api.close()
        if self._machine_lock is not None:
            self._machine_lock.release()
            self._machine_lock = None

    # -- start-up steps ----------------------------------------------------

    def _binaries(self) -> dict[str, Path]:
        names = [*NODE_BINARIES, *(f"cni/{p}" for p in CNI_PLUGINS)]
        names += ["kube-proxy"] if self.config.network else []
        version = self.config.kube_version
        # hack/build-binaries.sh node links the version-independent tools into an older
        # version's folder, next to its own kubelet.
        if self.config.build_missing and any(assets.find_binary(n, version) is None for n in names):
            assets.build_binaries(("node",), version)
        return {n: assets.require_binary(n, kube_version=version) for n in names}

    def _record_host_state(self) -> None:
        """Write down the host as it is, before anything changes it."""
        rec = self._record
        rec.sysctls = dict(self.config.host_sysctls or hoststate.read_sysctls())
        rec.shim_exe = str(self.bins["containerd-shim-runc-v2"].resolve())
        rec.save()
        hoststate.create_host_paths(rec, hoststate.HARD_CODED_HOST_PATHS)
        # containerd's socket folder: root only.
        hoststate.create_host_paths(rec, (str(self.paths.run),), mode=0o700)
        hoststate.create_cgroup_root(rec.cgroup_name)
        if self.config.network is None:
            # The apiserver calls a node on the host's network by name (logs, exec).
            hoststate.add_hosts_entry(rec, self.name)

    def _make_network(self) -> None:
        network = self.config.network
        if network is None or self.netns is None:
            return
        assert self.mntns is not None
        make_private_mount(self.netns.parent)
        create_node_netns(self._record, network.address, network.bridge, network.others, self.netns)
        for folder in self.node_folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        hoststate.create_host_paths(self._record, tuple(self.node_folders))
        create_node_mntns(self.mntns, self.node_folders)

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> ManagedProcess:
        # nsenter execs the binary: the pid stays, and so does the record's executable.
        proc = ManagedProcess(name, [*self.enter(), *argv], self.paths.logs / f"{name}.log")
        self._envs[name] = env
        self.processes.append(proc)
        self._start_recorded(proc)
        return proc

    def _start_recorded(self, proc: ManagedProcess) -> None:
        """Start ``proc`` and write its pid down first thing (restore() kills it by pid)."""
        proc.start(env=self._envs.get(proc.name))
        assert proc.pid is not None
        binary = proc.argv[len(self.enter())]
        self._record.processes.append((proc.pid, str(Path(binary).resolve())))
        self._record.save()

    def process(self, name: str) -> ManagedProcess:
        """The node's ``containerd`` or ``kubelet`` process (KeyError when not started)."""
        found = next((p for p in self.processes if p.name == name), None)
        if found is None:
            raise KeyError(f"node {self.name} has no process {name!r}")
        return found

    def respawn(self, name: str) -> None:
        """Start the exited ``containerd`` or ``kubelet`` again with the arguments and
        environment it had, without waiting for it (a crash-restart, as systemd does).

        Running containers belong to their shims and survive; the restarted containerd and
        kubelet find them again. Raises NodeError when the process is still running.
        """
        proc = self.process(name)
        if proc.running():
            raise NodeError(f"{name} of node {self.name} is still running")
        self._start_recorded(proc)

    def _start_containerd(self) -> None:
        p = self.paths
        for d in (p.containerd_root, p.containerd_state, p.runc_root, p.cni_conf_dir, p.cdi_root):
            d.mkdir(parents=True, exist_ok=True)
        p.containerd_socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        bin_dir = self.bins["containerd"].parent
        p.containerd_config.write_text(
            containerd_toml(p, bin_dir, self.bins["cni/loopback"].parent, PAUSE_IMAGE)
        )
        network = self.config.network
        subnet = str(network.address.pod_subnet) if network else None
        (p.cni_conf_dir / "10-drakit.conflist").write_text(cni_conflist(p, subnet))
        # containerd finds its shim (and the shim runc) on PATH.
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        proc = self._spawn(
            "containerd", [str(self.bins["containerd"]), "--config", str(p.containerd_config)], env
        )
        proc.wait_ready(self._containerd_ready, self.config.start_timeout)

    def _containerd_ready(self) -> bool:
        if not self.paths.containerd_socket.exists():
            return False
        return self.ctr("version", check=False).returncode == 0

    def ctr(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``ctr`` against this node's containerd (namespace k8s.io)."""
        address = ["--address", str(self.paths.containerd_socket), "-n", K8S_NAMESPACE]
        return self._tool("ctr", address, args, check, timeout)

    def crictl(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run ``crictl`` against this node's containerd."""
        endpoint = f"unix://{self.paths.containerd_socket}"
        address = ["--runtime-endpoint", endpoint, "--image-endpoint", endpoint]
        return self._tool("crictl", address, args, check, timeout)

    def _tool(
        self, name: str, address: list[str], args: tuple[str, ...], check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bins[name]), *address, *args]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
        if check and proc.returncode != 0:
            raise NodeError(f"{name} {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def import_image(self, archive: Path, base_name: str | None = None) -> None:
        """Import an OCI or Docker archive into the node's containerd (idempotent).

        ``base_name`` (``localhost/drakit``) keeps the full image names an OCI
        archive carries in its ``ref.name`` annotations (buildah's do).
        """
        args = ["images", "import"]
        if base_name:
            args += ["--base-name", base_name]
        self.ctr(*args, str(archive), timeout=600)

    def tag_image(self, source: str, target: str) -> None:
        """Give an imported image another name (``ctr images tag --force``)."""
        self.ctr("images", "tag", "--force", source, target)

    def _import_base_images(self) -> None:
        self.paths.images.mkdir(parents=True, exist_ok=True)
        for spec in (busybox_spec(), pause_spec(self.bins["pause"])):
            archive = self.paths.images / (spec.name.rsplit("/", 1)[-1].replace(":", "-") + ".tar")
            write_oci_archive(spec, archive)
            self.import_image(archive)
        # The sandbox image is pinned so image GC would never touch it.
        self.ctr("images", "label", PAUSE_IMAGE, "io.cri-containerd.pinned=pinned")

    def _start_kubelet(self) -> None:
        p = self.paths
        p.kubelet_root.mkdir(parents=True, exist_ok=True)
        ports = KubeletPorts(server=free_port(), healthz=free_port())
        self._healthz_port = ports.healthz
        p.kubelet_config.write_text(
            kubelet_config(
                p,
                ports,
                self._record.cgroup_name,
                self._api.ca_file,
                parse_feature_gates(self.config.feature_gates),
                bind_address=self.listen_address,
            )
        )
        network = self.config.network
        node_ip = str(network.address.ip) if network else (self.config.node_ip or host_ipv4())
        # In its own mount namespace the node's kubelet folder is /var/lib/kubelet, where a
        # real node has it: short enough for the sockets the kubelet makes in it (108 bytes).
        root = Path("/var/lib/kubelet") if network else p.kubelet_root
        proc = self._spawn(
            "kubelet",
            [
                str(self.bins["kubelet"]),
                f"--config={p.kubelet_config}",
                f"--kubeconfig={self.config.kubeconfig}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={node_ip}",
                "--v=2",
            ],
        )
        proc.wait_ready(self._kubelet_healthy, self.config.start_timeout)

    def _kubelet_healthy(self) -> bool:
        return http_ok(f"http://{self.listen_address}:{self._healthz_port}/healthz")

    def _start_kube_proxy(self) -> None:
        """kube-proxy in the node's namespace (network only): ClusterIPs for its pods, its
        host-network pods and, through the host's route, the host."""
        network = self.config.network
        if network is None:
            return
        config = self.paths.root / "kube-proxy.yaml"
        config.write_text(
            kube_proxy_config(
                self.config.kubeconfig,
                self.name,
                str(network.address.ip),
                str(CLUSTER_CIDR),
                KUBE_PROXY_HEALTHZ_PORT,
            )
        )
        url = f"http://{network.address.ip}:{KUBE_PROXY_HEALTHZ_PORT}/healthz"
        proc = self._spawn("kube-proxy", [str(self.bins["kube-proxy"]), f"--config={config}"])
        proc.wait_ready(lambda: http_ok(url), self.config.start_timeout)

    def restart_kubelet(self) -> None:
        """Stop the kubelet (SIGTERM) and start it again with the same arguments.

        Running containers are untouched: they belong to containerd.
        """
        kubelet = next(p for p in self.processes if p.name == "kubelet")
        kubelet.stop(timeout=15)
        self.processes.remove(kubelet)
        argv = kubelet.argv[len(self.enter()) :]
        self._spawn("kubelet", argv).wait_ready(self._kubelet_healthy, self.config.start_timeout)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout
        while time.monotonic() < deadline:
            node = self.get_node()
            if node and _is_ready(node) and not _has_not_ready_taint(node):
                return
            for proc in self.processes:
                if not proc.running():
                    raise NodeError(f"{proc.name} exited; last log lines:\n{proc.log_tail()}")
            time.sleep(0.2)
        raise NodeError(
            f"node {self.name} did not become Ready (and untainted) within "
            f"{self.config.start_timeout:.0f}s; is kube-controller-manager running with the "
            f"node-lifecycle controller? kubelet log: {self.paths.logs / 'kubelet.log'}"
        )

    def get_node(self) -> dict[str, Any] | None:
        """The Node object, or None while it is not registered."""
        status, body = self._api.request(f"/api/v1/nodes/{self.name}")
        return json.loads(body) if status == 200 else None

    # -- teardown ----------------------------------------------------------

    def _remove_pods(self) -> None:
        """Stop and remove every pod sandbox while the runtime still runs.

        The kubelet goes first so it does not start them again; containerd
        then unmounts root filesystems and network namespaces itself, which
        leaves less for ``hoststate.restore`` to force.
        """
        kubelet = next((p for p in self.processes if p.name == "kubelet"), None)
        containerd = next((p for p in self.processes if p.name == "containerd"), None)
        if kubelet is not None:
            kubelet.stop(timeout=15)
        if containerd is not None and containerd.running():
            self.crictl("rmp", "--all", "--force", check=False, timeout=60)

    def pod_log(self, namespace: str, pod: str, container: str) -> str:
        """A container's output, read from the kubelet's pod log folder (no apiserver hop)."""
        out = []
        for folder in sorted(self.paths.pod_logs.glob(f"{namespace}_{pod}_*")):
            for f in sorted((folder / container).glob("*.log")):
                out.append(_cri_log_text(f.read_text(errors="replace")))
        return "".join(out)


def _cri_log_text(raw: str) -> str:
    """The messages of a CRI log file (``<time> <stream> <P|F> <message>`` lines)."""
    parts = []
    for line in raw.splitlines():
        fields = line.split(" ", 3)
        if len(fields) == 4:
            parts.append(fields[3] + ("\n" if fields[2] == "F" else ""))
    return "".join(parts)


def check_machine() -> None:
    if os.geteuid() != 0:
        raise NodeError(
            "a real node needs root (kubelet, containerd and runc manage cgroups and mounts)"
        )
    if not Path("/proc/self/mountinfo").exists() or not hoststate.cgroup_hierarchies():
        raise NodeError("a real node needs Linux with cgroups mounted under /sys/fs/cgroup")


def host_ipv4() -> str:
    """The host's first global-scope IPv4 address (the kubelet refuses loopback)."""
    out = subprocess.run(
        ["ip", "-j", "-4", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for link in json.loads(out or "[]"):
        for addr in link.get("addr_info", []):
            if addr.get("local"):
                return str(addr["local"])
    raise NodeError(
        "the host has no global IPv4 address to use as the node IP (the kubelet refuses 127.0.0.1)"
    )


def _is_ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def _has_not_ready_taint(node: dict[str, Any]) -> bool:
    return any(
        t.get("key") in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        for t in node.get("spec", {}).get("taints", []) or []
    )


class _AdminAccess:
    """Admin requests to the apiserver named by a kubeconfig with embedded credentials."""

    def __init__(self, kubeconfig: Path, folder: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server: str = cluster["server"]
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.ca_file = folder / "ca.crt"
        self.ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        cert, key = folder / "admin.crt", folder / "admin.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.touch(mode=0o600)
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self._ctx = ssl.create_default_context(cafile=str(self.ca_file))
        self._ctx.load_cert_chain(str(cert), str(key))
        self._folder = folder

    def request(self, path: str) -> tuple[int, bytes]:
        req = urllib.request.Request(self.server + path)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=30) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as err:
            return int(err.code), bytes(err.read())
        except urllib.error.URLError:
            return 0, b""

    def close(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
