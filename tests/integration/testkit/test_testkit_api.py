"""drakit.testing's KubeAPI against the real kube-apiserver: the verbs a driver's tests use,
the apiserver's refusals as APIError, dry runs, ServiceAccount identities, and claims whose
opaque parameters survive later patches."""

from __future__ import annotations

import uuid

import pytest

from drakit.testing import APIError, KubeAPI, claim, eventually, opaque_config

DRIVER = "npu.testkit.example.com"


def test_objects_are_created_read_listed_patched_and_deleted_as_plain_dicts(
    drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    pods = drakit_api.pods
    body = {
        "metadata": {"name": "p", "labels": {"app": "npu"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    created = pods.create(body, drakit_namespace)
    assert (created["apiVersion"], created["kind"]) == ("v1", "Pod")
    assert pods.get("p", drakit_namespace)["metadata"]["uid"] == created["metadata"]["uid"]
    assert [p["metadata"]["name"] for p in pods.list(drakit_namespace, labels="app=npu")] == ["p"]
    assert pods.list(drakit_namespace, labels="app=gpu") == []
    merged = pods.patch("p", {"metadata": {"labels": {"tier": "a"}}}, drakit_namespace)
    assert merged["metadata"]["labels"] == {"app": "npu", "tier": "a"}
    ops = [{"op": "remove", "path": "/metadata/labels/tier"}]
    assert pods.patch("p", ops, drakit_namespace, kind="json")["metadata"]["labels"] == {
        "app": "npu"
    }
    pods.delete("p", drakit_namespace)
    pods.wait_deleted("p", drakit_namespace)
    assert pods.find("p", drakit_namespace) is None
    pods.delete("p", drakit_namespace, missing_ok=True)


def test_refusals_carry_the_apiservers_code_reason_and_message(
    drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    claims = drakit_api.claims
    with pytest.raises(APIError) as missing:
        claims.get("nothing", drakit_namespace)
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")
    with pytest.raises(APIError) as deleted:
        claims.delete("nothing", drakit_namespace)
    assert deleted.value.code == 404
    claims.create(claim("c", DRIVER), drakit_namespace)
    with pytest.raises(APIError) as twice:
        claims.create(claim("c", DRIVER), drakit_namespace)
    assert (twice.value.code, twice.value.reason) == (409, "AlreadyExists")
    with pytest.raises(APIError) as invalid:
        claims.create(claim("d", DRIVER, request="Not_A_Name"), drakit_namespace)
    assert (invalid.value.code, invalid.value.reason) == (422, "Invalid")
    assert "spec.devices.requests[0].name" in invalid.value.message
    assert str(invalid.value).startswith("422 Invalid: ")


def test_a_dry_run_is_admitted_but_not_stored(drakit_api: KubeAPI, drakit_namespace: str) -> None:
    answer = drakit_api.claims.create(claim("c", DRIVER), drakit_namespace, dry_run=True)
    assert answer["metadata"]["name"] == "c"
    assert drakit_api.claims.find("c", drakit_namespace) is None


def test_a_claims_opaque_parameters_survive_a_json_patch_of_its_finalizers(
    drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    # Written compact, as Go writes JSON: the apiserver keeps the parameters' bytes and
    # refuses an update whose re-encoding of them differs (the spec is immutable).
    params = {"mode": "half", "limits": {"a": 1, "b": [1, 2]}}
    body = claim("c", DRIVER, config=[opaque_config(DRIVER, params)])
    claims = drakit_api.claims
    claims.create(body, drakit_namespace)
    add = [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}]
    patched = claims.patch("c", add, drakit_namespace, kind="json")
    assert patched["spec"]["devices"]["config"][0]["opaque"]["parameters"] == params
    claims.patch("c", [{"op": "remove", "path": "/metadata/finalizers"}], drakit_namespace,
                 kind="json")  # fmt: skip


def test_wait_returns_what_the_condition_returned_and_fails_naming_the_last_state(
    drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    drakit_api.claims.create(claim("c", DRIVER), drakit_namespace)
    uid = drakit_api.claims.wait("c", drakit_namespace, until=lambda c: c["metadata"]["uid"])
    assert uid == drakit_api.claims.get("c", drakit_namespace)["metadata"]["uid"]
    with pytest.raises(pytest.fail.Exception, match=r"status\.devices.*last seen"):
        drakit_api.claims.wait(
            "c", drakit_namespace, until=lambda c: c.get("status", {}).get("devices"),
            what="status.devices", timeout=0.5,
        )  # fmt: skip


def test_a_service_account_token_acts_with_that_accounts_rights_only(
    drakit_api: KubeAPI, drakit_namespace: str
) -> None:
    name = f"sa-{uuid.uuid4().hex[:6]}"
    drakit_api.service_accounts.create({"metadata": {"name": name}}, drakit_namespace)
    roles = drakit_api.objects("rbac.authorization.k8s.io/v1", "roles", "Role")
    roles.create({"metadata": {"name": name}, "rules": [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    ]}, drakit_namespace)  # fmt: skip
    bindings = drakit_api.objects("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding")
    bindings.create({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": drakit_namespace}],
    }, drakit_namespace)  # fmt: skip
    drakit_api.claims.create(claim("c", DRIVER), drakit_namespace)
    account = drakit_api.as_token(drakit_api.token(name, drakit_namespace))

    def reads() -> bool:
        try:
            return bool(account.claims.get("c", drakit_namespace))
        except APIError as err:
            assert err.code == 403, err  # RBAC not yet in the authorizer's cache
            return False

    eventually(reads, "the account's get on claims")
    with pytest.raises(APIError) as refused:
        account.claims.delete("c", drakit_namespace)
    assert refused.value.code == 403
    assert f"system:serviceaccount:{drakit_namespace}:{name}" in refused.value.message


def test_published_devices_are_read_from_the_drivers_slices_of_a_node(
    drakit_api: KubeAPI,
) -> None:
    node = f"n-{uuid.uuid4().hex[:6]}"
    drakit_api.nodes.create({"metadata": {"name": node}})
    try:
        drakit_api.slices.create({
            "metadata": {"name": f"{node}-s"},
            "spec": {"driver": DRIVER, "nodeName": node, "devices": [{"name": "npu-0"}],
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}},
        })  # fmt: skip
        assert list(drakit_api.published_devices(DRIVER, node)) == ["npu-0"]
        assert drakit_api.published_devices("other.example.com", node) == {}
    finally:
        drakit_api.slices.delete(f"{node}-s", missing_ok=True)
        drakit_api.nodes.delete(node)
