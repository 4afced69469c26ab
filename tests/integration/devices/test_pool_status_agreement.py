"""``drakit devices --summary`` agrees with Kubernetes' own pool status (KEP-5677).

A control plane of its own with the alpha API on (feature gate DRAResourcePoolStatus,
resource.k8s.io/v1alpha3 served) and kube-controller-manager running only its
resourcepoolstatusrequest-controller: a ResourcePoolStatusRequest for the workload's driver
is answered by kube-controller-manager v1.37.2, and its counts must equal drakit's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from devices_workload import Workload

from drakit.cli import main
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.cluster import DEFAULT_FEATURE_GATES
from kubeapi.client import load_client
from kubeapi.resources import NAMESPACES, RESOURCE_POOL_STATUS_REQUESTS, Resource

pytestmark = pytest.mark.integration

POOL_STATUS_GATES = f"{DEFAULT_FEATURE_GATES},DRAResourcePoolStatus=true"
POOL_STATUS_RUNTIME_CONFIG = "--runtime-config=resource.k8s.io/v1alpha3=true"
# Only keeps a broken test from hanging; nothing here measures time.
EVENTUALLY = 120.0


@pytest.fixture(scope="module")
def pool_status_cluster() -> Iterator[LocalCluster]:
    config = ClusterConfig(
        feature_gates=POOL_STATUS_GATES,
        extra_apiserver_args=(POOL_STATUS_RUNTIME_CONFIG,),
        with_controller_manager=True,
        controllers="resourcepoolstatusrequest-controller",
    )
    with LocalCluster(config) as cluster:
        yield cluster


@pytest.fixture
def kcm_workload(pool_status_cluster: LocalCluster) -> Iterator[Workload]:
    api = load_client(pool_status_cluster.kubeconfig, qps=0)
    namespaces = Resource(api, NAMESPACES)
    namespace = namespaces.create({"metadata": {"generateName": "pool-status-"}})
    w = Workload(api, namespace["metadata"]["name"])
    try:
        w.create()
        yield w
    finally:
        w.delete()
        namespaces.delete(namespace["metadata"]["name"])


def answered_request(api: Any, driver: str) -> dict[str, Any]:
    requests = Resource(api, RESOURCE_POOL_STATUS_REQUESTS)
    created = requests.create(
        {"metadata": {"generateName": "drakit-agreement-"}, "spec": {"driver": driver}}
    )
    name = created["metadata"]["name"]
    deadline = time.monotonic() + EVENTUALLY
    try:
        while True:
            current = requests.get(name)
            if current.get("status"):
                return current
            assert time.monotonic() < deadline, "kube-controller-manager never answered"
            time.sleep(0.2)
    finally:
        requests.delete(name)


def test_summary_agrees_with_kube_controller_manager_pool_status(
    pool_status_cluster: LocalCluster, kcm_workload: Workload, capsys: pytest.CaptureFixture[str]
) -> None:
    api = load_client(pool_status_cluster.kubeconfig, qps=0)
    status = answered_request(api, kcm_workload.driver)["status"]
    assert [c["type"] for c in status["conditions"]] == ["Complete"]

    kubeconfig, driver = pool_status_cluster.kubeconfig, kcm_workload.driver
    code = main(
        ["devices", "--kubeconfig", kubeconfig, "--driver", driver, "--summary", "-o", "json"]
    )
    assert code == 0
    ours = {p["pool"]: p for p in json.loads(capsys.readouterr().out)["items"]}

    theirs = {p["poolName"]: p for p in status["pools"]}
    assert status["poolCount"] == len(ours) == 3
    for pool, upstream in theirs.items():
        mine = ours[pool]
        assert (
            upstream.get("nodeName"),
            upstream["resourceSliceCount"],
            upstream["totalDevices"],
            upstream["allocatedDevices"],
            upstream["unavailableDevices"],
            upstream["availableDevices"],
        ) == (
            mine["node"],
            mine["slices"],
            mine["devices"],
            mine["allocated"],
            mine["tainted"],
            mine["free"],
        ), pool
    shareable = theirs["node-b-shared"]["shareableSummary"]
    assert [(c["name"], c["total"], c["consumed"]) for c in shareable["capacity"]] == [
        (c["name"], c["total"], c["used"]) for c in ours["node-b-shared"]["capacity"]
    ]
