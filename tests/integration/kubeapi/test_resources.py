"""The typed resource layer against a real kube-apiserver: verbs, selectors, errors.

Every test runs twice: on the kubernetes package's ApiClient and on kubeapi's light client
(what the node plugin uses), which must behave the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from drakit.kubeapi import errors
from drakit.kubeapi.client import load_client
from drakit.kubeapi.lightclient import LightApiClient, load_light_client
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    EVENTS,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    PatchType,
    Resource,
    bind_pod,
)
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration


def claim_body(
    namespace: str, *, name: str = "", labels: dict[str, str] | None = None
) -> KubeObject:
    meta: dict[str, Any] = {"namespace": namespace, "labels": labels or {}}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = "claim-"
    return {
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


def pod_body(namespace: str, name: str) -> KubeObject:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }


CLIENTS = {"kubernetes-client": load_client, "light-client": load_light_client}


@pytest.fixture(scope="module", params=sorted(CLIENTS))
def api(request: pytest.FixtureRequest, cluster: LocalCluster) -> Any:
    """Overrides the package-wide ``api``: each client in turn."""
    client = CLIENTS[request.param](cluster.kubeconfig)
    assert isinstance(client, LightApiClient) == (request.param == "light-client")
    return client


@pytest.fixture
def pods(api: Any) -> Resource:
    return Resource(api, PODS)


def test_create_with_generate_name_gets_a_server_chosen_name(
    claims: Resource, namespace: str
) -> None:
    created = claims.create(claim_body(namespace))
    assert created["metadata"]["name"].startswith("claim-")
    assert created["kind"] == "ResourceClaim"
    assert (
        claims.get(created["metadata"]["name"], namespace)["metadata"]["uid"]
        == created["metadata"]["uid"]
    )


def test_list_pages_through_every_object_of_one_snapshot(claims: Resource, namespace: str) -> None:
    names = {claims.create(claim_body(namespace))["metadata"]["name"] for _ in range(7)}
    listed = claims.list(namespace, page_size=3)
    assert {o["metadata"]["name"] for o in listed.items} == names
    assert all(o["apiVersion"] == "resource.k8s.io/v1" for o in listed.items)
    assert int(listed.resource_version) > 0


def test_list_filters_by_label_and_field_selectors(claims: Resource, namespace: str) -> None:
    claims.create(claim_body(namespace, name="a", labels={"team": "red"}))
    claims.create(claim_body(namespace, name="b", labels={"team": "blue"}))
    by_label = claims.list(namespace, label_selector="team=red").items
    by_field = claims.list(namespace, field_selector="metadata.name=b").items
    assert [o["metadata"]["name"] for o in by_label] == ["a"]
    assert [o["metadata"]["name"] for o in by_field] == ["b"]


def test_get_of_a_missing_object_raises_not_found(claims: Resource, namespace: str) -> None:
    with pytest.raises(errors.NotFound, match="nope"):
        claims.get("nope", namespace)


def test_creating_an_existing_name_raises_already_exists(claims: Resource, namespace: str) -> None:
    claims.create(claim_body(namespace, name="twice"))
    with pytest.raises(errors.AlreadyExists):
        claims.create(claim_body(namespace, name="twice"))


def test_update_from_a_stale_copy_raises_conflict(claims: Resource, namespace: str) -> None:
    stale = claims.create(claim_body(namespace, name="c"))
    claims.patch("c", {"metadata": {"labels": {"x": "1"}}}, namespace)
    stale["metadata"]["labels"] = {"x": "2"}
    with pytest.raises(errors.Conflict) as info:
        claims.update(stale)
    assert type(info.value) is errors.Conflict


def test_an_invalid_object_raises_invalid_naming_the_field(
    claims: Resource, namespace: str
) -> None:
    body = claim_body(namespace, name="bad")
    body["spec"]["devices"]["requests"][0]["name"] = "Not_A_Label"
    with pytest.raises(errors.Invalid) as info:
        claims.create(body)
    assert "spec.devices.requests[0].name" in {c.field for c in info.value.causes}
    assert "Not_A_Label" in str(info.value)


def test_json_patch_test_op_applies_only_when_the_precondition_holds(
    claims: Resource, namespace: str
) -> None:
    created = claims.create(claim_body(namespace, name="guarded"))
    rv = created["metadata"]["resourceVersion"]

    def guarded_patch(value: str, expected_rv: str) -> KubeObject:
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": expected_rv},
            {"op": "add", "path": "/metadata/labels", "value": {"step": value}},
        ]
        return claims.patch("guarded", ops, namespace, patch_type=PatchType.JSON)

    patched = guarded_patch("one", rv)
    assert patched["metadata"]["labels"] == {"step": "one"}
    with pytest.raises((errors.Invalid, errors.Conflict)):
        guarded_patch("two", rv)  # rv is stale now
    assert claims.get("guarded", namespace)["metadata"]["labels"] == {"step": "one"}


def test_strategic_merge_patch_merges_lists_by_key(pods: Resource, namespace: str) -> None:
    pods.create(pod_body(namespace, "p"))
    patch = {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}
    patched = pods.patch("p", patch, namespace, patch_type=PatchType.STRATEGIC)
    assert [c["image"] for c in patched["spec"]["containers"]] == ["registry.k8s.io/pause:3.9"]


def test_server_side_apply_conflicts_with_another_manager_unless_forced(
    claims: Resource, namespace: str
) -> None:
    mine = claim_body(namespace, name="ssa", labels={"owner": "first"})
    claims.apply(mine, field_manager="first")
    theirs = {"metadata": {"name": "ssa", "namespace": namespace, "labels": {"owner": "second"}}}
    with pytest.raises(errors.Conflict, match="first"):
        claims.apply(theirs, field_manager="second")
    forced = claims.apply(theirs, field_manager="second", force=True)
    assert forced["metadata"]["labels"] == {"owner": "second"}


def test_server_side_apply_on_the_status_subresource_leaves_the_spec_alone(
    pods: Resource, namespace: str
) -> None:
    pods.create(pod_body(namespace, "p"))
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "no node has a free gpu",
    }
    status = {
        "metadata": {"name": "p", "namespace": namespace},
        "status": {"conditions": [condition]},
    }
    applied = pods.apply(status, field_manager="drakit", subresource="status", force=True)
    assert applied["status"]["conditions"][0]["message"] == "no node has a free gpu"
    assert applied["spec"]["containers"][0]["name"] == "main"


def test_update_status_changes_the_status_and_not_the_spec(pods: Resource, namespace: str) -> None:
    pod = pods.create(pod_body(namespace, "p"))
    pod["spec"]["containers"][0]["image"] = "ignored:1"
    pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    updated = pods.update_status(pod)
    assert updated["status"]["conditions"][0]["type"] == "PodScheduled"
    assert updated["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"


def test_delete_with_a_mismatched_uid_fails_and_keeps_the_object(
    claims: Resource, namespace: str
) -> None:
    claims.create(claim_body(namespace, name="keep"))
    with pytest.raises(errors.Conflict, match="UID"):
        claims.delete("keep", namespace, uid="00000000-0000-0000-0000-000000000000")
    assert claims.get("keep", namespace)["metadata"]["name"] == "keep"


def test_delete_with_a_stale_resource_version_fails(claims: Resource, namespace: str) -> None:
    created = claims.create(claim_body(namespace, name="moving"))
    claims.patch("moving", {"metadata": {"labels": {"x": "1"}}}, namespace)
    with pytest.raises(errors.Conflict):
        claims.delete("moving", namespace, resource_version=created["metadata"]["resourceVersion"])


def test_delete_with_matching_preconditions_removes_the_object(
    claims: Resource, namespace: str
) -> None:
    created = claims.create(claim_body(namespace, name="gone"))
    meta = created["metadata"]
    claims.delete("gone", namespace, uid=meta["uid"], resource_version=meta["resourceVersion"])
    with pytest.raises(errors.NotFound):
        claims.get("gone", namespace)
    with pytest.raises(errors.NotFound):
        claims.delete("gone", namespace)


def test_delete_of_an_object_with_a_finalizer_returns_it_marked_for_deletion(
    claims: Resource, namespace: str
) -> None:
    body = claim_body(namespace, name="held")
    body["metadata"]["finalizers"] = ["drakit.dev/test"]
    claims.create(body)
    remaining = claims.delete("held", namespace)
    assert remaining is not None and remaining["metadata"]["deletionTimestamp"]
    claims.patch("held", {"metadata": {"finalizers": None}}, namespace)


def test_bind_pod_assigns_the_node_once(api: Any, pods: Resource, namespace: str) -> None:
    pod = pods.create(pod_body(namespace, "p"))
    bind_pod(pods, namespace, "p", "node-1", uid=pod["metadata"]["uid"])
    assert pods.get("p", namespace)["spec"]["nodeName"] == "node-1"
    with pytest.raises(errors.Conflict):
        bind_pod(pods, namespace, "p", "node-2")


def test_cluster_scoped_resources_need_no_namespace(api: Any) -> None:
    nodes = Resource(api, NODES)
    node = nodes.create({"metadata": {"generateName": "fake-node-"}})
    try:
        assert nodes.get(node["metadata"]["name"])["kind"] == "Node"
    finally:
        nodes.delete(node["metadata"]["name"])


def test_namespaced_verbs_without_a_namespace_are_refused(claims: Resource) -> None:
    with pytest.raises(ValueError, match="namespace"):
        claims.get("x")


def test_watch_delivers_changes_after_the_listed_resource_version(
    claims: Resource, namespace: str
) -> None:
    claims.create(claim_body(namespace, name="before"))
    start = claims.list(namespace).resource_version
    claims.create(claim_body(namespace, name="after"))
    claims.delete("after", namespace)
    seen: list[tuple[str, str]] = []
    with claims.watch(namespace, resource_version=start, timeout_seconds=5) as stream:
        for event in stream:
            if event.type != "BOOKMARK":
                seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 2:
                break
    assert seen == [("ADDED", "after"), ("DELETED", "after")]


def test_watch_from_a_compacted_resource_version_raises_gone(
    api: Any, namespace: str, compact_etcd: Callable[[], int]
) -> None:
    # Events are not served from the apiserver's watch cache, so a watch reaches etcd directly.
    events = Resource(api, EVENTS)
    old = events.list(namespace).resource_version
    Resource(api, RESOURCE_CLAIMS).create(claim_body(namespace))
    Resource(api, RESOURCE_CLAIMS).create(claim_body(namespace))
    compact_etcd()
    with (
        pytest.raises(errors.Gone),
        events.watch(namespace, resource_version=old, timeout_seconds=5) as w,
    ):
        list(w)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_an_unreachable_server_raises_api_unavailable(
    tmp_path: Path, cluster: Any, client: str
) -> None:
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    api = CLIENTS[client](str(kubeconfig))
    with pytest.raises(errors.ApiUnavailable):
        Resource(api, NODES).list()
