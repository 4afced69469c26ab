"""Three real nodes on one machine (``drakit local-node up DIR --nodes 3``): a pod on node 1
reaches a ClusterIP Service backed by a pod on node 3, and so does the host; a launcher
killed with SIGKILL is swept by ``down``, which leaves the machine as it found it, its
network included (links, routes, netfilter rules, forwarding and bridge sysctls)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import NodeAssets
from node_rig import eventually, run_drakit

from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NAMESPACES, PODS, Resource, ResourceType
from drakit.localcluster.assets import cache_dir
from drakit.localcluster.hoststate import MachineSnapshot, snapshot
from drakit.localcluster.netplan import node_address

pytestmark = pytest.mark.node

BUSYBOX = "localhost/drakit/busybox:local"
SERVICES = ResourceType("", "v1", "services", "Service", namespaced=True)
NAMESPACE = "net"


def _pod(name: str, node: str, script: str, labels: dict[str, str] | None = None) -> Any:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", script]},
            ],
        },
    }


def test_a_pod_on_node_1_reaches_a_service_on_node_3_and_down_restores_the_machine(
    node_assets: NodeAssets, tmp_path: Path
) -> None:
    cache = str(cache_dir())
    before = snapshot(cache)
    folder = tmp_path / "cluster"
    up = run_drakit("local-node", "up", str(folder), "--nodes", "3")
    try:
        assert up.returncode == 0, up.stderr
        assert "drakit-node-1, drakit-node-2, drakit-node-3 are Ready" in up.stdout
        client = load_client(str(folder / "cluster" / "kubeconfig"))
        try:
            service_ip = _serve_on_node_3(client)
            _fetch_from_node_1(client, service_ip)
            answer = _pod_output(folder / "node-1", "client", "main")
        finally:
            client.close()
        assert "served-by-node-3" in answer
        # The host reaches ClusterIPs too (a route through the nodes, whose kube-proxy
        # masquerades what comes from outside the cluster).
        host = _http_get(service_ip)
        assert "served-by-node-3" in host
        during = snapshot(cache)
        assert during.links != before.links  # the bridge and the veths exist
        assert during.routes != before.routes
    finally:
        pid_file = folder / "launcher.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # a killed run, swept by down
        down = run_drakit("local-node", "down", str(folder))
    assert down.returncode == 0, down.stderr
    _assert_restored(before, snapshot(cache))


def _serve_on_node_3(client: Any) -> str:
    Resource(client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    pods = Resource(client, PODS)
    script = (
        "mkdir /www && echo served-by-node-3 > /www/index.html && exec httpd -f -p 8080 -h /www"
    )
    eventually(
        lambda: _created(pods, _pod("server", "drakit-node-3", script, {"app": "server"})),
        "the server pod to be admitted (its namespace's service account)",
    )
    service = Resource(client, SERVICES).create(
        {
            "metadata": {"name": "server"},
            "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
        NAMESPACE,
    )
    ip = eventually(lambda: _running_ip(pods, "server"), "the server pod to run")
    assert ip.startswith(str(node_address(3).pod_subnet.network_address)[:-1])
    return str(service["spec"]["clusterIP"])


def _fetch_from_node_1(client: Any, service_ip: str) -> None:
    pods = Resource(client, PODS)
    # kube-proxy syncs a new Service within seconds: the client retries until it answers.
    script = (
        "for i in $(seq 60); do "
        f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {service_ip} 80 > /tmp/out 2>/dev/null; "
        "grep -q served /tmp/out && cat /tmp/out && exit 0; sleep 1; done; exit 1"
    )
    eventually(lambda: _created(pods, _pod("client", "drakit-node-1", script)), "client pod")

    def finished() -> str | None:
        phase = (pods.get("client", NAMESPACE).get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    assert eventually(finished, "the client pod to finish") == "Succeeded"
    client_ip = pods.get("client", NAMESPACE)["status"]["podIP"]
    assert client_ip.startswith(str(node_address(1).pod_subnet.network_address)[:-1])


def _pod_output(node_dir: Path, pod: str, container: str) -> str:
    """What the container printed, from its node's pod log folder (CRI log lines)."""
    lines = []
    for log in sorted(node_dir.glob(f"pod-logs/{NAMESPACE}_{pod}_*/{container}/*.log")):
        lines += [line.split(" ", 3)[-1] for line in log.read_text().splitlines()]
    return "\n".join(lines)


def _http_get(ip: str) -> str:
    request = b"GET / HTTP/1.0\r\n\r\n"
    with socket.create_connection((ip, 80), timeout=5) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _running_ip(pods: Resource, name: str) -> str | None:
    status = pods.get(name, NAMESPACE).get("status") or {}
    return status.get("podIP") if status.get("phase") == "Running" else None


def _created(pods: Resource, pod: dict[str, Any]) -> bool:
    try:
        pods.create(pod, NAMESPACE)
    except Exception:
        return False
    return True


def _assert_restored(before: MachineSnapshot, after: MachineSnapshot) -> None:
    names = {"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "runc", "pause"}
    node_procs = [p for p in after.processes if Path(p[1]).name in names]
    assert node_procs == [p for p in before.processes if Path(p[1]).name in names]
    assert after.mounts == before.mounts
    assert after.top_cgroups == before.top_cgroups
    assert after.sysctls == before.sysctls
    assert after.net_sysctls == before.net_sysctls
    assert after.links == before.links
    assert after.routes == before.routes
    assert after.netfilter == before.netfilter
    assert after.netns == before.netns
    assert after.host_paths == before.host_paths
    assert after.hosts_file == before.hosts_file
