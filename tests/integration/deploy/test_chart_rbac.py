"""The chart's RBAC, installed for real: each component may do what it needs and no more.

Access is checked as the real service accounts, with TokenRequest tokens:
SelfSubjectAccessReviews for the full list, and real requests for the
writes that matter most (pods, claim allocation, claim device status under
granular status authorization).
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import pytest
from conftest import Installed
from deploy_support import can_i, request_token, token_client
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.kubeapi.errors import Invalid
from drakit.kubeapi.jsonpatch import guarded_patch
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

RES = "resource.k8s.io"


class Access(NamedTuple):
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    # "<release>" stands for the release namespace; "" is cluster scope.
    namespace: str = "default"
    name: str = ""

    def ask(self, api: client.ApiClient, installed: Installed) -> bool:
        namespace = installed.namespace if self.namespace == "<release>" else self.namespace
        name = installed.driver if self.name == "<driver>" else self.name
        return can_i(
            api,
            self.verb,
            self.resource,
            group=self.group,
            subresource=self.subresource,
            namespace=namespace,
            name=name,
        )


NODE_PLUGIN_MAY = [
    Access("create", "resourceslices", RES, namespace=""),
    Access("update", "resourceslices", RES, namespace=""),
    Access("delete", "resourceslices", RES, namespace=""),
    Access("watch", "resourceslices", RES, namespace=""),
    Access("get", "resourceclaims", RES),
    Access("get", "nodes", namespace=""),
    Access("create", "events"),
    Access("patch", "events", "events.k8s.io"),
]
NODE_PLUGIN_MAY_NOT = [
    Access("patch", "resourceslices", RES, namespace=""),  # the publisher creates and updates
    Access("create", "pods"),
    Access("update", "pods", subresource="status"),
    Access("get", "secrets"),
    Access("list", "resourceclaims", RES),
    Access("update", "resourceclaims", RES),
    Access("update", "resourceclaims", RES, subresource="status"),
    Access("update", "resourceclaims", RES, subresource="binding", namespace=""),
    Access("associated-node:update", "resourceclaims", RES, subresource="driver", name="<driver>"),
    Access("update", "nodes", namespace=""),
    Access("list", "nodes", namespace=""),
    Access("create", "deviceclasses", RES, namespace=""),
]
CONTROLLER_MAY = [
    Access("watch", "pods"),
    Access("patch", "pods", subresource="status"),
    Access("update", "pods", subresource="status"),
    Access("create", "pods", subresource="binding"),
    Access("create", "resourceclaims", RES),
    Access("delete", "resourceclaims", RES),
    Access("patch", "resourceclaims", RES),
    Access("update", "resourceclaims", RES, subresource="status"),
    Access("update", "resourceclaims", RES, subresource="binding", namespace=""),
    Access("patch", "resourceclaims", RES, subresource="binding", namespace=""),
    Access("list", "resourceclaimtemplates", RES),
    Access("watch", "deviceclasses", RES, namespace=""),
    Access("list", "resourceslices", RES, namespace=""),
    Access("list", "devicetaintrules", RES, namespace=""),
    Access("create", "devicetaintrules", RES, namespace=""),
    Access("delete", "devicetaintrules", RES, namespace=""),
    Access("watch", "nodes", namespace=""),
    Access("create", "events"),
    Access("patch", "events", "events.k8s.io"),
    Access("get", "leases", "coordination.k8s.io", namespace="<release>"),
    Access("create", "leases", "coordination.k8s.io", namespace="<release>"),
    Access("update", "leases", "coordination.k8s.io", namespace="<release>"),
]
CONTROLLER_MAY_NOT = [
    Access("create", "resourceslices", RES, namespace=""),
    Access("get", "secrets"),
    Access("create", "pods"),
    Access("delete", "pods"),
    Access("create", "resourceclaimtemplates", RES),
    Access("update", "nodes", namespace=""),
    Access("update", "leases", "coordination.k8s.io", namespace="default"),
    Access("arbitrary-node:update", "resourceclaims", RES, subresource="driver", name="<driver>"),
]


def _id(access: Access) -> str:
    resource = "/".join(p for p in (access.resource, access.subresource) if p)
    return f"{access.verb}-{resource}"


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> client.ApiClient:
    return cluster.api_client()


@pytest.fixture(scope="module")
def node_plugin(admin: client.ApiClient, installed: Installed) -> client.ApiClient:
    """The node plugin on node A, with a pod-bound token as the kubelet mounts it."""
    token = request_token(admin, installed.namespace, installed.node_plugin_sa, installed.pod_a)
    return token_client(admin, token)


@pytest.fixture(scope="module")
def controller(admin: client.ApiClient, installed: Installed) -> client.ApiClient:
    return token_client(admin, request_token(admin, installed.namespace, installed.controller_sa))


@pytest.mark.parametrize("access", NODE_PLUGIN_MAY, ids=_id)
def test_node_plugin_may(
    node_plugin: client.ApiClient, installed: Installed, access: Access
) -> None:
    assert access.ask(node_plugin, installed)


@pytest.mark.parametrize("access", NODE_PLUGIN_MAY_NOT, ids=_id)
def test_node_plugin_may_not(
    node_plugin: client.ApiClient, installed: Installed, access: Access
) -> None:
    assert not access.ask(node_plugin, installed)


@pytest.mark.parametrize("access", CONTROLLER_MAY, ids=_id)
def test_controller_may(controller: client.ApiClient, installed: Installed, access: Access) -> None:
    assert access.ask(controller, installed)


@pytest.mark.parametrize("access", CONTROLLER_MAY_NOT, ids=_id)
def test_controller_may_not(
    controller: client.ApiClient, installed: Installed, access: Access
) -> None:
    assert not access.ask(controller, installed)


def test_node_plugin_token_cannot_create_a_pod(
    node_plugin: client.ApiClient, installed: Installed
) -> None:
    pod = {
        "metadata": {"name": "intruder"},
        "spec": {"containers": [{"name": "c", "image": "drakit:test"}]},
    }
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(node_plugin).create_namespaced_pod(installed.namespace, pod)
    assert refused.value.status == 403
    assert 'cannot create resource \\"pods\\"' in refused.value.body


def test_node_plugin_token_reads_claims(
    node_plugin: client.ApiClient, installed: Installed
) -> None:
    # Authorized: a missing claim is 404, not 403.
    with pytest.raises(ApiException) as missing:
        client.CustomObjectsApi(node_plugin).get_namespaced_custom_object(
            RES, "v1", installed.namespace, "resourceclaims", "no-such-claim"
        )
    assert missing.value.status == 404


# --- claim status writes under granular status authorization -----------------


def _claims(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _new_claim(admin: client.ApiClient, installed: Installed) -> dict[str, Any]:
    body = {
        "apiVersion": f"{RES}/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": installed.driver}}]
            }
        },
    }
    created: dict[str, Any] = _claims(admin).create_namespaced_custom_object(
        RES, "v1", installed.namespace, "resourceclaims", body
    )
    return created


def _allocation(installed: Installed, node: str) -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": "gpu", "driver": installed.driver, "pool": node, "device": "gpu-0"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def _write_status(api: client.ApiClient, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    written: dict[str, Any] = _claims(api).replace_namespaced_custom_object_status(
        RES, "v1", meta["namespace"], "resourceclaims", meta["name"], claim
    )
    return written


def _allocate(api: client.ApiClient, claim: dict[str, Any], installed: Installed, node: str) -> Any:
    claim["status"] = {"allocation": _allocation(installed, node)}
    return _write_status(api, claim)


def test_controller_writes_allocation_and_reservation_with_its_binding_permission(
    admin: client.ApiClient, controller: client.ApiClient, installed: Installed
) -> None:
    claim = _new_claim(admin, installed)
    allocated = _allocate(controller, claim, installed, installed.node_a)
    pod = installed.pod_a["metadata"]
    allocated["status"]["reservedFor"] = [
        {"resource": "pods", "name": pod["name"], "uid": pod["uid"]}
    ]
    reserved = _write_status(controller, allocated)
    assert reserved["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert reserved["status"]["reservedFor"][0]["uid"] == pod["uid"]


@pytest.fixture(scope="module")
def status_plugin_on_a(
    admin: client.ApiClient, installed_with_device_status: Installed
) -> client.ApiClient:
    release = installed_with_device_status
    token = request_token(admin, release.namespace, release.node_plugin_sa, release.pod_a)
    return token_client(admin, token)


def _device_status(installed: Installed, node: str) -> list[dict[str, Any]]:
    return [{"driver": installed.driver, "pool": node, "device": "gpu-0"}]


def _patch_status(api: client.ApiClient, claim: dict[str, Any], key: str, value: Any) -> Any:
    """The node plugin's write: a JSON patch of one status field, resourceVersion-guarded."""
    ops = [{"op": "add", "path": f"/status/{key}", "value": value}]
    return guarded_patch(Resource(api, RESOURCE_CLAIMS), claim, ops, subresource="status")


def _refused(call: Any) -> str:
    with pytest.raises(Invalid) as refused:
        call()
    return str(refused.value)


def test_node_plugin_with_device_status_writes_devices_of_claims_on_its_node(
    admin: client.ApiClient,
    status_plugin_on_a: client.ApiClient,
    installed_with_device_status: Installed,
) -> None:
    release = installed_with_device_status
    claim = _allocate(admin, _new_claim(admin, release), release, release.node_a)
    devices = _device_status(release, release.node_a)
    written = _patch_status(status_plugin_on_a, claim, "devices", devices)
    assert written["status"]["devices"][0]["device"] == "gpu-0"


def test_node_plugin_with_device_status_cannot_write_devices_of_claims_on_another_node(
    admin: client.ApiClient,
    status_plugin_on_a: client.ApiClient,
    installed_with_device_status: Installed,
) -> None:
    release = installed_with_device_status
    claim = _allocate(admin, _new_claim(admin, release), release, release.node_b)
    devices = _device_status(release, release.node_b)
    message = _refused(lambda: _patch_status(status_plugin_on_a, claim, "devices", devices))
    assert 'changing status.devices requires resource="resourceclaims/driver"' in message


def test_node_plugin_cannot_allocate_claims(
    admin: client.ApiClient,
    status_plugin_on_a: client.ApiClient,
    installed_with_device_status: Installed,
) -> None:
    # It may write claim status (for status.devices) but not the binding part.
    release = installed_with_device_status
    claim = _new_claim(admin, release)
    allocation = _allocation(release, release.node_a)
    message = _refused(lambda: _patch_status(status_plugin_on_a, claim, "allocation", allocation))
    assert 'requires resource="resourceclaims/binding"' in message
