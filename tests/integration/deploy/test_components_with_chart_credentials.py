"""drakit's two programs, started as the chart starts them and with the chart's
service-account credentials, do their work on the real apiserver.

This proves the RBAC and the admission policy are sufficient, not only
restrictive: the node plugin publishes its node's ResourceSlices through the
policy with a token bound to its pod on node A; the controller takes its
leader Lease, generates a claim for a pod, allocates it from those slices and
binds the pod, all with a token of its own account.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Installed
from deploy_support import (
    Helm,
    container_environment,
    one,
    request_token,
    token_kubeconfig,
)
from helpers.waiting import eventually
from kubernetes import client

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

RES = "resource.k8s.io"


@dataclass(frozen=True)
class Program:
    """A drakit command line and environment, as a rendered container would run it."""

    args: list[str]
    env: dict[str, str]
    log: Path

    @contextmanager
    def running(self) -> Iterator[subprocess.Popen[str]]:
        with self.log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "drakit.cli", *self.args],
                env=self.env,
                stderr=out,
                text=True,
            )
            try:
                yield process
            finally:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def refusals(self) -> list[str]:
        """Log lines that report an authorization or admission refusal."""
        lines = self.log.read_text().splitlines()
        return [
            line
            for line in lines
            if ("Forbidden" in line or " 403" in line) and not _optional_gate_probe(line)
        ]


def _optional_gate_probe(line: str) -> bool:
    """The start-up read of the apiserver's feature gates from /metrics, which the chart
    does not grant (least privilege): the components fall back to the minor's defaults."""
    return "drakit.kubeapi.clusterversion" in line and "GET /metrics" in line


def _wait(what: str, check: Callable[[], Any], *processes: subprocess.Popen[str]) -> Any:
    """Poll ``check`` until it returns something truthy; the processes must stay up meanwhile."""

    def check_while_up() -> Any:
        result = check()
        for process in processes:
            if not result and process.poll() is not None:
                pytest.fail(f"{process.args} exited with {process.returncode} before {what}")
        return result

    return eventually(check_while_up, what, 60, interval=0.25)


def _base_env(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("POD_UID", "POD_NAME")}
    env["KUBECONFIG"] = str(kubeconfig)  # stands in for the in-cluster service account
    return env


def _container(helm: Helm, installed: Installed, kind: str, values: dict[str, str]) -> Any:
    objects = helm.render(
        release=installed.release,
        namespace=installed.namespace,
        values={"driverName": installed.driver, **values},
    )
    return one(objects, kind)["spec"]["template"]["spec"]["containers"][0]


@pytest.fixture
def node_plugin_on_a(
    helm: Helm, cluster: LocalCluster, installed: Installed, short_root: Path
) -> Program:
    """The DaemonSet's plugin container for node A, with a token bound to its pod there."""
    container = _container(
        helm,
        installed,
        "DaemonSet",
        {
            "kubeletDir": str(short_root / "kubelet"),
            "cdiRoot": str(short_root / "cdi"),
            "nodePlugin.metrics.enabled": "false",
        },
    )
    admin = cluster.api_client()
    token = request_token(admin, installed.namespace, installed.node_plugin_sa, installed.pod_a)
    kubeconfig = token_kubeconfig(cluster.kubeconfig, token, short_root / "plugin.kubeconfig")
    downward = {
        "spec.nodeName": installed.node_a,
        "metadata.uid": installed.pod_a["metadata"]["uid"],
    }
    env = container_environment(container, downward, _base_env(kubeconfig))
    assert container["command"][0] == "drakit"
    return Program(container["command"][1:], env, short_root / "node-plugin.log")


@pytest.fixture
def controller(
    helm: Helm, cluster: LocalCluster, installed: Installed, short_root: Path
) -> Program:
    """The Deployment's controller container, with a token of the controller's account."""
    container = _container(helm, installed, "Deployment", {"controller.metrics.enabled": "false"})
    admin = cluster.api_client()
    token = request_token(admin, installed.namespace, installed.controller_sa)
    kubeconfig = token_kubeconfig(cluster.kubeconfig, token, short_root / "ctrl.kubeconfig")
    downward = {"metadata.name": "controller-0", "metadata.namespace": installed.namespace}
    env = container_environment(container, downward, _base_env(kubeconfig))
    assert container["command"][0] == "drakit"
    return Program(container["command"][1:] + container["args"], env, short_root / "ctrl.log")


@pytest.fixture
def node_a_slices(cluster: LocalCluster, installed: Installed) -> Iterator[Callable[[], Any]]:
    """Lists node A's slices of the driver; deletes them afterwards (they outlive the plugin)."""
    slices = client.CustomObjectsApi(cluster.api_client())
    selector = f"spec.driver={installed.driver},spec.nodeName={installed.node_a}"

    def published() -> list[dict[str, Any]]:
        found = slices.list_cluster_custom_object(
            RES, "v1", "resourceslices", field_selector=selector
        )
        items: list[dict[str, Any]] = found["items"]
        return items

    yield published
    for s in published():
        slices.delete_cluster_custom_object(RES, "v1", "resourceslices", s["metadata"]["name"])


def _make_ready(core: client.CoreV1Api, node: str) -> None:
    """What a kubelet would do: report Ready, and the not-ready taint goes away."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ready |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    status = {"conditions": [ready], "capacity": capacity, "allocatable": capacity}
    core.patch_node_status(node, {"status": status})
    core.patch_node(node, {"spec": {"taints": None}})


def _claim_template_and_pod(installed: Installed, name: str) -> tuple[dict[str, Any], Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": installed.driver}}
    template = {
        "apiVersion": f"{RES}/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    app = {"name": "app", "image": "drakit:test", "resources": {"claims": [{"name": "gpu"}]}}
    pod = {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "drakit",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [app],
        },
    }
    return template, pod


def test_node_plugin_publishes_its_slices_with_its_pod_bound_token(
    node_plugin_on_a: Program, installed: Installed, node_a_slices: Callable[[], Any]
) -> None:
    with node_plugin_on_a.running() as process:
        mine = _wait("node A's ResourceSlice", node_a_slices, process)
    assert {s["spec"]["pool"]["name"] for s in mine} == {installed.node_a}
    assert sum(len(s["spec"]["devices"]) for s in mine) > 0
    assert node_plugin_on_a.refusals() == []


def test_controller_leads_and_generates_claims_with_its_service_account(
    controller: Program, cluster: LocalCluster, installed: Installed
) -> None:
    admin = cluster.api_client()
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    ns, name = installed.namespace, f"lead-{uuid.uuid4().hex[:6]}"
    template, pod = _claim_template_and_pod(installed, name)
    custom.create_namespaced_custom_object(RES, "v1", ns, "resourceclaimtemplates", template)
    core.create_namespaced_pod(ns, pod)
    lease_name = controller.env["LEADER_ELECT_LEASE_NAME"]

    def leader() -> str:
        leases = client.CoordinationV1Api(admin).list_namespaced_lease(
            ns, field_selector=f"metadata.name={lease_name}"
        )
        return str(leases.items[0].spec.holder_identity) if leases.items else ""

    def generated() -> list[Any]:
        return list(core.read_namespaced_pod(name, ns).status.resource_claim_statuses or [])

    with controller.running() as process:
        holder = _wait("the controller holding its Lease", leader, process)
        statuses = _wait("a claim generated for the pod", generated, process)
    assert holder.startswith("controller-0")  # POD_NAME, plus a per-process suffix
    claim = custom.get_namespaced_custom_object(
        RES, "v1", ns, "resourceclaims", statuses[0].resource_claim_name
    )
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert controller.refusals() == []


def test_controller_allocates_from_the_plugins_slices_and_binds_the_pod(
    node_plugin_on_a: Program,
    controller: Program,
    cluster: LocalCluster,
    installed: Installed,
    node_a_slices: Callable[[], Any],
) -> None:
    admin = cluster.api_client()
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    ns, name = installed.namespace, f"bind-{uuid.uuid4().hex[:6]}"
    _make_ready(core, installed.node_a)
    template, pod = _claim_template_and_pod(installed, name)
    custom.create_namespaced_custom_object(RES, "v1", ns, "resourceclaimtemplates", template)

    def bound() -> str:
        return str(core.read_namespaced_pod(name, ns).spec.node_name or "")

    with node_plugin_on_a.running() as plugin:
        _wait("node A's ResourceSlice", node_a_slices, plugin)
        core.create_namespaced_pod(ns, pod)
        with controller.running() as ctrl:
            node = _wait("the pod bound to a node", bound, plugin, ctrl)
    assert node == installed.node_a
    statuses = core.read_namespaced_pod(name, ns).status.resource_claim_statuses
    claim = custom.get_namespaced_custom_object(
        RES, "v1", ns, "resourceclaims", statuses[0].resource_claim_name
    )
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"]) for r in results] == [(installed.driver, installed.node_a)]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == [name]
    assert node_plugin_on_a.refusals() == []
    assert controller.refusals() == []
