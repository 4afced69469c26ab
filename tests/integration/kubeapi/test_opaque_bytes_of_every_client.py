"""Every API client drakit builds writes opaque parameters in bytes the apiserver's patches
keep (real apiserver).

The apiserver keeps a RawExtension's bytes as received and, to apply any patch, re-encodes
the stored claim as Go does (compact, ``<`` ``>`` ``&`` escaped), then compares ``spec`` and
``status.allocation`` byte for byte. A claim or allocation written in another form (the
kubernetes package's ``json.dumps`` with ``", "`` separators) could then never be patched
again, by anyone: the node plugin's device status write was refused with "status.allocation:
Invalid value: null: field cannot be modified once set" for every claim with opaque config
that ``drakit.testing.allocate`` (the full client) had written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.rawclaims import raw_claim_text
from kubernetes import client as k8s

from drakit.kubeapi.client import load_client
from drakit.kubeapi.jsonpatch import guarded_patch
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

DRIVER = "gpu.example.com"
PARAMETERS = {"z": "<b> & caf\u00e9 \u2028", "n": [1, 2.5, None], "a": {"b": True}}
#: What the apiserver serves for PARAMETERS once they were written in Go's form.
STORED = (
    '"parameters":{"z":"\\u003cb\\u003e \\u0026 caf\u00e9 \\u2028","n":[1,2.5,null],"a":{"b":true}}'
)

CLIENTS: dict[str, Callable[[str], Any]] = {
    "light client": load_light_client,
    "light client, orjson": lambda kubeconfig: load_light_client(kubeconfig, fast_json=True),
    "full client (load_client)": lambda kubeconfig: load_client(kubeconfig, qps=0),
}


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest, cluster: LocalCluster) -> Iterator[Any]:
    api = CLIENTS[request.param](cluster.kubeconfig)
    yield api
    api.close()


def claim_body(name: str) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}
    config = [{"opaque": {"driver": DRIVER, "parameters": PARAMETERS}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request], "config": config}},
    }


def allocated(claim: dict[str, Any]) -> dict[str, Any]:
    """``claim`` with the allocation kube-scheduler would write (its config copied from the
    decoded spec, re-encoded by the client: as ``drakit.testing.allocate`` does)."""
    configs = claim["spec"]["devices"]["config"]
    result = {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [result],
                "config": [{**c, "source": "FromClaim"} for c in configs],
            }
        }
    }
    return claim


def test_a_claim_and_allocation_written_by_a_drakit_client_can_be_patched_afterwards(
    client: Any, namespace: str
) -> None:
    claims = Resource(client, RESOURCE_CLAIMS)
    stored = claims.update_status(allocated(claims.create(claim_body("c"), namespace)))
    entry = {"driver": DRIVER, "pool": "node-a", "device": "gpu-0", "conditions": []}

    status_ops = [{"op": "add", "path": "/status/devices", "value": [entry]}]
    stored = guarded_patch(claims, stored, status_ops, subresource="status")
    finalizer_ops = [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}]
    stored = guarded_patch(claims, stored, finalizer_ops)

    assert stored["status"]["devices"][0]["device"] == "gpu-0"
    assert stored["metadata"]["finalizers"] == ["example.com/x"]
    assert raw_claim_text(client, namespace, "c").count(STORED) == 2  # spec and allocation


def test_the_full_clients_generated_apis_write_bodies_the_apiserver_can_patch(
    cluster: LocalCluster, namespace: str
) -> None:
    # The generated typed APIs reach the same REST layer as drakit's Resource.
    api = load_client(cluster.kubeconfig, qps=0)
    try:
        k8s.ResourceV1Api(api).create_namespaced_resource_claim(namespace, claim_body("typed"))
        claims = Resource(api, RESOURCE_CLAIMS)
        ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
        patched = guarded_patch(claims, claims.get("typed", namespace), ops)
        assert patched["metadata"]["labels"] == {"a": "b"}
        assert STORED in raw_claim_text(api, namespace, "typed")
    finally:
        api.close()
