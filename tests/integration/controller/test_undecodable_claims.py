"""A claim the model cannot decode, allocated by another scheduler, against the real apiserver.

The third review's repro: opaque parameters nested 600 levels deep (about 4.5 KB, which the
apiserver stores). Decoding such a claim used to raise RecursionError, which the informer
handlers swallowed, so its device never entered drakit's allocated state and drakit's
scheduler gave the device to a second claim. The device must stay taken (fail closed), and
every reader of claims (the scheduler, the pool gauges, pool-status answers and ``drakit
devices``) must keep working and count the device as allocated.

Lists nest deeper within the apiserver's 10 KiB limit for parameters: 4,500 levels, past
every Python JSON parser, which made every LIST of claims fail (kubeapi.deepjson).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from controller_harness import Objects

from drakit.cli import main
from drakit.controller.metrics import _PoolCollector
from drakit.controller.poolstatus import pool_status
from drakit.kubeapi.deepjson import DeepJSON
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"n": value}
    return value


#: The review's 600 nested objects, and lists 4,500 deep (written as their text: no Python
#: JSON encoder nests that far).
SHAPES = {
    "objects-600": lambda: nested(600),
    "lists-4500": lambda: DeepJSON("[" * 4500 + "]" * 4500),
}


@pytest.fixture(params=sorted(SHAPES))
def deep_value(request: pytest.FixtureRequest) -> Any:
    return SHAPES[request.param]()


@pytest.fixture
def light_claims(cluster: LocalCluster, deep_value: Any) -> Iterator[DeepClaims]:
    """Claims through the light client (the one drakit's programs use), and the deep value.
    The deep claims are deleted afterwards: no namespace controller runs here, so they would
    outlive the test's namespace and show up in other tests' cluster-wide listings."""
    api = load_light_client(cluster.kubeconfig, qps=0)
    made = DeepClaims(Resource(api, RESOURCE_CLAIMS), deep_value, [])
    yield made
    for namespace in made.namespaces:
        with contextlib.suppress(NotFound):
            claim = made.claims.get("deep", namespace)
            made.claims.update({**claim, "metadata": {**claim["metadata"], "finalizers": []}})
            made.claims.delete("deep", namespace)
    api.close()


@dataclass(frozen=True)
class DeepClaims:
    claims: Resource
    deep: Any
    namespaces: list[str]


def allocate_deep_claim(light: DeepClaims, objects: Objects, namespace: str, node: str) -> None:
    """What kube-scheduler writes for a claim with deep opaque config: the allocation of
    ``dev-0`` with the claim's config copied into it."""
    device_class = objects.device_class()
    config = {
        "opaque": {
            "driver": objects.driver,
            "parameters": {"apiVersion": "v1", "kind": "Deep", "spec": light.deep},
        }
    }
    light.namespaces.append(namespace)
    claim = light.claims.create(
        {
            "metadata": {"name": "deep", "namespace": namespace},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}],
                    "config": [config],
                }
            },
        }
    )
    result = {"request": "gpu", "driver": objects.driver, "pool": node, "device": "dev-0"}
    claim["status"] = {
        "allocation": {
            "devices": {"results": [result], "config": [{"source": "FromClaim", **config}]}
        }
    }
    light.claims.update_status(claim)


def pod_scheduled(objects: Objects, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = (objects.pods.get(name, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_device_of_an_allocated_undecodable_claim_is_never_given_to_another_pod(
    objects, namespace, start_controller, eventually, light_claims
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=1)
    allocate_deep_claim(light_claims, objects, namespace, node)
    objects.claim(namespace, "other", objects.device_class(f"other-{uuid.uuid4().hex[:6]}"))
    start_controller(light_claims.claims.api)
    objects.pod(namespace, "second", claims={"gpu": "other"})
    condition = eventually(lambda: pod_scheduled(objects, namespace, "second"))
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "already allocated" in condition["message"]
    assert objects.pods.get("second", namespace)["spec"].get("nodeName") is None
    # The deep claim lets its device go: now, and only now, the pod runs.
    deep = light_claims.claims.get("deep", namespace)
    light_claims.claims.update_status({**deep, "status": {}})
    eventually(lambda: objects.pods.get("second", namespace)["spec"].get("nodeName") == node)


def test_pool_gauges_and_pool_status_count_the_device_of_an_undecodable_claim(
    objects, namespace, light_claims
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    allocate_deep_claim(light_claims, objects, namespace, node)
    slices = objects.slices.list().items
    claims = light_claims.claims.list(namespace).items

    collector = _PoolCollector(top_namespaces=5)
    collector.list_slices = lambda: slices
    collector.list_claims = lambda: claims
    devices = next(f for f in collector.collect() if f.name == "drakit_pool_devices")
    counts = {
        s.labels["state"]: s.value for s in devices.samples if s.labels["driver"] == objects.driver
    }
    assert counts["allocated"] == 1 and counts["free"] == 1

    status, _incomplete = pool_status({"driver": objects.driver}, slices, claims)
    (pool,) = status["pools"]
    assert (pool["totalDevices"], pool["allocatedDevices"]) == (2, 1)


def test_drakit_devices_shows_the_device_of_an_undecodable_claim_as_allocated(
    objects, namespace, cluster: LocalCluster, capsys: pytest.CaptureFixture[str], light_claims
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    allocate_deep_claim(light_claims, objects, namespace, node)
    code = main(["devices", "--kubeconfig", cluster.kubeconfig, "--driver", objects.driver])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith(node)]
    assert [r[3:6] for r in rows] == [
        ["dev-0", "allocated", f"{namespace}/deep"],
        ["dev-1", "free", "-"],
    ]
    assert f"ResourceClaim {namespace}/deep" in out + err
    assert "nested more than" in out + err
