"""drakit's companion controller (``--claim-generation all``, its most active mode) beside the
real kube-scheduler leaves claims it did not make alone:

- the special claim kube-scheduler creates for a pod that requests a DeviceClass's extended
  resource (KEP-5004): not deallocated, not deleted, not written; its device counts as held,
  so drakit's own scheduler never gives it to another claim;
- a claim reserved for a PodGroup (KEP-5729; ``reservedFor`` names a PodGroup, no pod): its
  reservation and allocation are kept, and its device also counts as held.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cluster_objects import Made
from helpers.delivery import delivered

from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.naming import FIELD_MANAGER, FINALIZER
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource, ResourceType

pytestmark = pytest.mark.integration

EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
POD_GROUPS = ResourceType("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", namespaced=True)


@pytest.fixture
def made(wapi: Any) -> Iterator[Made]:
    objects = Made(wapi)
    yield objects
    objects.cleanup()


class Companion:
    """drakit's controller in ``all`` mode (it also manages the lifecycle of every claim),
    counting the syncs it has finished per work-queue key (``pod:<ns>/<name>``, ...)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self._synced: Counter[str] = Counter()
        self._lock = threading.Lock()
        sync = controller.sync  # the handler both work queues are started with, in run()

        def counted(key: str) -> float | None:
            try:
                return sync(key)
            finally:
                with self._lock:
                    self._synced[key] += 1

        controller.sync = counted  # type: ignore[method-assign]

    def handled(
        self, claim: dict[str, Any], pods: list[str], eventually: Callable[..., Any]
    ) -> None:
        """Wait for the proof that the companion has dealt with ``claim`` as it is and with
        ``pods`` (``<ns>/<name>``) as they are now: the claim's current version has reached
        the companion's handler and the work queue has since run dry (claims do not come
        round again on a resync: the assume cache passes only changes on), and each pod has
        been synced once more (pods do come round, every second)."""
        meta = claim["metadata"]
        seen = delivered(
            self.controller.caches.claims, meta["namespace"], meta["name"], meta["resourceVersion"]
        )
        with self._lock:
            before = {f"pod:{pod}": self._synced[f"pod:{pod}"] for pod in pods}

        def done() -> bool:
            with self._lock:
                synced = all(self._synced[key] > count for key, count in before.items())
            return synced and seen.is_set() and self.controller.queue.idle()

        eventually(done, what=f"the companion to handle claim {meta['name']} and pods {pods}")


@pytest.fixture
def companion(wapi: Any, background: Any) -> Companion:
    controller = Controller(
        wapi, ControllerConfig(claim_generation=ClaimGeneration.ALL, workers=2, resync_period=1.0)
    )
    running = Companion(controller)
    background.start(controller.run)
    assert controller.started.wait(60), "controller did not start"
    return running


def reported_unschedulable(made: Made, namespace: str, pod: str) -> bool:
    """drakit's scheduler tried ``pod``, found no place and said so on the pod."""
    conditions = made.pods.get(pod, namespace)["status"].get("conditions") or ()
    return any(
        c["type"] == "PodScheduled"
        and c["status"] == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )


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
    # What the companion must leave alone is the scheduler's claim and its pod: wait until
    # drakit has tried the pod that could only get that claim's device, and has handled the
    # claim and its pod since.
    eventually(lambda: reported_unschedulable(made, wnamespace, "none-left"), what="none left")
    companion.handled(before, [f"{wnamespace}/ext"], eventually)
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
    # What the companion must leave alone is the PodGroup's claim: wait until drakit has
    # tried the pod that could only get that claim's device, and has handled the claim.
    eventually(lambda: reported_unschedulable(made, wnamespace, "mine"), what="no device")
    companion.handled(before, [], eventually)
    assert not allocated_devices(claims.get("mine", wnamespace))
    assert made.node_of(wnamespace, "mine") == ""

    after = claims.get("group-gpu", wnamespace)
    assert after["status"] == before["status"], "the companion changed the PodGroup's claim"
    assert after["metadata"]["finalizers"] == [FINALIZER]
    assert not after["metadata"].get("deletionTimestamp")
