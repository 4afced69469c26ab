"""A claim the model cannot decode, allocated by another scheduler, against the real apiserver.

The third review's repro: opaque parameters nested 600 levels deep (about 4.5 KB, which the
apiserver stores). Decoding such a claim used to raise RecursionError, which the informer
handlers swallowed, so its device never entered drakit's allocated state and drakit's
scheduler gave the device to a second claim. The device must stay taken (fail closed), and
every reader of claims (the scheduler, the pool gauges, pool-status answers and ``drakit
devices``) must keep working and count the device as allocated.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from controller_harness import Objects

from controller.metrics import _PoolCollector
from controller.poolstatus import pool_status
from drakit.cli import main
from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

DEPTH = 600


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": True}
    for _ in range(depth):
        value = {"n": value}
    return value


def allocate_deep_claim(objects: Objects, namespace: str, device_class: str, node: str) -> None:
    """What kube-scheduler writes for a claim with deep opaque config: the allocation of
    ``dev-0`` with the claim's config copied into it."""
    config = {
        "opaque": {
            "driver": objects.driver,
            "parameters": {"apiVersion": "v1", "kind": "Deep", "spec": nested(DEPTH)},
        }
    }
    claim = objects.claims.create(
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
    objects.claims.update_status(claim)


def pod_scheduled(objects: Objects, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = (objects.pods.get(name, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_device_of_an_allocated_undecodable_claim_is_never_given_to_another_pod(
    objects, namespace, start_controller, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=1)
    device_class = objects.device_class()
    allocate_deep_claim(objects, namespace, device_class, node)
    objects.claim(namespace, "other", device_class)
    start_controller()
    objects.pod(namespace, "second", claims={"gpu": "other"})
    condition = eventually(lambda: pod_scheduled(objects, namespace, "second"))
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "already allocated" in condition["message"]
    assert objects.pods.get("second", namespace)["spec"].get("nodeName") is None
    # The deep claim lets its device go: now, and only now, the pod runs.
    deep = objects.claims.get("deep", namespace)
    objects.claims.update_status({**deep, "status": {}})
    eventually(lambda: objects.pods.get("second", namespace)["spec"].get("nodeName") == node)


def test_pool_gauges_and_pool_status_count_the_device_of_an_undecodable_claim(objects, namespace):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    allocate_deep_claim(objects, namespace, objects.device_class(), node)
    slices = objects.slices.list().items
    claims = objects.claims.list(namespace).items

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
    objects, namespace, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    allocate_deep_claim(objects, namespace, objects.device_class(), node)
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
