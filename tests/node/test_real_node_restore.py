"""A real node leaves the machine as it found it, even when its launcher is
killed with SIGKILL while pods run: ``drakit local-node down`` sweeps the
leftovers (processes, mounts, cgroups, sysctls, /etc/hosts, network
namespaces)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import NodeAssets
from node_rig import eventually, run_drakit

from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NAMESPACES, PODS, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.assets import cache_dir
from drakit.localcluster.hoststate import MachineSnapshot, snapshot

pytestmark = pytest.mark.node


def test_down_after_a_sigkilled_launcher_restores_the_machine(
    node_assets: NodeAssets, tmp_path: Path
) -> None:
    cache = str(cache_dir())
    before = snapshot(cache)
    cluster_dir = tmp_path / "cluster"
    config = ClusterConfig(
        work_dir=cluster_dir, with_scheduler=True, with_controller_manager=True, real_nodes=True
    )
    with LocalCluster(config):
        node_dir = tmp_path / "node"
        up = run_drakit(
            "local-node",
            "up",
            str(node_dir),
            "--cluster-dir",
            str(cluster_dir),
            "--node-name",
            "restore-node",
        )
        assert up.returncode == 0, up.stderr
        client = load_client(str(cluster_dir / "kubeconfig"))
        Resource(client, NAMESPACES).create({"metadata": {"name": "restore"}})
        pods = Resource(client, PODS)
        # Not on the host network: a network namespace, a tap device, a cgroup, mounts.
        pod = {
            "metadata": {"name": "sleeper"},
            "spec": {
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "main",
                        "image": "localhost/drakit/busybox:local",
                        "command": ["sleep", "86400"],
                    }
                ],
            },
        }
        eventually(lambda: _created(pods, pod), "the sleeper pod to be admitted")

        def running() -> bool:
            statuses = (pods.get("sleeper", "restore").get("status") or {}).get(
                "containerStatuses"
            ) or []
            return bool(statuses) and "running" in (statuses[0].get("state") or {})

        eventually(running, "the sleeper pod to run")
        during = snapshot(cache)
        assert during.top_cgroups != before.top_cgroups
        assert _node_processes(during) != _node_processes(before)

        client.close()
        launcher = int((node_dir / "launcher.pid").read_text())
        os.kill(launcher, signal.SIGKILL)
        down = run_drakit("local-node", "down", str(node_dir))
        assert down.returncode == 0, down.stderr

    after = snapshot(cache)
    assert _node_processes(after) == _node_processes(before)
    assert after.mounts == before.mounts
    assert after.top_cgroups == before.top_cgroups
    assert after.sysctls == before.sysctls
    assert after.hosts_file == before.hosts_file
    assert after.netns == before.netns
    assert after.host_paths == before.host_paths


def _node_processes(snap: MachineSnapshot) -> set[tuple[int, str]]:
    """The node's own binaries (other tests' control planes may come and go meanwhile)."""
    names = {"kubelet", "containerd", "containerd-shim-runc-v2", "runc", "pause"}
    return {p for p in snap.processes if Path(p[1]).name in names}


def _created(pods: Resource, pod: dict[str, object]) -> bool:
    try:
        pods.create(pod, "restore")
    except Exception:
        return False
    return True
