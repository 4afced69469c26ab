"""drakit's companion controller (``--claim-generation all``, its most active mode) beside the
real kube-scheduler leaves claims it did not make alone:

- the special claim kube-scheduler creates for a pod that requests a DeviceClass's extended
  resource (KEP-5004): not deallocated, not deleted, not written; its device counts as held,
  so drakit's own scheduler never gives it to another claim;
- a claim reserved for a PodGroup (KEP-5729; ``reservedFor`` names a PodGroup, no pod): its
  reservation and allocation are kept, and its device also counts as held.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_objects import Made

from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.naming import FIELD_MANAGER, FINALIZER
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource, ResourceType

pytestmark = pytest.mark.integration

EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
POD_GROUPS = ResourceType("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", namespaced=True)
#: Long enough for the companion to have synced every claim and pod several times over.
SETTLE_SECONDS = 3.0


@pytest.fixture
def made(wapi: Any) -> Iterator[Made]:
    objects = Made(wapi)
    yield objects
    objects.cleanup()


@pytest.fixture
def companion(wapi: Any, background: Any) -> Controller:
    """drakit's controller in ``all`` mode: it also manages the lifecycle of every claim."""
    controller = Controller(
        wapi, ControllerConfig(claim_generation=ClaimGeneration.ALL, workers=2, resync_period=1.0)
    )
    background.start(controller.run)
    assert controller.started.wait(60), "controller did not start"
    return controller


def written_by_drakit(claim: dict[str, Any]) -> bool:
    return any(
        m.get("manager") == FIELD_MANAGER for m in claim["metadata"].get("managedFields") or ()
    )


def allocated_devices(claim: dict[str, Any]) -> set[str]:
    allocation = claim["status"].get("allocation") or {}
    return {r["device"] for r in (allocation.get("devices") or {}).get("results") or ()}


def test_extended_resource_claim_is_left_alone_and_its_device_counts_as_held(
    *, wapi, wnamespace, made, companion, eventually
):
    extended = f"example.com/gpu-{made.tag}"
    node = made.node([{"name": "dev-0"}, {"name": "dev-1"}])
    device_class = made.device_class(extended_resource_name=extended)
    made.pod(wnamespace, "ext", limits={extended: "1"})
    eventually(lambda: made.node_of(wnamespace, "ext") == node, what="pod bound", timeout=90)
    pod = made.pods.get("ext", wnamespace)
    name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    claims = Resource(wapi, RESOURCE_CLAIMS)
    before = claims.get(name, wnamespace)
    assert before["metadata"]["annotations"][EXTENDED_ANNOTATION] == "true"
    (held,) = allocated_devices(before)

    # A pod drakit schedules asks for one device of the same class: it must get the other.
    made.claim(wnamespace, "mine", device_class)
    made.pod(wnamespace, "mine", claims={"gpu": "mine"}, scheduler="drakit")
    eventually(lambda: made.node_of(wnamespace, "mine") == node, what="drakit bound", timeout=60)
    assert allocated_devices(claims.get("mine", wnamespace)) == {"dev-0", "dev-1"} - {held}
    # And a third finds none left (the extended claim's device is not free).
    made.claim(wnamespace, "none-left", device_class)
    made.pod(wnamespace, "none-left", claims={"gpu": "none-left"}, scheduler="drakit")
    time.sleep(SETTLE_SECONDS)
    assert not allocated_devices(claims.get("none-left", wnamespace))
    assert made.node_of(wnamespace, "none-left") == ""

    after = claims.get(name, wnamespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"] == before["status"], "the companion changed the scheduler's claim"
    assert not written_by_drakit(after)


def test_podgroup_claim_keeps_its_reservation_and_allocation(
    *, wapi, wnamespace, made, companion, eventually
):
    node = made.node([{"name": "dev-0"}])
    device_class = made.device_class()
    group = Resource(wapi, POD_GROUPS).create(
        {
            "metadata": {"name": "group", "namespace": wnamespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        }
    )
    # As kube-controller-manager and kube-scheduler leave a PodGroup's claim: controlled by
    # the PodGroup, allocated, with the finalizer, reserved for the PodGroup (no pod).
    owner = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "group",
             "uid": group["metadata"]["uid"], "controller": True}  # fmt: skip
    claims = Resource(wapi, RESOURCE_CLAIMS)
    claim = made.claim(wnamespace, "group-gpu", device_class)
    claim["metadata"]["ownerReferences"] = [owner]
    claim["metadata"]["finalizers"] = [FINALIZER]
    claim = claims.update(claim)
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": made.driver, "pool": node,
                                     "device": "dev-0"}]},
        },
        "reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                         "name": "group", "uid": group["metadata"]["uid"]}],
    }  # fmt: skip
    before = claims.update_status(claim)

    # A pod drakit schedules cannot have the PodGroup's device.
    made.claim(wnamespace, "mine", device_class)
    made.pod(wnamespace, "mine", claims={"gpu": "mine"}, scheduler="drakit")
    time.sleep(SETTLE_SECONDS)
    assert not allocated_devices(claims.get("mine", wnamespace))
    assert made.node_of(wnamespace, "mine") == ""

    after = claims.get("group-gpu", wnamespace)
    assert after["status"] == before["status"], "the companion changed the PodGroup's claim"
    assert after["metadata"]["finalizers"] == [FINALIZER]
    assert not after["metadata"].get("deletionTimestamp")
