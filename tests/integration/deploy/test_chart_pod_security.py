"""The chart's pods against the real apiserver's PodSecurity admission (server-side dry run).

The controller must pass the Pod Security Standards "restricted" profile. The
node plugin cannot pass "baseline" (it needs hostPath volumes for the kubelet's
plugin folders and the CDI folder) and must violate it through nothing else:
no privileged container, no added capability, no host namespace.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from deploy_support import Helm, one
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

LEVELS = ("restricted", "baseline", "privileged")
HOSTDEV = {"nodePlugin.backend": "hostdev", "nodePlugin.backendConfig.devices[0].glob": "/dev/fuse"}


@pytest.fixture(scope="module")
def level_namespaces(cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """One namespace per Pod Security level, enforced, with the chart's service accounts."""
    core = client.CoreV1Api(cluster.api_client())
    suffix = uuid.uuid4().hex[:8]
    names = {level: f"pss-{level}-{suffix}" for level in LEVELS}
    for level, name in names.items():
        labels = {"pod-security.kubernetes.io/enforce": level}
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
        for account in ("drakit-controller", "drakit-node-plugin"):
            core.create_namespaced_service_account(name, {"metadata": {"name": account}})
    yield names
    for name in names.values():
        core.delete_namespace(name)


def _pod_of(workload: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    template = workload["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pss-{uuid.uuid4().hex[:6]}", "namespace": namespace},
        "spec": template["spec"],
    }


def _violations(api: client.ApiClient, pod: dict[str, Any]) -> list[str]:
    """The PodSecurity checks a dry-run create of ``pod`` fails (empty: admitted)."""
    try:
        client.CoreV1Api(api).create_namespaced_pod(
            pod["metadata"]["namespace"], pod, dry_run="All"
        )
    except ApiException as exc:
        assert exc.status == 403, exc.body
        message = json.loads(exc.body)["message"]
        _, found, checks = message.partition(':latest": ')
        assert found, message
        # 'hostPath volumes (volumes "a", "b"), privileged (container ...)' -> check names
        return sorted(re.sub(r"\s*\([^()]*\)", "", checks).split(", "))
    return []


def _workload(helm: Helm, kind: str, namespace: str, values: Mapping[str, str]) -> Any:
    return one(helm.render(namespace=namespace, values=values), kind)


@pytest.mark.parametrize("values", [{}, HOSTDEV], ids=["example", "hostdev"])
def test_controller_pod_passes_the_restricted_profile(
    helm: Helm, cluster: LocalCluster, level_namespaces: dict[str, str], values: dict[str, str]
) -> None:
    namespace = level_namespaces["restricted"]
    deployment = _workload(helm, "Deployment", namespace, values)
    assert _violations(cluster.api_client(), _pod_of(deployment, namespace)) == []


@pytest.mark.parametrize("values", [{}, HOSTDEV], ids=["example", "hostdev"])
def test_node_plugin_breaks_baseline_only_by_its_host_folders(
    helm: Helm, cluster: LocalCluster, level_namespaces: dict[str, str], values: dict[str, str]
) -> None:
    api = cluster.api_client()
    baseline, privileged = level_namespaces["baseline"], level_namespaces["privileged"]
    daemonset = _workload(helm, "DaemonSet", baseline, values)
    (violation,) = _violations(api, _pod_of(daemonset, baseline))
    assert violation.startswith("hostPath volumes")
    daemonset = _workload(helm, "DaemonSet", privileged, values)
    assert _violations(api, _pod_of(daemonset, privileged)) == []


def test_privileged_node_plugin_is_an_explicit_opt_in_that_baseline_refuses(
    helm: Helm, cluster: LocalCluster, level_namespaces: dict[str, str]
) -> None:
    namespace = level_namespaces["baseline"]
    daemonset = _workload(
        helm, "DaemonSet", namespace, {**HOSTDEV, "nodePlugin.privileged": "true"}
    )
    violations = _violations(cluster.api_client(), _pod_of(daemonset, namespace))
    assert [v.split(" ")[0] for v in violations] == ["hostPath", "privileged"]
