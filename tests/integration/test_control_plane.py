"""Smoke tests: the launcher's control plane is a real Kubernetes 1.37 API."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.localcluster import LocalCluster
from drakit.version import KUBERNETES_VERSION

pytestmark = pytest.mark.integration

RESOURCE = "resource.k8s.io"


def _custom(cluster: LocalCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


def _slice(name: str, devices: int) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": "LATEST-GPU-MODEL"}}}
                for i in range(devices)
            ],
        },
    }


def test_apiserver_reports_the_pinned_kubernetes_version(cluster: LocalCluster) -> None:
    status, body = cluster.request("/version")
    assert status == 200
    assert json.loads(body)["gitVersion"] == KUBERNETES_VERSION


def test_resource_api_serves_v1_v1beta1_and_v1beta2(cluster: LocalCluster) -> None:
    status, body = cluster.request("/apis/resource.k8s.io")
    assert status == 200
    group = json.loads(body)
    assert {v["version"] for v in group["versions"]} >= {"v1", "v1beta1", "v1beta2"}
    assert group["preferredVersion"]["version"] == "v1"


def test_device_class_slice_template_and_pod_are_accepted(
    cluster: LocalCluster, namespace: str
) -> None:
    custom = _custom(cluster)
    custom.create_cluster_custom_object(
        RESOURCE,
        "v1",
        "deviceclasses",
        {
            "metadata": {"name": f"gpu-{namespace}"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
    )
    created = custom.create_cluster_custom_object(
        RESOURCE, "v1", "resourceslices", _slice(f"s-{namespace}", 2)
    )
    assert [d["name"] for d in created["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    custom.create_namespaced_custom_object(
        RESOURCE,
        "v1",
        namespace,
        "resourceclaimtemplates",
        {
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": f"gpu-{namespace}"}}
                        ]
                    }
                }
            },
        },
    )
    pod = client.CoreV1Api(cluster.api_client()).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "uses-gpu"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            },
        },
    )
    assert pod.spec.resource_claims[0].resource_claim_template_name == "one-gpu"
    custom.delete_cluster_custom_object(RESOURCE, "v1", "resourceslices", f"s-{namespace}")
    custom.delete_cluster_custom_object(RESOURCE, "v1", "deviceclasses", f"gpu-{namespace}")


def test_apiserver_rejects_a_slice_with_129_devices(cluster: LocalCluster) -> None:
    with pytest.raises(ApiException) as err:
        _custom(cluster).create_cluster_custom_object(
            RESOURCE, "v1", "resourceslices", _slice("too-big", 129)
        )
    assert err.value.status == 422
    message = json.loads(err.value.body)["message"]
    assert "spec.devices" in message
    assert "128" in message


def test_token_request_issues_service_account_tokens(cluster: LocalCluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "plugin"}})
    token = core.create_namespaced_service_account_token(
        "plugin", namespace, {"spec": {"audiences": [cluster.server], "expirationSeconds": 600}}
    )
    assert token.status.token.count(".") == 2  # a signed JWT
