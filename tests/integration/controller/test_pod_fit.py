"""kube-scheduler's pod filters in drakit's scheduler, against a real apiserver: a pod too big
for every node stays Pending with kube-scheduler's reason and is never bound; one that fits
is bound; a pod using a feature drakit does not implement is refused by name."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from controller_harness import Objects

pytestmark = pytest.mark.integration


def small_node(objects: Objects, name: str, cpu: str = "2") -> None:
    """A Ready fake node (no devices) with ``cpu`` allocatable CPUs."""
    objects.node(name, devices=0, labels={"pod-fit": name})
    node = objects.nodes.get(name)
    room = {"cpu": cpu, "memory": "4Gi", "pods": "110"}
    objects.nodes.update_status({**node, "status": {**node["status"], "capacity": room,
                                                    "allocatable": room}})  # fmt: skip


def plain_pod(
    objects: Objects, namespace: str, name: str, cpu: str, *, node_selector: Any = None, **spec: Any
) -> None:
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": cpu}}}  # fmt: skip
    body: dict[str, Any] = {"schedulerName": "drakit", "containers": [container], **spec}
    if node_selector:
        body["nodeSelector"] = node_selector
    objects.pods.create({"metadata": {"name": name, "namespace": namespace}, "spec": body})


def scheduled_condition(objects: Objects, namespace: str, name: str) -> dict[str, Any] | None:
    status = objects.pods.get(name, namespace).get("status") or {}
    return next((c for c in status.get("conditions") or () if c["type"] == "PodScheduled"), None)


def node_of(objects: Objects, namespace: str, name: str) -> str | None:
    node: str | None = objects.pods.get(name, namespace)["spec"].get("nodeName")
    return node


def test_pod_requesting_64_cpus_stays_pending_with_insufficient_cpu_and_is_never_bound(
    objects, namespace, start_controller, eventually
):
    tag = uuid.uuid4().hex[:6]
    for i in range(2):
        small_node(objects, f"small-{i}-{tag}")
    start_controller()
    plain_pod(objects, namespace, "huge", "64")

    def refused() -> dict[str, Any] | None:
        condition = scheduled_condition(objects, namespace, "huge")
        return condition if condition and condition["status"] == "False" else None

    condition = eventually(refused)
    assert condition["reason"] == "Unschedulable"
    assert "Insufficient cpu" in condition["message"]
    assert node_of(objects, namespace, "huge") is None
    # A pod that fits is bound (after the huge one was refused: the refusal was final).
    plain_pod(objects, namespace, "fits", "1500m", node_selector={"pod-fit": f"small-0-{tag}"})
    assert eventually(lambda: node_of(objects, namespace, "fits")) == f"small-0-{tag}"
    assert node_of(objects, namespace, "huge") is None


def test_pods_fill_a_node_up_to_its_allocatable_and_no_further(
    objects, namespace, start_controller, eventually
):
    name = f"small-{uuid.uuid4().hex[:6]}"
    small_node(objects, name)
    start_controller()
    for i in range(3):
        plain_pod(objects, namespace, f"p{i}", "900m", node_selector={"pod-fit": name})

    def settled() -> dict[str, Any] | None:
        """The refusal of the third pod, once two are bound."""
        bound = [i for i in range(3) if node_of(objects, namespace, f"p{i}")]
        waiting = [scheduled_condition(objects, namespace, f"p{i}") for i in range(3)]
        refused = [c for c in waiting if c and c["status"] == "False"]
        return refused[0] if len(bound) == 2 and refused else None

    refused = eventually(settled)
    assert "Insufficient cpu" in refused["message"]


def test_pod_with_a_persistent_volume_claim_is_refused_naming_the_feature(
    objects, namespace, start_controller, eventually
):
    small_node(objects, f"small-{uuid.uuid4().hex[:6]}")
    start_controller()
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    plain_pod(objects, namespace, "pvc", "100m", volumes=[volume])

    def refused() -> dict[str, Any] | None:
        condition = scheduled_condition(objects, namespace, "pvc")
        return condition if condition and condition["status"] == "False" else None

    message = eventually(refused)["message"]
    assert "persistentVolumeClaim" in message and "not implement" in message
    assert node_of(objects, namespace, "pvc") is None
