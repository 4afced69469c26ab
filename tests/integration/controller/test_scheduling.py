"""Allocation and binding against a real apiserver: the finalizer race, shared claims,
unschedulable pods, node selection, and scoped mode beside the real kube-scheduler."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from controller_harness import ClaimHistory, Objects

from drakit.controller.claimwrites import ClaimWriteError, ClaimWriter
from drakit.controller.config import ClaimGeneration
from drakit.controller.naming import FIELD_MANAGER, FINALIZER
from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import Conflict, Invalid
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource

pytestmark = pytest.mark.integration


def bound(objects: Any, namespace: str, name: str) -> str | None:
    node: str | None = objects.pods.get(name, namespace)["spec"].get("nodeName")
    return node


def reserved_uids(claim: Any) -> set[str]:
    return {r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or ()}


class RecordingClaims(Resource):
    """The claims resource, recording the status writes the apiserver refused (the written
    claim or patch, and the error)."""

    def __init__(self, api: Any) -> None:
        super().__init__(api, RESOURCE_CLAIMS)
        self.refused: list[tuple[Any, Exception]] = []

    def update(self, obj: Any, **kwargs: Any) -> Any:
        try:
            return super().update(obj, **kwargs)
        except (Invalid, Conflict) as err:
            self.refused.append((obj, err))
            raise

    def patch(self, name: str, patch: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        try:
            return super().patch(name, patch, namespace, **kwargs)
        except (Invalid, Conflict) as err:
            self.refused.append((patch, err))
            raise


def test_finalizer_removed_between_computing_and_writing_an_allocation_is_never_unprotected(
    objects, api, namespace
):
    """The seed race: the lifecycle has deallocated but not yet removed the finalizer; the
    allocation is computed from that copy (finalizer present, so it is not added); the
    finalizer goes; then the allocation is written. It must be refused and redone with the
    finalizer added again."""
    claim = objects.claim(namespace, "c", objects.device_class())
    claims = RecordingClaims(api)
    writer = ClaimWriter(claims)
    computed_from = writer.add_finalizer(claim)  # what the scheduler saw: finalizer present
    history = ClaimHistory(objects.claims, namespace, "c")
    writer.remove_finalizer(objects.claims.get("c", namespace))  # the lifecycle finishes
    result = {"request": "gpu", "driver": objects.driver, "pool": "p", "device": "d0"}
    allocation = {"devices": {"results": [result]}}
    consumer = {"resource": "pods", "name": "p", "uid": str(uuid.uuid4())}
    written = writer.allocate_and_reserve(computed_from, allocation, consumer)
    assert len(claims.refused) == 1, "the allocation computed from the stale copy was written"
    stale_write, error = claims.refused[0]
    assert isinstance(error, Conflict)  # refused for its resourceVersion: the finalizer went
    assert stale_write["status"]["allocation"] == allocation
    assert FINALIZER in stale_write["metadata"]["finalizers"]
    assert FINALIZER in written["metadata"]["finalizers"]
    assert written["status"]["allocation"] == allocation
    assert written["status"]["reservedFor"] == [consumer]
    history.stop()
    for version in history.versions:
        if (version.get("status") or {}).get("allocation"):
            assert FINALIZER in (version["metadata"].get("finalizers") or [])


def test_concurrent_reservations_of_one_claim_from_stale_copies_lose_no_entry(objects, namespace):
    claim = objects.claim(namespace, "c", objects.device_class())
    writer = ClaimWriter(objects.claims)
    result = {"request": "gpu", "driver": objects.driver, "pool": "p", "device": "d0"}
    first = {"resource": "pods", "name": "p0", "uid": str(uuid.uuid4())}
    stale = writer.allocate_and_reserve(claim, {"devices": {"results": [result]}}, first)
    consumers = [
        {"resource": "pods", "name": f"p{i}", "uid": str(uuid.uuid4())} for i in range(1, 40)
    ]
    threads = [threading.Thread(target=writer.reserve, args=(stale, c)) for c in consumers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = objects.claims.get("c", namespace)
    assert reserved_uids(final) == {c["uid"] for c in [first, *consumers]}


def test_100_pods_sharing_one_claim_all_end_up_in_reserved_for(
    objects, namespace, start_controller, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=1)
    objects.claim(namespace, "shared", objects.device_class())
    start_controller(workers=16)
    pods = [objects.pod(namespace, f"p{i}", claims={"gpu": "shared"}) for i in range(100)]
    eventually(lambda: len(reserved_uids(objects.claims.get("shared", namespace))) == 100)
    assert reserved_uids(objects.claims.get("shared", namespace)) == {
        p["metadata"]["uid"] for p in pods
    }
    eventually(lambda: all(bound(objects, namespace, f"p{i}") == node for i in range(100)))


def test_unschedulable_pod_gets_a_condition_and_runs_once_devices_are_freed(
    objects, namespace, start_controller, eventually
):
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=1)
    objects.template(namespace, "tpl", objects.device_class())
    start_controller()
    objects.pod(namespace, "first", templates={"gpu": "tpl"})
    eventually(lambda: bound(objects, namespace, "first"))
    objects.pod(namespace, "second", templates={"gpu": "tpl"})

    def condition() -> Any:
        conditions = (objects.pods.get("second", namespace).get("status") or {}).get(
            "conditions"
        ) or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    cond = eventually(condition)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "nodes are available" in cond["message"]
    assert "cannot allocate all claims" in cond["message"]
    assert "request gpu" in cond["message"] and "already allocated" in cond["message"]
    objects.pods.delete("first", namespace, grace_period_seconds=0)
    eventually(lambda: bound(objects, namespace, "second"))


def test_pod_lands_only_on_a_node_matching_its_selector_and_taints(
    objects, namespace, start_controller, eventually
):
    tag = uuid.uuid4().hex[:6]
    objects.node(f"plain-{tag}", devices=4)
    objects.node(f"zone-{tag}", devices=4, labels={"zone": tag})
    tainted = f"tainted-{tag}"
    objects.node(tainted, devices=4, labels={"zone": tag})
    node = objects.nodes.get(tainted)
    node["spec"]["taints"] = [{"key": "gpu", "value": "busy", "effect": "NoSchedule"}]
    objects.nodes.update(node)
    objects.template(namespace, "tpl", objects.device_class())
    start_controller()
    for i in range(4):
        objects.pod(namespace, f"p{i}", templates={"gpu": "tpl"},
                    node_selector={"zone": tag}, tolerate_all=False)  # fmt: skip
    for i in range(4):
        assert eventually(lambda i=i: bound(objects, namespace, f"p{i}")) == f"zone-{tag}"


@pytest.mark.compat
def test_scoped_mode_beside_kube_scheduler_touches_only_pods_that_name_drakit(
    cluster_with_scheduler, start_controller, eventually
):
    api = load_client(cluster_with_scheduler.kubeconfig, qps=0)
    objects = Objects(api)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    objects.nodes.api  # noqa: B018  (the same client for every resource)
    from kubernetes import client  # noqa: PLC0415

    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    cls = objects.device_class()
    for i in range(2):
        objects.node(f"n{i}-{uuid.uuid4().hex[:6]}", devices=4)
    objects.template(namespace, "tpl", cls)
    objects.claim(namespace, "theirs", cls)
    start_controller(api, claim_generation=ClaimGeneration.SCOPED)
    objects.pod(namespace, "mine", templates={"gpu": "tpl"})
    objects.pod(namespace, "their-claim", claims={"gpu": "theirs"}, scheduler="default-scheduler")
    objects.pod(namespace, "their-template", templates={"gpu": "tpl"},
                scheduler="default-scheduler")  # fmt: skip
    eventually(lambda: bound(objects, namespace, "mine"))
    eventually(lambda: bound(objects, namespace, "their-claim"))  # by kube-scheduler
    # kube-controller-manager is not running: nobody generates the default-scheduler pod's claim.
    assert objects.pod_claims(namespace, "their-template") == []

    def managers(obj: Any) -> set[str]:
        return {m.get("manager") for m in obj["metadata"].get("managedFields") or ()}

    assert FIELD_MANAGER in managers(objects.pods.get("mine", namespace))
    for name in ("their-claim", "their-template"):
        assert FIELD_MANAGER not in managers(objects.pods.get(name, namespace))
    theirs = objects.claims.get("theirs", namespace)
    assert FIELD_MANAGER not in managers(theirs)
    assert theirs["status"]["allocation"]
    (mine,) = objects.pod_claims(namespace, "mine")
    assert FIELD_MANAGER in managers(mine)


def test_pod_waiting_for_a_missing_device_class_is_scheduled_when_the_class_appears(
    objects, namespace, start_controller, eventually
):
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=1)
    missing = f"later-{uuid.uuid4().hex[:6]}"
    objects.template(namespace, "tpl", missing)
    start_controller()
    objects.pod(namespace, "p", templates={"gpu": "tpl"})

    def message() -> str:
        status = objects.pods.get("p", namespace).get("status") or {}
        return next((c["message"] for c in status.get("conditions") or ()
                     if c["type"] == "PodScheduled"), "")  # fmt: skip

    assert f"DeviceClass {missing} not found" in eventually(message)
    objects.device_class(missing)
    eventually(lambda: bound(objects, namespace, "p"))


def test_reservation_computed_for_an_old_allocation_is_refused_after_reallocation(
    objects, namespace
):
    claim = objects.claim(namespace, "c", objects.device_class())
    writer = ClaimWriter(objects.claims)
    first = {"request": "gpu", "driver": objects.driver, "pool": "node-1", "device": "d0"}
    a = {"resource": "pods", "name": "a", "uid": str(uuid.uuid4())}
    seen_by_b = writer.allocate_and_reserve(claim, {"devices": {"results": [first]}}, a)
    # a finishes: deallocated; then c allocates the claim again, on another node
    writer.change_status(seen_by_b, {"reservedFor": None, "allocation": None})
    second = {**first, "pool": "node-2"}
    c = {"resource": "pods", "name": "c", "uid": str(uuid.uuid4())}
    writer.allocate_and_reserve(
        objects.claims.get("c", namespace), {"devices": {"results": [second]}}, c
    )
    b = {"resource": "pods", "name": "b", "uid": str(uuid.uuid4())}
    with pytest.raises(ClaimWriteError, match="allocated again"):
        writer.reserve(seen_by_b, b)
    assert reserved_uids(objects.claims.get("c", namespace)) == {c["uid"]}
