"""Fixtures for the deployment tests: helm built from its pinned Go module, and the
chart installed for real onto the session's control plane."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_support import CHART, ROOT, Helm, set_args
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.localcluster import LocalCluster


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A fresh folder with a short path: Unix socket paths are limited to 107 bytes."""
    root = Path(tempfile.mkdtemp(prefix="dkp-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


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
    #: What `helm install` printed (the chart's NOTES).
    install_output: str


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
) -> str:
    return helm.run(
        "install",
        release,
        str(CHART),
        "--kubeconfig",
        cluster.kubeconfig,
        "--namespace",
        namespace,
        *set_args(values),
    ).stdout


@contextmanager
def chart_installation(
    helm: Helm, cluster: LocalCluster, prefix: str, values: dict[str, str]
) -> Iterator[Installed]:
    """``helm install`` of the chart into a fresh namespace, uninstalled on exit.

    Names carry a random suffix, so the cluster-scoped objects (ClusterRoles,
    the admission policy, the DeviceClass, the Nodes) never meet those of
    other tests in the same session. Nodes A and B each get a stand-in
    node plugin pod for pod-bound tokens.
    """
    suffix = uuid.uuid4().hex[:8]
    release, namespace = f"{prefix}-{suffix}", f"drakit-{suffix}"
    driver = f"{prefix}-{suffix}.drakit.test"
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    node_a, node_b = f"node-a-{suffix}", f"node-b-{suffix}"
    try:
        output = _install(helm, cluster, release, namespace, {"driverName": driver, **values})
        plugin_sa = f"{release}-drakit-node-plugin"
        pods = []
        for node in (node_a, node_b):
            core.create_node(_node(node))
            created = core.create_namespaced_pod(namespace, _pod_on(node, plugin_sa))
            pods.append(api.sanitize_for_serialization(created))
        yield Installed(
            release=release,
            namespace=namespace,
            driver=driver,
            node_a=node_a,
            node_b=node_b,
            node_plugin_sa=plugin_sa,
            controller_sa=f"{release}-drakit-controller",
            pod_a=pods[0],
            pod_b=pods[1],
            install_output=output,
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
            try:
                core.delete_node(node)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        core.delete_namespace(namespace)


@pytest.fixture(scope="session")
def installed(helm: Helm, cluster: LocalCluster) -> Iterator[Installed]:
    """The chart with its default values (and a unique driver name), installed for real."""
    with chart_installation(helm, cluster, "dk", {}) as release:
        yield release


@pytest.fixture(scope="session")
def installed_with_device_status(helm: Helm, cluster: LocalCluster) -> Iterator[Installed]:
    """The node plugin alone, allowed to write status.devices (nodePlugin.deviceStatus)."""
    values = {"nodePlugin.deviceStatus": "true", "controller.enabled": "false"}
    with chart_installation(helm, cluster, "dks", values) as release:
        yield release
