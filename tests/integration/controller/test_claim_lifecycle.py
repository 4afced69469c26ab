"""Claim lifecycle against a real apiserver: reservations of finished pods, deallocation
ordering, deletion of generated claims, claims being deleted, pods that arrive bound."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from controller_harness import ClaimHistory
from helpers.rawclaims import PARAMETERS, allocate_raw, create_raw_claim, raw_claim_text

from drakit.controller.caches import Caches, DeletedPods
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.lifecycle import ClaimLifecycle
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import FINALIZER
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.lightclient import load_light_client

pytestmark = pytest.mark.integration


def scheduled_pod(objects: Any, namespace: str, eventually: Any, name: str, **claims: Any) -> Any:
    objects.pod(namespace, name, **claims)
    return eventually(
        lambda: (p := objects.pods.get(name, namespace))["spec"].get("nodeName") and p
    )


def allocated(claim: Any) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


def reserved(claim: Any) -> list[Any]:
    return list((claim.get("status") or {}).get("reservedFor") or [])


def finalized(claim: Any) -> bool:
    return FINALIZER in (claim["metadata"].get("finalizers") or [])


def assert_never_unprotected(history: list[Any]) -> None:
    for version in history:
        assert not allocated(version) or finalized(version), "allocation without finalizer"
        assert not reserved(version) or allocated(version), "reservation without allocation"


def test_deallocation_ordering_for_a_generated_claim_of_a_deleted_pod(
    objects, namespace, start_controller, eventually
):
    """Reservation and allocation go in one write, then the finalizer, then the claim."""
    cls = objects.device_class()
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=1)
    objects.template(namespace, "tpl", cls)
    start_controller()
    scheduled_pod(objects, namespace, eventually, "p", templates={"gpu": "tpl"})
    (claim,) = objects.pod_claims(namespace, "p")
    eventually(lambda: reserved(objects.claims.get(claim["metadata"]["name"], namespace)))
    history = ClaimHistory(objects.claims, namespace, claim["metadata"]["name"])
    objects.pods.delete("p", namespace, grace_period_seconds=0)
    eventually(history.deleted.is_set)
    history.stop()
    versions = history.versions
    assert allocated(versions[0]) and reserved(versions[0]) and finalized(versions[0])
    assert_never_unprotected(versions)
    first_unreserved = next(i for i, v in enumerate(versions) if not reserved(v))
    assert not allocated(versions[first_unreserved]), "not deallocated in the same write"
    assert finalized(versions[first_unreserved])
    first_unfinalized = next(i for i, v in enumerate(versions) if not finalized(v))
    assert first_unfinalized > first_unreserved


def test_user_claim_is_deallocated_but_kept_when_its_last_pod_finishes(
    objects, namespace, start_controller, eventually
):
    cls = objects.device_class()
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=1)
    objects.claim(namespace, "shared", cls)
    start_controller()
    scheduled_pod(objects, namespace, eventually, "a", claims={"gpu": "shared"})
    scheduled_pod(objects, namespace, eventually, "b", claims={"gpu": "shared"})
    eventually(lambda: len(reserved(objects.claims.get("shared", namespace))) == 2)
    objects.pods.delete("a", namespace, grace_period_seconds=0)
    one = eventually(lambda: len(reserved(c := objects.claims.get("shared", namespace))) == 1 and c)
    assert allocated(one) and finalized(one)
    assert reserved(one)[0]["name"] == "b"
    pod_b = objects.pods.get("b", namespace)
    objects.pods.update_status({**pod_b, "status": {**pod_b["status"], "phase": "Succeeded"}})
    final = eventually(lambda: not finalized(c := objects.claims.get("shared", namespace)) and c)
    assert not allocated(final) and not reserved(final)


def test_reservation_is_kept_while_the_pod_exists_although_the_cache_misses_it(
    objects, api, namespace
):
    """The informer may not have a pod yet; only a live GET may justify dropping it."""
    claim = objects.claim(namespace, "c", objects.device_class())
    pod = objects.pod(namespace, "p", claims={"gpu": "c"})
    writer = ClaimWriter(objects.claims)
    allocation = {"devices": {"results": [
        {"request": "gpu", "driver": objects.driver, "pool": "p", "device": "d"}]}}  # fmt: skip
    consumer = {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    claim = writer.allocate_and_reserve(claim, allocation, consumer)
    caches = Caches(api)  # never started: the pod is not in its cache
    caches.claims.informer_add(claim)
    lifecycle = ClaimLifecycle(
        caches=caches, pods=objects.pods, claims=objects.claims, writer=writer,
        deleted_pods=DeletedPods(), metrics=ControllerMetrics(),
        config=ControllerConfig(claim_generation=ClaimGeneration.ALL),
    )  # fmt: skip
    lifecycle.sync_claim(namespace, "c")
    assert reserved(objects.claims.get("c", namespace)) == [consumer]
    objects.pods.delete("p", namespace, grace_period_seconds=0)
    lifecycle.sync_claim(namespace, "c")
    after = objects.claims.get("c", namespace)
    assert reserved(after) == [] and not allocated(after) and not finalized(after)


def test_bound_pods_get_their_allocated_claim_reserved_but_terminal_pods_never(
    objects, namespace, start_controller, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=1)
    claim = objects.claim(namespace, "c", objects.device_class())
    done = objects.pod(namespace, "done", claims={"gpu": "c"}, node_name=node)
    objects.pods.update_status({**done, "status": {"phase": "Succeeded"}})
    result = {"request": "gpu", "driver": objects.driver, "pool": node, "device": "dev-0"}
    allocation = {"devices": {"results": [result]}}
    writer = ClaimWriter(objects.claims)
    claim = writer.add_finalizer(claim)
    objects.claims.update_status({**claim, "status": {"allocation": allocation}})
    start_controller()
    running = objects.pod(namespace, "running", claims={"gpu": "c"}, node_name=node)
    after = eventually(lambda: reserved(c := objects.claims.get("c", namespace)) and c)
    assert [r["uid"] for r in reserved(after)] == [running["metadata"]["uid"]]


def test_claim_being_deleted_loses_allocation_then_finalizer(
    objects, namespace, start_controller, eventually
):
    objects.node(f"n-{uuid.uuid4().hex[:6]}", devices=1)
    objects.claim(namespace, "c", objects.device_class())
    start_controller()
    scheduled_pod(objects, namespace, eventually, "p", claims={"gpu": "c"})
    eventually(lambda: reserved(objects.claims.get("c", namespace)))
    history = ClaimHistory(objects.claims, namespace, "c")
    objects.claims.delete("c", namespace)
    being_deleted = objects.claims.get("c", namespace)
    assert being_deleted["metadata"].get("deletionTimestamp") and allocated(being_deleted)
    objects.pods.delete("p", namespace, grace_period_seconds=0)
    eventually(history.deleted.is_set)
    history.stop()
    assert_never_unprotected(history.versions)
    # The allocation went first, while the finalizer still protected the claim.
    assert any(not allocated(v) and finalized(v) for v in history.versions)


def lifecycle_without_informers(api: Any, objects: Any, writer: ClaimWriter) -> Any:
    """A lifecycle whose caches hold only what the test puts in (pods: live GETs)."""
    caches = Caches(api)
    lifecycle = ClaimLifecycle(
        caches=caches, pods=objects.pods, claims=objects.claims, writer=writer,
        deleted_pods=DeletedPods(), metrics=ControllerMetrics(),
        config=ControllerConfig(claim_generation=ClaimGeneration.ALL),
    )  # fmt: skip
    return caches, lifecycle


def test_reservations_deallocation_and_finalizer_leave_opaque_parameters_bytes_as_written(
    objects, api, cluster, namespace
):
    """The apiserver compares spec and allocation, opaque config bytes included, with what it
    stores: writes that sent the claim back re-encoded ("1000.0" for "1e3") were refused."""
    light = load_light_client(cluster.kubeconfig, user_agent="test")
    try:
        writer = ClaimWriter(objects.claims)
        claim = create_raw_claim(
            light, namespace, "c", objects.driver, device_class=objects.device_class()
        )
        claim = writer.add_finalizer(claim)
        pods = [objects.pod(namespace, n, claims={"gpu": "c"}) for n in ("a", "b", "c")]
        consumers = [
            {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
            for p in pods
        ]
        result = {"request": "gpu", "driver": objects.driver, "pool": "n", "device": "d"}
        claim = allocate_raw(
            light, claim, [result], driver=objects.driver, reserved_for=consumers[:2]
        )
        claim = writer.reserve(claim, consumers[2])  # tests the allocation, never its config
        assert reserved(claim) == consumers
        caches, lifecycle = lifecycle_without_informers(api, objects, writer)

        objects.pods.delete("a", namespace, grace_period_seconds=0)
        caches.claims.informer_add(objects.claims.get("c", namespace))
        lifecycle.sync_claim(namespace, "c")
        assert reserved(objects.claims.get("c", namespace)) == consumers[1:]
        assert raw_claim_text(light, namespace, "c").count(PARAMETERS) == 2

        for name in ("b", "c"):
            objects.pods.delete(name, namespace, grace_period_seconds=0)
        caches.claims.informer_add(objects.claims.get("c", namespace))
        lifecycle.sync_claim(namespace, "c")
        after = objects.claims.get("c", namespace)
        assert not reserved(after) and not allocated(after) and not finalized(after)
        assert raw_claim_text(light, namespace, "c").count(PARAMETERS) == 1  # the spec's
    finally:
        light.close()


def test_a_claim_with_opaque_parameters_being_deleted_is_deallocated_and_released(
    objects, api, cluster, namespace
):
    light = load_light_client(cluster.kubeconfig, user_agent="test")
    try:
        writer = ClaimWriter(objects.claims)
        claim = create_raw_claim(
            light, namespace, "c", objects.driver, device_class=objects.device_class()
        )
        claim = writer.add_finalizer(claim)
        result = {"request": "gpu", "driver": objects.driver, "pool": "n", "device": "d"}
        allocate_raw(light, claim, [result], driver=objects.driver)
        objects.claims.delete("c", namespace)
        caches, lifecycle = lifecycle_without_informers(api, objects, writer)
        caches.claims.informer_add(objects.claims.get("c", namespace))
        lifecycle.sync_claim(namespace, "c")
        with pytest.raises(NotFound):
            objects.claims.get("c", namespace)
    finally:
        light.close()
