"""``drakit devices --summary`` agrees with Kubernetes' own pool status (KEP-5677), and
drakit's controller in ``all`` mode answers ResourcePoolStatusRequests as
kube-controller-manager does.

Two control planes of their own with the alpha API on (feature gate DRAResourcePoolStatus,
resource.k8s.io/v1alpha3 served): one runs kube-controller-manager v1.37.2 with only its
resourcepoolstatusrequest-controller, the other no kube-controller-manager but drakit's
controller with --claim-generation all. The same workload in both; the answers must match
each other and ``drakit devices --summary``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from devices_workload import Workload
from helpers.waiting import eventually

from drakit.cli import main
from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NAMESPACES, RESOURCE_POOL_STATUS_REQUESTS, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.cluster import DEFAULT_FEATURE_GATES

pytestmark = pytest.mark.integration

POOL_STATUS_GATES = f"{DEFAULT_FEATURE_GATES},DRAResourcePoolStatus=true"
POOL_STATUS_RUNTIME_CONFIG = "--runtime-config=resource.k8s.io/v1alpha3=true"
# Only keeps a broken test from hanging; nothing here measures time.
EVENTUALLY = 120.0


def pool_status_config(*, with_kcm: bool) -> ClusterConfig:
    return ClusterConfig(
        feature_gates=POOL_STATUS_GATES,
        extra_apiserver_args=(POOL_STATUS_RUNTIME_CONFIG,),
        with_controller_manager=with_kcm,
        controllers="resourcepoolstatusrequest-controller",
    )


@pytest.fixture(scope="module")
def pool_status_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(pool_status_config(with_kcm=True)) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def cluster_without_kcm() -> Iterator[LocalCluster]:
    with LocalCluster(pool_status_config(with_kcm=False)) as cluster:
        yield cluster


@contextlib.contextmanager
def workload_in(cluster: LocalCluster) -> Iterator[Workload]:
    api = load_client(cluster.kubeconfig, qps=0)
    namespaces = Resource(api, NAMESPACES)
    namespace = namespaces.create({"metadata": {"generateName": "pool-status-"}})
    w = Workload(api, namespace["metadata"]["name"])
    try:
        w.create()
        yield w
    finally:
        w.delete()
        namespaces.delete(namespace["metadata"]["name"])


@pytest.fixture
def kcm_workload(pool_status_cluster: LocalCluster) -> Iterator[Workload]:
    with workload_in(pool_status_cluster) as w:
        yield w


def answered_request(api: Any, driver: str) -> dict[str, Any]:
    requests = Resource(api, RESOURCE_POOL_STATUS_REQUESTS)
    created = requests.create(
        {"metadata": {"generateName": "drakit-agreement-"}, "spec": {"driver": driver}}
    )
    name = created["metadata"]["name"]

    def answered() -> dict[str, Any] | None:
        current = requests.get(name)
        return current if current.get("status") else None

    try:
        answer: dict[str, Any] = eventually(
            answered, f"kube-controller-manager's answer to {name}", EVENTUALLY
        )
        return answer
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
            # upstream counts a partition whose shared counters are used up as available
            mine["free"] + mine["exhausted"],
        ), pool
    shareable = theirs["node-b-shared"]["shareableSummary"]
    assert [(c["name"], c["total"], c["consumed"]) for c in shareable["capacity"]] == [
        (c["name"], c["total"], c["used"]) for c in ours["node-b-shared"]["capacity"]
    ]


def comparable(status: dict[str, Any], driver: str) -> dict[str, Any]:
    """A status without what differs between two answers: times and the driver's name."""
    text = json.dumps(status).replace(driver, "DRIVER")
    out: dict[str, Any] = json.loads(text)
    for condition in out["conditions"]:
        condition.pop("lastTransitionTime")
    return out


def test_drakit_controller_in_all_mode_answers_like_kube_controller_manager(
    pool_status_cluster: LocalCluster, kcm_workload: Workload, cluster_without_kcm: LocalCluster
) -> None:
    kcm_api = load_client(pool_status_cluster.kubeconfig, qps=0)
    kcm_answer = answered_request(kcm_api, kcm_workload.driver)["status"]

    api = load_client(cluster_without_kcm.kubeconfig, qps=0)
    config = ControllerConfig(
        scheduler_name="drakit-pool-status", claim_generation=ClaimGeneration.ALL, workers=2
    )
    controller = Controller(api, config)
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    # The workload first: the controller's caches list it before it answers anything.
    with workload_in(cluster_without_kcm) as w:
        thread.start()
        try:
            assert controller.started.wait(60)
            drakit_answer = answered_request(api, w.driver)["status"]
        finally:
            stop.set()
            thread.join(60)
    assert comparable(drakit_answer, w.driver) == comparable(kcm_answer, kcm_workload.driver)
