"""The chart's admission policy, for real: a node plugin writes only its own node's slices.

The tokens are real TokenRequests for the node plugin's ServiceAccount, bound
to a pod scheduled to node A (as the kubelet would mount them), so they carry
the user extra authentication.kubernetes.io/node-name = A.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import Installed
from deploy_support import (
    PER_DEVICE_NODE_LABEL,
    per_device_slice,
    request_token,
    resource_slice,
    token_client,
)
from helpers.waiting import eventually
from kubernetes import client
from kubernetes.client.rest import ApiException

from drakit.kubeapi.clusterversion import MinorFacts
from drakit.localcluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.compat]

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
GROUP, VERSION, PLURAL = "resource.k8s.io", "v1", "resourceslices"


def _slices(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _create(api: client.ApiClient, body: dict[str, Any], dry_run: bool = False) -> Any:
    kwargs = {"dry_run": "All"} if dry_run else {}
    return _slices(api).create_cluster_custom_object(GROUP, VERSION, PLURAL, body, **kwargs)


def _name(node: str) -> str:
    return f"{node}-{uuid.uuid4().hex[:6]}"


def _forbidden(call: Callable[[], Any]) -> str:
    """Run ``call``, which must be refused with 403; return the refusal message."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value.body
    return str(refused.value.body)


@pytest.fixture
def per_device_slices_supported(kube_facts: MinorFacts) -> None:
    """perDeviceNodeSelection belongs to DRAPartitionableDevices (alpha, off, in 1.35):
    without it the apiserver drops the field and rejects the slice as naming no node."""
    if "DRAPartitionableDevices" not in kube_facts.default_on:
        pytest.skip(f"per-device node selection is off by default in 1.{kube_facts.minor}")


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> client.ApiClient:
    return cluster.api_client()


@pytest.fixture(scope="module")
def plugin_on_a(admin: client.ApiClient, installed: Installed) -> client.ApiClient:
    """The node plugin on node A, once the policy is in force.

    A new policy reaches the admission plugin through an informer; wait until
    it refuses a write to node B's slice (dry run) before the tests assert.
    """
    token = request_token(admin, installed.namespace, installed.node_plugin_sa, installed.pod_a)
    api = token_client(admin, token)
    probe = resource_slice(_name(installed.node_b), installed.driver, installed.node_b)

    def refused() -> bool:
        try:
            _create(api, probe, dry_run=True)
        except ApiException as exc:
            if exc.status == 403 and "ValidatingAdmissionPolicy" in str(exc.body):
                return True
            raise
        return False

    eventually(refused, "the chart's ValidatingAdmissionPolicy to take effect", 60, interval=0.5)
    return api


def test_token_of_a_pod_on_node_a_names_node_a(
    admin: client.ApiClient, installed: Installed
) -> None:
    token = request_token(admin, installed.namespace, installed.node_plugin_sa, installed.pod_a)
    review = client.AuthenticationV1Api(token_client(admin, token)).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    user = review.status.user_info
    assert user.username == (
        f"system:serviceaccount:{installed.namespace}:{installed.node_plugin_sa}"
    )
    assert user.extra[NODE_NAME_EXTRA] == [installed.node_a]


def test_node_plugin_creates_updates_and_deletes_its_own_nodes_slice(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    name = _name(installed.node_a)
    created = _create(plugin_on_a, resource_slice(name, installed.driver, installed.node_a))
    created["spec"]["devices"].append({"name": "gpu-1"})
    updated = _slices(plugin_on_a).replace_cluster_custom_object(
        GROUP, VERSION, PLURAL, name, created
    )
    assert [d["name"] for d in updated["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    _slices(plugin_on_a).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_node_plugin_cannot_create_a_slice_of_another_node(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    body = resource_slice(_name(installed.node_b), installed.driver, installed.node_b)
    message = _forbidden(lambda: _create(plugin_on_a, body))
    assert (
        f"the drakit node plugin on node {installed.node_a} may write only ResourceSlices "
        f"of its own node, not those of node {installed.node_b}"
    ) in message


def test_node_plugin_cannot_change_or_delete_a_slice_of_another_node(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    name = _name(installed.node_b)
    # Other users (here the admin) are not restricted by the policy.
    theirs = _create(admin, resource_slice(name, installed.driver, installed.node_b))
    try:
        theirs["spec"]["devices"] = []
        ops = _slices(plugin_on_a)
        update = _forbidden(
            lambda: ops.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, theirs)
        )
        delete = _forbidden(lambda: ops.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name))
        for message in (update, delete):
            assert f"not those of node {installed.node_b}" in message
        kept = _slices(admin).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        assert [d["name"] for d in kept["spec"]["devices"]] == ["gpu-0"]
    finally:
        _slices(admin).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_node_plugin_cannot_write_a_slice_for_all_nodes(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    body = resource_slice(f"all-{uuid.uuid4().hex[:6]}", installed.driver, None)
    message = _forbidden(lambda: _create(plugin_on_a, body))
    assert "not a slice without spec.nodeName" in message


def test_token_not_bound_to_a_pod_may_write_no_slice(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    token = request_token(admin, installed.namespace, installed.node_plugin_sa)
    unbound = token_client(admin, token)
    body = resource_slice(_name(installed.node_a), installed.driver, installed.node_a)
    message = _forbidden(lambda: _create(unbound, body))
    assert "the drakit node plugin's credentials name no node" in message


def test_node_plugin_on_node_b_may_write_node_b_slice_only(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    token = request_token(admin, installed.namespace, installed.node_plugin_sa, installed.pod_b)
    plugin_on_b = token_client(admin, token)
    mine = resource_slice(_name(installed.node_b), installed.driver, installed.node_b)
    assert _create(plugin_on_b, mine, dry_run=True)["spec"]["nodeName"] == installed.node_b
    theirs = resource_slice(_name(installed.node_a), installed.driver, installed.node_a)
    message = _forbidden(lambda: _create(plugin_on_b, theirs, dry_run=True))
    assert f"on node {installed.node_b} may write only" in message


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_policy_holds_on_every_served_resource_api_version(
    plugin_on_a: client.ApiClient, installed: Installed, version: str
) -> None:
    body = resource_slice(_name(installed.node_b), installed.driver, installed.node_b)
    body["apiVersion"] = f"{GROUP}/{version}"
    body["spec"]["devices"] = []  # the device schema differs between versions; none needed
    message = _forbidden(
        lambda: _slices(plugin_on_a).create_cluster_custom_object(
            GROUP, version, PLURAL, body, dry_run="All"
        )
    )
    assert f"not those of node {installed.node_b}" in message


@pytest.mark.usefixtures("per_device_slices_supported")
def test_node_plugin_writes_per_device_slices_whose_devices_are_all_on_its_node(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    a = installed.node_a
    body = per_device_slice(_name(a), installed.driver, a, {"gpu-0": a, "gpu-1": a})
    created = _create(plugin_on_a, body, dry_run=True)
    assert created["spec"]["perDeviceNodeSelection"] is True


@pytest.mark.parametrize(
    ("label", "devices"),
    [
        ("b", {"gpu-0": "a", "gpu-1": "b"}),
        ("a", {"gpu-0": "a", "gpu-1": True}),
        ("b", {"gpu-0": "b"}),
    ],
    ids=["a-device-on-node-b", "a-device-on-all-nodes", "labelled-for-node-b"],
)
@pytest.mark.usefixtures("per_device_slices_supported")
def test_node_plugin_cannot_write_per_device_slices_reaching_other_nodes(
    plugin_on_a: client.ApiClient,
    installed: Installed,
    label: str,
    devices: dict[str, object],
) -> None:
    node = {"a": installed.node_a, "b": installed.node_b}
    placed = {d: (node[n] if isinstance(n, str) else n) for d, n in devices.items()}
    body = per_device_slice(_name(node[label]), installed.driver, node[label], placed)
    message = _forbidden(lambda: _create(plugin_on_a, body, dry_run=True))
    assert (
        f"not a per-device slice labelled resource.drakit.dev/node={node[label]} whose devices "
        f"must all have spec.devices[].nodeName {installed.node_a}"
    ) in message


def _get(api: client.ApiClient, name: str) -> Any:
    return _slices(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)


@pytest.mark.usefixtures("per_device_slices_supported")
def test_node_plugin_updates_and_deletes_its_own_per_device_slice(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    a = installed.node_a
    name = _name(a)
    created = _create(plugin_on_a, per_device_slice(name, installed.driver, a, {"gpu-0": a}))
    created["spec"]["devices"].append({"name": "gpu-1", "nodeName": a})
    updated = _slices(plugin_on_a).replace_cluster_custom_object(
        GROUP, VERSION, PLURAL, name, created
    )
    assert [d["name"] for d in updated["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    _slices(plugin_on_a).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


@pytest.mark.usefixtures("per_device_slices_supported")
def test_node_plugin_cannot_take_over_another_nodes_per_device_slice_by_rewriting_it(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    # The attack of finding 1: relabel node B's per-device slice to node A and
    # move its devices to A, so that the new object alone looks like A's own.
    a, b = installed.node_a, installed.node_b
    name = _name(b)
    theirs = _create(admin, per_device_slice(name, installed.driver, b, {"gpu-0": b}))
    try:
        rewritten = dict(theirs)
        rewritten["metadata"] = {**theirs["metadata"], "labels": {PER_DEVICE_NODE_LABEL: a}}
        rewritten["spec"] = {**theirs["spec"], "devices": [{"name": "gpu-9", "nodeName": a}]}
        ops = _slices(plugin_on_a)
        update = _forbidden(
            lambda: ops.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, rewritten)
        )
        assert (
            f"the drakit node plugin on node {a} may not take over a ResourceSlice of another "
            f"node: the stored slice is a per-device slice labelled {PER_DEVICE_NODE_LABEL}={b}"
        ) in update
        delete = _forbidden(lambda: ops.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name))
        assert f"not a per-device slice labelled {PER_DEVICE_NODE_LABEL}={b}" in delete
        kept = _get(admin, name)
        assert kept["metadata"]["labels"] == {PER_DEVICE_NODE_LABEL: b}
        assert kept["spec"]["devices"] == [{"name": "gpu-0", "nodeName": b}]
    finally:
        _slices(admin).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_node_plugin_cannot_label_its_slice_as_another_nodes(
    plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    body = resource_slice(_name(installed.node_a), installed.driver, installed.node_a)
    body["metadata"]["labels"] = {PER_DEVICE_NODE_LABEL: installed.node_b}
    message = _forbidden(lambda: _create(plugin_on_a, body))
    assert f"not a slice labelled {PER_DEVICE_NODE_LABEL}={installed.node_b}" in message


def test_node_plugin_cannot_publish_a_slice_of_another_driver_on_its_own_node(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    # The attack of finding 2: attract other tenants' pods to this node.
    body = resource_slice(_name(installed.node_a), "gpu.nvidia.com", installed.node_a)
    message = _forbidden(lambda: _create(plugin_on_a, body))
    assert (
        f"may write only ResourceSlices of driver {installed.driver}, "
        "not a slice of driver gpu.nvidia.com"
    ) in message
    mine = _slices(admin).list_cluster_custom_object(
        GROUP, VERSION, PLURAL, field_selector="spec.driver=gpu.nvidia.com"
    )
    assert mine["items"] == []


def test_node_plugin_cannot_change_or_delete_another_drivers_slice_on_its_node(
    admin: client.ApiClient, plugin_on_a: client.ApiClient, installed: Installed
) -> None:
    name = _name(installed.node_a)
    theirs = _create(admin, resource_slice(name, "gpu.nvidia.com", installed.node_a))
    try:
        theirs["spec"]["devices"] = [{"name": "gpu-7"}]
        ops = _slices(plugin_on_a)
        update = _forbidden(
            lambda: ops.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, theirs)
        )
        delete = _forbidden(lambda: ops.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name))
        for message in (update, delete):
            assert "not a slice of driver gpu.nvidia.com" in message
        assert [d["name"] for d in _get(admin, name)["spec"]["devices"]] == ["gpu-0"]
    finally:
        _slices(admin).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


@pytest.mark.parametrize("field", ["attributes", "capacity"])
def test_node_plugin_cannot_publish_device_fields_in_another_drivers_domain(
    plugin_on_a: client.ApiClient, installed: Installed, field: str
) -> None:
    body = resource_slice(_name(installed.node_a), installed.driver, installed.node_a)
    value = {"string": "H100"} if field == "attributes" else {"value": "80Gi"}
    body["spec"]["devices"][0][field] = {"gpu.nvidia.com/productName": value, "local": value}
    message = _forbidden(lambda: _create(plugin_on_a, body, dry_run=True))
    assert f"only in the domains {installed.driver} and resource.kubernetes.io" in message
    assert "gpu.nvidia.com/productName" in message
    body["spec"]["devices"][0][field] = {f"{installed.driver}/productName": value, "local": value}
    assert _create(plugin_on_a, body, dry_run=True)["spec"]["driver"] == installed.driver
