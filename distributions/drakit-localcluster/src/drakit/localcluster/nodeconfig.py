"""Configuration files of the real local node: containerd, the kubelet and CNI.

Every path the node writes to is inside its work folder where the component
lets us choose (containerd root and state, runc state, CNI IPAM data, the
kubelet root folder, pod logs, CDI specs); ``hoststate.py`` undoes the rest.
Every listener is on loopback or a Unix socket in the work folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

#: IPv4 range for the pod sandboxes that are not on the host network. Their
#: only interface is a carrier-less tap: nothing is ever sent from them.
POD_SUBNET = "198.18.0.0/24"


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its files: all under ``root``, except containerd's sockets.

    Those live in ``run`` (default ``root``), a short folder: a Unix socket path may not
    exceed 104 bytes, and a work folder under a test's temporary path easily does.
    """

    root: Path
    run: Path | None = None

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return (self.run or self.root / "containerd") / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def runc_root(self) -> Path:
        return self.root / "containerd" / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def cdi_root(self) -> Path:
        return self.root / "cdi"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def logs(self) -> Path:
        return self.root / "logs"


def containerd_toml(paths: NodePaths, bin_dir: Path, cni_bin_dir: Path, sandbox_image: str) -> str:
    """containerd 2.x (config version 3) for one test node.

    - ``restrict_oom_score_adj``: these machines lack CAP_SYS_RESOURCE, and
      runc fails to give a container a lower OOM score than containerd's.
    - CDI is always on in containerd 2.x; ``cdi_spec_dirs`` is the plugin's
      CDI root, so devices prepared by drakit reach the containers.
    - Plugins that would write outside the work folder or reach the network
      are disabled.
    """
    q = json.dumps  # TOML basic strings are JSON strings
    return f"""version = 3
root = {q(str(paths.containerd_root))}
state = {q(str(paths.containerd_state))}
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = {q(str(paths.containerd_socket))}

[ttrpc]
  address = {q(str(paths.containerd_socket) + ".ttrpc")}

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {q(sandbox_image)}

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [{q(str(paths.cdi_root))}]
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [{q(str(cni_bin_dir))}]
    conf_dir = {q(str(paths.cni_conf_dir))}
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = {q(str(bin_dir / "runc"))}
        Root = {q(str(paths.runc_root))}
        SystemdCgroup = false
"""


def cni_conflist(paths: NodePaths, pod_subnet: str | None = None) -> str:
    """The node's pod network.

    Without ``pod_subnet`` (one node on the host's network): a carrier-less tap with
    host-local addresses. Pods on the host network need no CNI; the others get a network
    namespace whose only way out is a tap device nobody reads, so nothing they send leaves
    the pod.

    With it (a node in its own network namespace, ``nodegroup.py``): the standard
    ``bridge`` plugin (``cni0``, the node its pods' gateway, no masquerade: every pod
    address is routed between the nodes) with ``host-local`` addresses from the node's
    ``pod_subnet``, and ``portmap`` for hostPorts.
    """
    if pod_subnet is not None:
        return _bridge_conflist(paths, pod_subnet)
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "drakit-test",
            "plugins": [
                {
                    "type": "tap",
                    "mtu": 1500,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "dataDir": str(paths.cni_data_dir),
                    },
                },
            ],
        },
        indent=2,
    )


def _bridge_conflist(paths: NodePaths, pod_subnet: str) -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "drakit-cluster",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    # A pod reaching a Service backed by itself comes back on its own port.
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": pod_subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(paths.cni_data_dir),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


@dataclass(frozen=True)
class KubeletPorts:
    """The kubelet's listeners (all bound to 127.0.0.1)."""

    server: int
    healthz: int


def kubelet_config(
    paths: NodePaths,
    ports: KubeletPorts,
    cgroup_root: str,
    client_ca: Path,
    feature_gates: dict[str, bool],
    *,
    bind_address: str = "127.0.0.1",
) -> str:
    """KubeletConfiguration for a test node on a cgroup v1 host without a registry.

    - ``failCgroupV1: false``: 1.35+ refuses cgroup v1 otherwise.
    - ``cgroupRoot``: the node's pods live under one top-level cgroup that
      teardown removes whole.
    - Image GC never runs: imported images cannot be pulled back.
    - Eviction thresholds at the floor: a busy CI disk must not evict the
      node plugin mid-test.
    - ``makeIPTablesUtilChains: false``: no iptables rules on the host.
    - ``bind_address``: 127.0.0.1 for one node on the host's network; a node in its own
      network namespace listens on its address there, where the apiserver calls it.
    """
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": bind_address,
        "port": ports.server,
        "readOnlyPort": 0,
        "healthzBindAddress": bind_address,
        "healthzPort": ports.healthz,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{cgroup_root}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "mergeDefaultEvictionSettings": False,
        "podLogsDir": str(paths.pod_logs),
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusUpdateFrequency": "2s",
        "nodeStatusReportFrequency": "10s",
        "featureGates": feature_gates,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(
    kubeconfig: Path, node_name: str, node_ip: str, cluster_cidr: str, healthz_port: int
) -> str:
    """KubeProxyConfiguration for a node in its own network namespace (iptables mode).

    Its rules and sysctls are the namespace's own and go with it. It must not touch what
    the host shares: the conntrack table's size and timeouts (zero: left as they are),
    nor route_localnet for NodePorts on localhost.
    """
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "bindAddress": node_ip,
        "healthzBindAddress": f"{node_ip}:{healthz_port}",
        "metricsBindAddress": "127.0.0.1:10249",
        "mode": "iptables",
        "clusterCIDR": cluster_cidr,
        "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
        "nodePortAddresses": [f"{node_ip}/32"],
    }
    return yaml.safe_dump(config, sort_keys=False)


def parse_feature_gates(gates: str) -> dict[str, bool]:
    """``A=true,B=false`` (the components' flag) as the kubelet config's map."""
    result: dict[str, bool] = {}
    for item in filter(None, (g.strip() for g in gates.split(","))):
        name, _, value = item.partition("=")
        result[name] = value.strip().lower() == "true"
    return result
