"""Scoped claim generation beside a real kube-controller-manager (leader-elected, as in a real
cluster), reached through a loopback chaos proxy: drakit never generates while
kube-controller-manager leads, takes over when it is gone, and hands back when it returns.

Soak seed 7 (``make soak DURATION=30m SEED=7``) found the race this prevents: with its API
connection slowed, kube-controller-manager recorded its own claim in the status of a pod that
drakit had already given a claim, allocated, bound and started.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from soak.chaosproxy import ChaosProxy

from drakit.controller.naming import FIELD_MANAGER
from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.pool import widen_connection_pool
from drakit.kubeapi.resources import LEASES, Resource
from drakit.localcluster.cluster import ClusterConfig, LocalCluster

pytestmark = pytest.mark.integration

KCM = "kube-controller-manager"


@pytest.fixture(scope="module")
def cluster(kube_version: str) -> Iterator[LocalCluster]:
    """This module's own control plane: the session's has no kube-controller-manager."""
    with LocalCluster(ClusterConfig(kube_version=kube_version)) as c:
        yield c


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> Any:
    """A client of this module's cluster (overrides the session's)."""
    client = load_client(cluster.kubeconfig, qps=0)
    widen_connection_pool(client, 32)
    return client


@pytest.fixture(scope="module")
def kcm_proxy(cluster: LocalCluster) -> Iterator[ChaosProxy]:
    """kube-controller-manager, started behind a chaos proxy of its own."""
    port = int(cluster.server.rsplit(":", 1)[1])
    proxy = ChaosProxy("127.0.0.1", port).start()
    kubeconfig = cluster.work_dir / "kcm-through-proxy.yaml"
    cluster.write_kubeconfig(kubeconfig, f"https://127.0.0.1:{proxy.port}")
    cluster.start_controller_manager(str(kubeconfig))
    yield proxy
    proxy.stop()


def creators(claim: dict[str, Any]) -> set[str]:
    """Field managers of the claim's main resource (not its status): who created it."""
    return {
        str(entry.get("manager"))
        for entry in claim["metadata"].get("managedFields") or ()
        if not entry.get("subresource")
    }


def recorded(objects: Any, namespace: str, pod: str) -> dict[str, str]:
    status = objects.pods.get(pod, namespace).get("status") or {}
    return {e["name"]: e["resourceClaimName"] for e in status.get("resourceClaimStatuses") or ()}


def the_recorded_claim(objects: Any, namespace: str, pod: str, eventually: Any) -> Any:
    """The pod's one generated claim, once recorded; fails when the pod controls others."""
    statuses = eventually(lambda: recorded(objects, namespace, pod), timeout=90)
    claims = objects.pod_claims(namespace, pod)
    assert [c["metadata"]["name"] for c in claims] == [statuses["gpu"]]
    return claims[0]


@pytest.fixture
def beside_leading_kcm(objects, namespace, start_controller, eventually, kcm_proxy) -> None:
    """A template, kube-controller-manager leading, and a scoped drakit (1 s grace)."""
    objects.template(namespace, "tpl", objects.device_class())
    eventually(lambda: objects_lease_held(objects), what="kube-controller-manager to lead")
    start_controller(scoped_generation_grace=1.0)


def left_to_leading_kcm(caplog: pytest.LogCaptureFixture, pod: str) -> bool:
    """drakit has judged ``pod`` after its grace period and left it to kube-controller-manager."""
    return any(
        getattr(r, "pod", None) == pod and "leading kube-controller-manager" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.usefixtures("beside_leading_kcm")
def test_a_slow_controller_manager_keeps_its_pods_and_drakit_generates_nothing(
    objects, namespace, eventually, kcm_proxy, caplog
):
    kcm_proxy.set_mode("delay", delay=1.0)  # every chunk both ways: its Lease is still renewed
    try:
        with caplog.at_level(logging.DEBUG, logger="drakit.controller.handover"):
            objects.pod(namespace, "p", templates={"gpu": "tpl"})
            # Past its grace period drakit judged the pod (before the fix it generated then),
            # while kube-controller-manager was still too slow to have recorded a claim.
            eventually(lambda: left_to_leading_kcm(caplog, f"{namespace}/p"),
                       what="drakit to leave the pod to kube-controller-manager")  # fmt: skip
    finally:
        kcm_proxy.set_mode("pass")
    claim = the_recorded_claim(objects, namespace, "p", eventually)
    assert FIELD_MANAGER not in creators(claim)


@pytest.mark.usefixtures("beside_leading_kcm")
def test_drakit_generates_once_the_controller_manager_is_gone_and_hands_back_when_it_returns(
    cluster, objects, namespace, eventually
):
    cluster.component(KCM).kill()
    try:
        objects.pod(namespace, "while-gone", templates={"gpu": "tpl"})
        # Its Lease (15 s) must run out first: drakit cannot tell dead from slow before.
        claim = the_recorded_claim(objects, namespace, "while-gone", eventually)
        assert FIELD_MANAGER in creators(claim)
    finally:
        cluster.restart(KCM)
    eventually(lambda: objects_lease_held(objects), what="kube-controller-manager to lead again")
    objects.pod(namespace, "after", templates={"gpu": "tpl"})
    claim = the_recorded_claim(objects, namespace, "after", eventually)
    assert FIELD_MANAGER not in creators(claim)


def objects_lease_held(objects: Any) -> bool:
    """kube-controller-manager's Lease names a holder and was renewed in the last 5 s."""
    try:
        lease = Resource(objects.api, LEASES).get(KCM, "kube-system")
    except NotFound:
        return False
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity") or not spec.get("renewTime"):
        return False
    renewed = dt.datetime.fromisoformat(str(spec["renewTime"]).replace("Z", "+00:00"))
    return (dt.datetime.now(dt.UTC) - renewed).total_seconds() < 5
