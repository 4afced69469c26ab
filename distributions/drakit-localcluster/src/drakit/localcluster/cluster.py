"""The local control plane: etcd and kube-apiserver on loopback, optionally
kube-scheduler and kube-controller-manager, all with one feature-gate string.

    with LocalCluster(ClusterConfig(with_scheduler=True)) as cluster:
        client = cluster.api_client()

Start-up is complete when ``/readyz`` answers ok and the ``default``
namespace exists. Ports are chosen at random; a port taken between choosing
and binding is detected and the start retried with new ports. ``stop()``
leaves nothing behind: processes are killed as process groups and the work
folder is removed unless the caller supplied it.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drakit.localcluster import assets
from drakit.localcluster.certs import CertPaths, write_certificates
from drakit.localcluster.kubeversions import (
    check_feature_gates,
    default_feature_gates,
    resolve_version,
)
from drakit.localcluster.leftovers import RunRecord, sweep
from drakit.localcluster.netplan import HOST_ADDRESS, KUBERNETES_SERVICE_IP, SERVICE_NETWORK
from drakit.localcluster.process import (
    ManagedProcess,
    PortInUseError,
    StartedByWith,
    StartError,
    free_port,
    http_ok,
)

#: Alpha DRA gates drakit's allocator and publisher exercise; beta and GA gates
#: are on by default in 1.37. Every component gets this same string.
DEFAULT_FEATURE_GATES = "DRAListTypeAttributes=true"
RUNTIME_CONFIG = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
#: One --runtime-config entry: ``GROUP/VERSION=true|false`` (``api/all``, ``api/beta``, ...
#: included), or a core ``v1``-style ``VERSION=true|false``.
_RUNTIME_CONFIG_ITEM = re.compile(r"^[a-z0-9.-]+(/[a-z0-9.-]+)?=(true|false)$")
PORT_ATTEMPTS = 5
#: Names the apiserver's certificate is valid for: loopback (every client on this host),
#: the ``kubernetes`` Service (pods with in-cluster credentials) and the host's address on
#: the nodes' bridge (kubelets and kube-proxies of nodes in their own network namespaces,
#: ``nodegroup.py``).
SERVING_NAMES = (
    "127.0.0.1",
    "localhost",
    str(KUBERNETES_SERVICE_IP),
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    str(HOST_ADDRESS),
)


@dataclass
class ClusterConfig:
    """How to run the local control plane."""

    #: Folder for data, certificates, logs and the kubeconfig. None: a fresh
    #: temporary folder that stop() removes.
    work_dir: Path | None = None
    with_scheduler: bool = False
    with_controller_manager: bool = False
    #: kube-controller-manager's --controllers value. The node-lifecycle
    #: controller is off: the fake nodes in tests have no kubelet to renew
    #: their leases and would be tainted and evicted after 40 s.
    controllers: str = "*,-node-lifecycle-controller"
    #: The Kubernetes version to run (one of drakit.version.SUPPORTED_KUBERNETES_VERSIONS,
    #: or its minor such as ``v1.36``); None: the default, KUBERNETES_VERSION. Each
    #: version's binaries live in their own cache folder. Default: $DRAKIT_KUBE_VERSION.
    kube_version: str | None = field(
        default_factory=lambda: os.environ.get("DRAKIT_KUBE_VERSION") or None
    )
    #: Feature gates for every component. None: $DRAKIT_FEATURE_GATES, else the gates
    #: chosen for the version (kubeversions.default_feature_gates).
    feature_gates: str | None = field(
        default_factory=lambda: os.environ.get("DRAKIT_FEATURE_GATES")
    )
    start_timeout: float = float(
        os.environ.get("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "90").rstrip("s")
    )
    extra_apiserver_args: tuple[str, ...] = ()
    #: More kube-apiserver --runtime-config entries (``scheduling.k8s.io/v1beta1=true,...``),
    #: added to RUNTIME_CONFIG's; a later entry for the same API wins.
    runtime_config: str = ""
    #: Serve real kubelets (``node.py``): pods get ServiceAccount tokens (the
    #: ServiceAccount admission plugin is on), kube-controller-manager runs
    #: every controller including node-lifecycle (it lifts the not-ready
    #: taint of a new node), and the apiserver authenticates to kubelets with
    #: the admin certificate (for logs and exec).
    real_nodes: bool = False
    #: Build missing binaries with hack/build-binaries.sh (needs Go).
    build_missing: bool = True
    #: The apiserver's address. 127.0.0.1: one node on the host's network. The host's
    #: address on the nodes' bridge (``nodegroup.py``): nodes in their own network
    #: namespaces reach it, the ``kubernetes`` Service points at it, and webhooks and
    #: kubelets are called at their pods' and nodes' own addresses.
    bind_address: str = "127.0.0.1"


class LocalCluster(StartedByWith):
    """A running (or stoppable) local Kubernetes control plane."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        self._owns_work_dir = self.config.work_dir is None
        self.work_dir = self.config.work_dir or Path(tempfile.mkdtemp(prefix="drakit-cluster-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir = self.work_dir.resolve()
        self.kubeconfig = str(self.work_dir / "kubeconfig")
        self.kube_version = resolve_version(self.config.kube_version)
        gates = self.config.feature_gates
        self.feature_gates = default_feature_gates(self.kube_version) if gates is None else gates
        check_feature_gates(self.feature_gates, self.kube_version)
        self.runtime_config = runtime_config_value(self.config.runtime_config)
        self.server = ""
        self.etcd_url = ""
        self.certs: CertPaths | None = None
        self._ssl: ssl.SSLContext | None = None
        self.processes: list[ManagedProcess] = []
        #: How to tell that each component (by process name) is ready; restart() reuses it.
        self._readiness: dict[str, Callable[[], bool]] = {}
        self._record = RunRecord(owner_pid=os.getpid(), token=uuid.uuid4().hex[:8])
        if self._owns_work_dir:
            self._record.owned_dirs.append(str(self.work_dir))

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Start every component and wait until the API is usable.

        On failure everything already started is stopped before the error
        (StartError or assets.MissingBinaryError) propagates.
        """
        sweep()
        self._record.save()
        try:
            self._start_components()
        except BaseException:
            self.stop()
            raise

    def _start_components(self) -> None:
        bins = self._binaries()
        self.certs = write_certificates(self.work_dir / "certs", SERVING_NAMES)
        self._ssl = None  # new certificates: the next request builds a new context
        self._with_port_retries(lambda: self._start_etcd(bins["etcd"]))
        self._with_port_retries(lambda: self._start_apiserver(bins["kube-apiserver"]))
        self._write_kubeconfig()
        self._wait_for_default_namespace()
        if self.config.with_scheduler:
            self._start_scheduler(bins["kube-scheduler"], self.kubeconfig)
        if self.config.with_controller_manager:
            self._start_controller_manager(bins["kube-controller-manager"], self.kubeconfig)

    def start_scheduler(self, kubeconfig: str | None = None) -> None:
        """Start kube-scheduler now (the cluster was started without it).

        ``kubeconfig`` lets it reach the apiserver another way, for example
        through a proxy (:meth:`write_kubeconfig`); default: the admin kubeconfig.
        """
        self._start_scheduler(self._binary("kube-scheduler"), kubeconfig or self.kubeconfig)

    def start_controller_manager(self, kubeconfig: str | None = None) -> None:
        """Start kube-controller-manager now; ``kubeconfig`` as for :meth:`start_scheduler`."""
        binary = self._binary("kube-controller-manager")
        self._start_controller_manager(binary, kubeconfig or self.kubeconfig)

    def component(self, name: str) -> ManagedProcess:
        """The running process called ``name`` (etcd, kube-apiserver, kube-scheduler, ...).

        Raises KeyError naming the components there are when none has that name.
        """
        for proc in self.processes:
            if proc.name == name:
                return proc
        names = ", ".join(p.name for p in self.processes)
        raise KeyError(f"no component {name!r} in this cluster (there are: {names})")

    def restart(self, name: str, *, kill: bool = True) -> None:
        """Stop one component (SIGKILL when ``kill``, else SIGTERM) and start it again
        with the same command line: same ports, certificates and etcd data folder.

        Returns once it is ready again; raises StartError (with its log tail) when it
        does not become ready within the start timeout.
        """
        proc = self.component(name)
        if kill:
            proc.kill()
        else:
            proc.stop()
        proc.start()
        assert proc.pid is not None
        self._record.processes.append((proc.pid, str(Path(proc.argv[0]).resolve())))
        self._record.save()
        proc.wait_ready(self._readiness[name], self.config.start_timeout)

    def stop(self) -> None:
        """Stop every process and remove what this cluster owns. Idempotent."""
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        if self._owns_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self._record.remove()

    # -- components --------------------------------------------------------

    def _binary(self, name: str) -> Path:
        """``name`` of this cluster's version, built alone when missing (each control-plane
        binary is its own hack/build-binaries.sh target)."""
        version = self.kube_version
        if self.config.build_missing and assets.find_binary(name, version) is None:
            assets.build_binaries((name,), version)
        return assets.require_binary(name, kube_version=version)

    def _binaries(self) -> dict[str, Path]:
        names = ["etcd", "kube-apiserver"]
        if self.config.with_scheduler:
            names.append("kube-scheduler")
        if self.config.with_controller_manager:
            names.append("kube-controller-manager")
        version = self.kube_version
        # Only the missing ones: a cold build of a binary this cluster does not start (the
        # controller-manager for an apiserver-only test) costs minutes.
        missing = tuple(n for n in names if assets.find_binary(n, version) is None)
        if self.config.build_missing and missing:
            assets.build_binaries(missing, version)
        return {n: assets.require_binary(n, kube_version=version) for n in names}

    def _with_port_retries(self, start: Callable[[], None]) -> None:
        for attempt in range(PORT_ATTEMPTS):
            try:
                start()
                return
            except PortInUseError:
                if attempt == PORT_ATTEMPTS - 1:
                    raise
                self.processes.pop().stop()

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.work_dir / "logs" / f"{name}.log")
        proc.start()
        self.processes.append(proc)
        assert proc.pid is not None
        self._record.processes.append((proc.pid, str(Path(argv[0]).resolve())))
        self._record.save()
        return proc

    def _start_etcd(self, binary: Path) -> None:
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        data_dir = self.work_dir / "etcd"
        shutil.rmtree(data_dir, ignore_errors=True)  # a retry must not reuse a half-made member
        proc = self._spawn(
            "etcd",
            [
                str(binary),
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",  # test data: durability does not matter, speed does
                "--log-level=warn",
            ],
        )
        self._readiness["etcd"] = lambda: http_ok(f"{self.etcd_url}/health")
        proc.wait_ready(self._readiness["etcd"], self.config.start_timeout)

    def _start_apiserver(self, binary: Path) -> None:
        assert self.certs is not None
        port = free_port()
        bind = self.config.bind_address
        self.server = f"https://{bind}:{port}"
        c = self.certs
        proc = self._spawn(
            "kube-apiserver",
            [
                str(binary),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={bind}",
                f"--advertise-address={bind}",
                f"--secure-port={port}",
                f"--cert-dir={self.work_dir / 'certs'}",
                f"--tls-cert-file={c.serving_cert}",
                f"--tls-private-key-file={c.serving_key}",
                f"--client-ca-file={c.ca_cert}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.server}",
                f"--service-account-key-file={c.sa_pub}",
                f"--service-account-signing-key-file={c.sa_key}",
                f"--service-cluster-ip-range={SERVICE_NETWORK}",
                "--allow-privileged=true",
                *self._service_account_args(),
                *self._network_args(),
                f"--runtime-config={self.runtime_config}",
                f"--feature-gates={self.feature_gates}",
                "--profiling=false",
                *self.config.extra_apiserver_args,
            ],
        )
        self._readiness["kube-apiserver"] = self._readyz
        proc.wait_ready(self._readyz, self.config.start_timeout)

    def _network_args(self) -> list[str]:
        """How the apiserver finds what it calls, by where it listens."""
        if ipaddress.ip_address(self.config.bind_address).is_loopback:
            # The `kubernetes` Service cannot point at a loopback address.
            return ["--endpoint-reconciler-type=none"]
        return [
            "--endpoint-reconciler-type=lease",
            # Webhooks and aggregated APIs are called at their endpoints' pod IPs, which
            # the host routes to the nodes, not at their ClusterIPs.
            "--enable-aggregator-routing=true",
            # Each kubelet listens on its node's own address (logs, exec, port-forward).
            "--kubelet-preferred-address-types=InternalIP",
        ]

    def _service_account_args(self) -> list[str]:
        assert self.certs is not None
        if self.config.real_nodes:
            return [
                f"--kubelet-client-certificate={self.certs.admin_cert}",
                f"--kubelet-client-key={self.certs.admin_key}",
            ]
        # Without kube-controller-manager nothing creates the `default` service
        # account in test namespaces; pods must not need one.
        return ["--disable-admission-plugins=ServiceAccount"]

    def _controllers(self) -> str:
        """--controllers; real kubelets renew their leases, so node-lifecycle may run."""
        items = self.config.controllers.split(",")
        if self.config.real_nodes:
            items = [c for c in items if c != "-node-lifecycle-controller"]
        return ",".join(items)

    def _component_args(self, kubeconfig: str, *, leader_elect: bool = False) -> list[str]:
        """Flags both controllers take. kube-controller-manager elects a leader as in a real
        cluster: a scoped drakit reads its Lease to tell whether it is generating claims
        (controller.handover). kube-scheduler does not: a restart would wait for its
        predecessor's Lease to expire, and nothing reads it."""
        return [
            f"--kubeconfig={kubeconfig}",
            f"--leader-elect={str(leader_elect).lower()}",
            f"--feature-gates={self.feature_gates}",
        ]

    def _start_scheduler(self, binary: Path, kubeconfig: str) -> None:
        port = free_port()
        proc = self._spawn(
            "kube-scheduler",
            [
                str(binary),
                *self._component_args(kubeconfig),
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
            ],
        )
        self._readiness[proc.name] = _healthz(port)
        proc.wait_ready(self._readiness[proc.name], self.config.start_timeout)

    def _start_controller_manager(self, binary: Path, kubeconfig: str) -> None:
        assert self.certs is not None
        port = free_port()
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                *self._component_args(kubeconfig, leader_elect=True),
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--controllers={self._controllers()}",
                f"--service-account-private-key-file={self.certs.sa_key}",
                f"--root-ca-file={self.certs.ca_cert}",
                "--use-service-account-credentials=false",
            ],
        )
        self._readiness[proc.name] = _healthz(port)
        proc.wait_ready(self._readiness[proc.name], self.config.start_timeout)

    # -- API access ----------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        # Built once: the readiness poll calls request() every 100 ms, and each context
        # would otherwise read and parse the CA and the admin key pair again.
        if self._ssl is None:
            assert self.certs is not None
            ctx = ssl.create_default_context(cafile=str(self.certs.ca_cert))
            ctx.load_cert_chain(str(self.certs.admin_cert), str(self.certs.admin_key))
            self._ssl = ctx
        return self._ssl

    def request(
        self, path: str, method: str = "GET", body: Any = None, timeout: float = 30.0
    ) -> tuple[int, bytes]:
        """One authenticated (admin) request to the apiserver; returns (status, body).

        Raises OSError when the apiserver does not answer within ``timeout`` seconds.
        """
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self._ssl_context(), timeout=timeout) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as err:
            return int(err.code), bytes(err.read())

    def _readyz(self) -> bool:
        status, _ = self.request("/readyz")
        return status == 200

    def _wait_for_default_namespace(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout
        while time.monotonic() < deadline:
            status, _ = self.request("/api/v1/namespaces/default")
            if status == 200:
                return
            time.sleep(0.1)
        raise StartError("kube-apiserver is ready but the default namespace never appeared")

    def _write_kubeconfig(self) -> None:
        self.write_kubeconfig(Path(self.kubeconfig), self.server)

    def write_kubeconfig(self, path: Path, server: str) -> None:
        """Write an admin kubeconfig for ``server`` (for example a proxy in front of the
        apiserver: its address must be 127.0.0.1, the serving certificate's name)."""
        assert self.certs is not None

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "drakit-local",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": b64(self.certs.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": b64(self.certs.admin_cert),
                        "client-key-data": b64(self.certs.admin_key),
                    },
                }
            ],
            "contexts": [
                {"name": "drakit-local", "context": {"cluster": "drakit-local", "user": "admin"}}
            ],
            "current-context": "drakit-local",
        }
        tmp = path.with_suffix(".tmp")
        # JSON (every kubeconfig reader takes it: it is YAML) so that a drakit program
        # started with it does not need PyYAML (kubeapi.documents).
        tmp.write_text(json.dumps(config, indent=2) + "\n")
        tmp.chmod(0o600)
        tmp.replace(path)

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient for the admin user of this cluster."""
        from drakit.kubeapi.client import plain_client  # noqa: PLC0415 - heavy; only when asked

        return plain_client(self.kubeconfig)

    def apiserver_metrics(self) -> str:
        """The apiserver's Prometheus metrics (for counting requests server-side)."""
        status, body = self.request("/metrics")
        if status != 200:
            raise RuntimeError(f"GET /metrics: HTTP {status}")
        return body.decode()


def runtime_config_value(extra: str) -> str:
    """kube-apiserver's --runtime-config: RUNTIME_CONFIG followed by the ``extra`` entries.

    Raises ValueError naming the entry and the expected form when one is malformed
    (the apiserver would otherwise exit with a flag error in its log).
    """
    items = [part.strip() for part in extra.split(",") if part.strip()]
    for item in items:
        if not _RUNTIME_CONFIG_ITEM.match(item):
            raise ValueError(
                f"runtime-config entry {item!r} is not GROUP/VERSION=true|false "
                f"(for example scheduling.k8s.io/v1beta1=true)"
            )
    return ",".join([RUNTIME_CONFIG, *items])


def _healthz(port: int) -> Callable[[], bool]:
    """Readiness of a component serving /healthz with a self-signed certificate."""
    return lambda: http_ok(f"https://127.0.0.1:{port}/healthz", insecure=True)
