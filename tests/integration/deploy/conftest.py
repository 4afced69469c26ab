"""Fixtures for the deployment tests: helm built from its pinned Go module, and the
chart installed for real onto the session's control plane."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_support import CHART, ROOT, Helm, set_args
from kubernetes import client

from drakit.localcluster import LocalCluster


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm v3 from hack/tools/helm, built once (or reused) by hack/build-binaries.sh."""
    proc = subprocess.run(
        [str(ROOT / "hack" / "build-binaries.sh"), "helm"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"hack/build-binaries.sh helm failed:\n{proc.stderr}")
    binary = Path(proc.stdout.strip().splitlines()[-1]) / "helm"
    return Helm(binary=binary, home=tmp_path_factory.mktemp("helm-home"))


@dataclass(frozen=True)
class Installed:
    """A release of the chart installed for real, with two Nodes and a pod on each."""

    release: str
    namespace: str
    driver: str
    node_a: str
    node_b: str
    node_plugin_sa: str
    controller_sa: str
    pod_a: dict[str, Any]
    pod_b: dict[str, Any]


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _pod_on(node: str, service_account: str) -> dict[str, Any]:
    # Stands in for the node plugin pod the DaemonSet would run on `node`:
    # what matters is spec.nodeName and the service account its token is for.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"plugin-{node}"},
        "spec": {
            "nodeName": node,
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "containers": [{"name": "plugin", "image": "drakit:test"}],
        },
    }


def _install(
    helm: Helm, cluster: LocalCluster, release: str, namespace: str, values: dict[str, str]
) -> None:
    helm.run(
        "install",
        release,
        str(CHART),
        "--kubeconfig",
        cluster.kubeconfig,
        "--namespace",
        namespace,
        *set_args(values),
    )


@pytest.fixture(scope="session")
def installed(helm: Helm, cluster: LocalCluster) -> Iterator[Installed]:
    """``helm install`` of the chart into a fresh namespace; uninstalled at the end.

    Names carry a random suffix, so the cluster-scoped objects (ClusterRoles,
    the admission policy, the DeviceClass, the Nodes) never meet those of
    other tests in the same session.
    """
    suffix = uuid.uuid4().hex[:8]
    release, namespace, driver = f"dk-{suffix}", f"drakit-{suffix}", f"gpu-{suffix}.drakit.test"
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    _install(helm, cluster, release, namespace, {"driverName": driver})
    plugin_sa, controller_sa = f"{release}-drakit-node-plugin", f"{release}-drakit-controller"
    node_a, node_b = f"node-a-{suffix}", f"node-b-{suffix}"
    pods = []
    for node in (node_a, node_b):
        core.create_node(_node(node))
        created = core.create_namespaced_pod(namespace, _pod_on(node, plugin_sa))
        pods.append(api.sanitize_for_serialization(created))
    try:
        yield Installed(
            release=release,
            namespace=namespace,
            driver=driver,
            node_a=node_a,
            node_b=node_b,
            node_plugin_sa=plugin_sa,
            controller_sa=controller_sa,
            pod_a=pods[0],
            pod_b=pods[1],
        )
    finally:
        helm.run(
            "uninstall",
            release,
            "--kubeconfig",
            cluster.kubeconfig,
            "--namespace",
            namespace,
            check=False,
        )
        for node in (node_a, node_b):
            core.delete_node(node)
        core.delete_namespace(namespace)
