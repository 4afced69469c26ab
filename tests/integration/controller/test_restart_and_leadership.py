"""The controller as a process: killed and restarted half-way through 500 pods, and two
leader-elected replicas with a failover. Each test runs on a control plane of its own, with
``--claim-generation=all`` (it touches every pod in the cluster)."""

from __future__ import annotations

import socket
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from controller_harness import ControllerProcess, Objects

from drakit.controller.naming import POD_CLAIM_NAME_ANNOTATION
from drakit.kubeapi.client import load_client
from drakit.kubeapi.pool import widen_connection_pool
from drakit.kubeapi.resources import LEASES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(ClusterConfig()) as cluster:
        yield cluster


def objects_for(cluster: LocalCluster) -> Objects:
    api = load_client(cluster.kubeconfig, qps=0)
    widen_connection_pool(api, 32)
    return Objects(api)


def new_namespace(objects: Objects) -> str:
    from kubernetes import client  # noqa: PLC0415

    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(objects.api).create_namespace({"metadata": {"name": name}})
    return name


def generated_claims(objects: Objects, namespace: str) -> list[Any]:
    return [
        c for c in objects.claims.list(namespace).items
        if POD_CLAIM_NAME_ANNOTATION in (c["metadata"].get("annotations") or {})
    ]  # fmt: skip


def test_500_pods_get_exactly_500_claims_when_the_controller_is_killed_half_way(
    private_cluster, tmp_path, eventually
):
    objects = objects_for(private_cluster)
    namespace = new_namespace(objects)
    objects.template(namespace, "tpl", objects.device_class())
    with ThreadPoolExecutor(16) as pool:
        pods = list(pool.map(
            lambda i: objects.pod(namespace, f"p{i}", templates={"gpu": "tpl"},
                                  scheduler="nobody"),
            range(500),
        ))  # fmt: skip
    args = ("--claim-generation", "all", "--workers", "16")
    first = ControllerProcess(private_cluster.kubeconfig, tmp_path / "first.log", *args)
    try:
        eventually(lambda: len(generated_claims(objects, namespace)) >= 250, timeout=180)
    finally:
        first.kill()
    half = len(generated_claims(objects, namespace))
    assert half < 500, "the first process finished before it was killed"
    port = free_port()
    second = ControllerProcess(
        private_cluster.kubeconfig, tmp_path / "second.log", *args,
        "--metrics-address", f"127.0.0.1:{port}",
    )  # fmt: skip
    try:

        def all_recorded() -> bool:
            return all(
                (p.get("status") or {}).get("resourceClaimStatuses")
                for p in objects.pods.list(namespace).items
            )

        eventually(all_recorded, timeout=180)
        metrics = scrape(port)
    finally:
        assert second.terminate() == 0
    created = metric_value(metrics, "dynamic_resource_allocation_resourceclaim_creates_total",
                           'admin_access="false",status="success"')  # fmt: skip
    assert 0 < created <= 500 - half  # the rest; a create sent just before SIGKILL may land late
    total = metric_value(metrics, "dynamic_resource_allocation_resource_claims",
                         'admin_access="false",allocated="false",'
                         'source="resource_claim_template"')  # fmt: skip
    assert total == 500
    claims = generated_claims(objects, namespace)
    owners = Counter(c["metadata"]["ownerReferences"][0]["uid"] for c in claims)
    assert len(claims) == 500, f"{len(claims)} claims (first run left {half})"
    assert set(owners) == {p["metadata"]["uid"] for p in pods}
    assert max(owners.values()) == 1
    names = {c["metadata"]["name"]: c["metadata"]["ownerReferences"][0]["uid"] for c in claims}
    for pod in objects.pods.list(namespace).items:
        (entry,) = pod["status"]["resourceClaimStatuses"]
        assert names[entry["resourceClaimName"]] == pod["metadata"]["uid"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def metric_value(text: str, name: str, labels: str) -> float:
    prefix = f"{name}{{{labels}}} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    raise AssertionError(f"{prefix!r} not in the metrics")


def lease_holder(leases: Resource) -> str:
    try:
        lease = leases.get("drakit-controller", "default")
    except Exception:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def test_two_replicas_one_acts_and_the_standby_takes_over_after_the_leader_is_killed(
    private_cluster, tmp_path, eventually
):
    objects = objects_for(private_cluster)
    namespace = new_namespace(objects)
    for i in range(4):
        objects.node(f"n{i}", devices=50)
    objects.template(namespace, "tpl", objects.device_class())
    leases = Resource(objects.api, LEASES)
    args = ("--claim-generation", "all", "--leader-elect", "--leader-elect-namespace", "default")
    replicas = {
        name: ControllerProcess(private_cluster.kubeconfig, tmp_path / f"{name}.log",
                                "--identity", name, *args)
        for name in ("a", "b")
    }  # fmt: skip
    try:
        holder = eventually(lambda: lease_holder(leases))
        leader = holder.split("_")[0]
        standby = "b" if leader == "a" else "a"
        for i in range(30):
            objects.pod(namespace, f"before{i}", templates={"gpu": "tpl"})
        eventually(
            lambda: all(p["spec"].get("nodeName") for p in objects.pods.list(namespace).items)
        )
        killed_at = time.monotonic()
        replicas[leader].kill()
        eventually(lambda: lease_holder(leases).split("_")[0] == standby, timeout=60)
        failover = time.monotonic() - killed_at
        for i in range(30):
            objects.pod(namespace, f"after{i}", templates={"gpu": "tpl"})
        eventually(
            lambda: all(p["spec"].get("nodeName") for p in objects.pods.list(namespace).items)
        )
    finally:
        for replica in replicas.values():
            replica.kill()
    print(f"failover after SIGKILL of the leader: {failover:.1f}s")
    claims = generated_claims(objects, namespace)
    owners = Counter(c["metadata"]["ownerReferences"][0]["uid"] for c in claims)
    assert len(claims) == 60 and max(owners.values()) == 1
    # The standby did nothing before it led: its first claim came after the leader died.
    standby_log = replicas[standby].log_lines()
    acted = [
        line for line in standby_log if line.get("msg") in ("Created ResourceClaim", "Bound pod")
    ]
    assert acted, "the standby never acted"
    assert all(line["pod"].split("/")[1].startswith("after") for line in acted)
    leader_log = replicas[leader].log_lines()
    assert any(line.get("msg") == "Bound pod" for line in leader_log)
