"""Differential test of the pod filters: kube-scheduler and drakit decide the same pods.

On one control plane running the real kube-scheduler, fake nodes (allocatable, zones, a
taint, an extended resource) and pods already bound to them (requests, a host port, labels,
a required anti-affinity) make a fixed state. Each generated pod (cpu, memory, an extended
resource, init containers, host ports, pod affinity and anti-affinity, topology spread,
tolerations) is decided against that state by kube-scheduler and then by drakit, one pod at
a time; after each decision the pod is deleted again. A scheduler sees the deletion before
the next pod: both take pod events from one watch, in order.

Per pod the two must agree on feasibility. When both bind to different nodes (scoring
differs), kube-scheduler is asked again with the pod pinned to drakit's node: it must accept
that node too.
"""

from __future__ import annotations

import contextlib
import copy
import random
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from controller_harness import Objects

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import NotFound

pytestmark = [pytest.mark.integration, pytest.mark.differential]

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
WIDGET = "example.com/widget"
CANDIDATES = 30
SEED = 30_2


@dataclass
class Outcome:
    node: str | None  # None: unschedulable
    message: str


def make_node(objects: Objects, name: str, zone: str, room: dict[str, str],
              taints: list[dict[str, str]] | None = None) -> None:  # fmt: skip
    objects.node(name, devices=0, labels={ZONE: zone, HOSTNAME: name})
    node = objects.nodes.get(name)
    objects.nodes.update_status(
        {**node, "status": {**node["status"], "capacity": room, "allocatable": room}}
    )
    if taints:
        node = objects.nodes.get(name)
        node["spec"]["taints"] = [*(node["spec"].get("taints") or ()), *taints]
        objects.nodes.update(node)


def container(name: str, cpu: str, memory: str | None = None, widgets: int = 0,
              ports: tuple[int, ...] = ()) -> dict[str, Any]:  # fmt: skip
    requests: dict[str, str] = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {"requests": requests}
    if widgets:
        requests[WIDGET] = str(widgets)
        resources["limits"] = {WIDGET: str(widgets)}
    body: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10",
                            "resources": resources}  # fmt: skip
    if ports:
        body["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    return body


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def required(kind: str, app: str, key: str) -> dict[str, Any]:
    """``{kind: {required...: [term(app, key)]}}`` for kind podAffinity/podAntiAffinity."""
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term(app, key)]}}


def existing_pods(nodes: list[str]) -> list[dict[str, Any]]:
    """Pods bound to the nodes before any candidate comes."""
    n0, n1, n2 = nodes[:3]
    loner = required("podAntiAffinity", "web", HOSTNAME)
    return [
        {"name": "e0", "app": "web", "node": n0,
         "containers": [container("c", "1", ports=(8080,))]},
        {"name": "e1", "app": "db", "node": n1, "containers": [container("c", "2")],
         "affinity": loner},
        {"name": "e2", "app": "web", "node": n2,
         "containers": [container("c", "1", "1Gi", widgets=1)]},
        {"name": "e3", "app": "cache", "node": n1, "containers": [container("c", "100m")]},
    ]  # fmt: skip


def candidate(rng: random.Random, index: int) -> dict[str, Any]:
    """A random pod spec (with its labels under ``app``)."""
    app = rng.choice(["web", "db", "cache", "batch"])
    cpu = rng.choice(["100m", "250m", "500m", "1", "1500m", "3", "64"])
    memory = rng.choice([None, None, "256Mi", "1Gi", "3Gi"])
    ports = rng.choice([(), (), (), (8080,), (9090,)])
    widgets = rng.choice([0, 0, 0, 0, 1, 2])
    pod: dict[str, Any] = {
        "name": f"c{index}",
        "app": app,
        "containers": [container("c", cpu, memory, widgets, ports)],
    }
    if rng.random() < 0.25:
        pod["initContainers"] = [container("init", rng.choice(["2", "5"]))]
    affinity = rng.choice([
        None, None,
        required("podAffinity", "db", HOSTNAME),
        required("podAffinity", "web", ZONE),
        required("podAffinity", app, ZONE),
        required("podAntiAffinity", "web", HOSTNAME),
        required("podAntiAffinity", "web", ZONE),
    ])  # fmt: skip
    if affinity:
        pod["affinity"] = affinity
    if rng.random() < 0.3:
        pod["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": rng.choice([ZONE, HOSTNAME]),
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": rng.choice([app, "web"])}},
        }]  # fmt: skip
    if rng.random() < 0.3:
        pod["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return pod


def manifest(pod: dict[str, Any], namespace: str, name: str, scheduler: str | None,
             pin: str | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"containers": copy.deepcopy(pod["containers"])}
    for key in ("initContainers", "affinity", "topologySpreadConstraints", "tolerations"):
        if key in pod:
            spec[key] = copy.deepcopy(pod[key])
    if scheduler:
        spec["schedulerName"] = scheduler
    if pod.get("node"):
        spec["nodeName"] = pod["node"]
    if pin:
        # Only this node; for spread, count every node as before (the pod has no affinity
        # of its own, so Ignore counts exactly what Honor counted).
        match = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pin]}]}
        spec.setdefault("affinity", {})["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [match]}
        }
        for constraint in spec.get("topologySpreadConstraints") or ():
            constraint["nodeAffinityPolicy"] = "Ignore"
    labels = {"app": pod["app"]}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def decide(objects: Objects, eventually: Any, body: dict[str, Any]) -> Outcome:
    """Create the pod, wait for its scheduler's decision, delete the pod again."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    objects.pods.create(body)

    def decided() -> Outcome | None:
        pod = objects.pods.get(name, namespace)
        node = pod["spec"].get("nodeName")
        if node:
            return Outcome(node, "")
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return Outcome(None, c.get("message", ""))
        return None

    outcome: Outcome = eventually(decided, what=f"a decision on {name}", timeout=30)
    objects.pods.delete(name, namespace, grace_period_seconds=0)

    def gone() -> bool:
        try:
            objects.pods.get(name, namespace)
        except NotFound:
            return True
        return False

    eventually(gone, what=f"{name} deleted")
    return outcome


def test_drakit_and_kube_scheduler_agree_on_which_pods_fit(
    cluster_with_scheduler, start_controller, eventually
):
    api = load_client(cluster_with_scheduler.kubeconfig, qps=0)
    objects = Objects(api)
    namespace = f"diff-{uuid.uuid4().hex[:8]}"
    from kubernetes import client  # noqa: PLC0415

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        tag = uuid.uuid4().hex[:5]
        nodes = [f"d{i}-{tag}" for i in range(5)]
        make_node(objects, nodes[0], "a", {"cpu": "2", "memory": "4Gi", "pods": "110"})
        make_node(objects, nodes[1], "a", {"cpu": "4", "memory": "8Gi", "pods": "3"})
        make_node(objects, nodes[2], "b", {"cpu": "8", "memory": "2Gi", "pods": "110",
                                           WIDGET: "2"})  # fmt: skip
        make_node(objects, nodes[3], "b", {"cpu": "1", "memory": "16Gi", "pods": "110"},
                  taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])  # fmt: skip
        make_node(objects, nodes[4], "c", {"cpu": "4", "memory": "8Gi", "pods": "110"})
        for pod in existing_pods(nodes):
            objects.pods.create(manifest(pod, namespace, pod["name"], None))
        start_controller(api)
        rng = random.Random(SEED)
        disagreements = []
        feasible = 0
        for index in range(CANDIDATES):
            pod = candidate(rng, index)
            theirs = decide(objects, eventually, manifest(pod, namespace, f"k{index}", None))
            ours = decide(objects, eventually, manifest(pod, namespace, f"d{index}", "drakit"))
            feasible += theirs.node is not None
            if (theirs.node is None) != (ours.node is None):
                disagreements.append((pod, theirs, ours))
            elif ours.node is not None and ours.node != theirs.node:
                pinned = manifest(pod, namespace, f"p{index}", None, pin=ours.node)
                check = decide(objects, eventually, pinned)
                if check.node != ours.node:
                    disagreements.append((pod, check, ours))
        # The generated pods exercise both answers (the seed is fixed: this is a check of
        # the generator, not of the schedulers).
        assert 5 <= feasible <= CANDIDATES - 5
        assert not disagreements, "\n".join(
            f"{pod}: kube-scheduler {k.node or k.message!r}, drakit {d.node or d.message!r}"
            for pod, k, d in disagreements
        )
    finally:
        with contextlib.suppress(Exception):
            core.delete_namespace(namespace)
        objects.cleanup()
