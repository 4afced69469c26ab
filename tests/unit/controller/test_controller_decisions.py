"""Claim lifecycle and pod scheduling decisions on an in-memory API (no apiserver).

The same flows against the real apiserver are in tests/integration/controller/.
"""

from __future__ import annotations

from typing import Any

import pytest

from drakit.controller.caches import DeletedPods
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.controller.lifecycle import ClaimLifecycle
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.naming import FINALIZER
from drakit.controller.scheduler import needs_scheduling
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS
from drakit.kubeapi.testing import FakeApi, FakeResource

NS = "team-a"


class CachesFromApi:
    """The lifecycle's view of its informer caches, read straight from the fake API."""

    def __init__(self, pods: FakeResource, claims: FakeResource) -> None:
        self._pods, self._claims_api = pods, claims
        self.claims = self  # the assume cache: nothing to assume over a synchronous store

    def assume(self, _obj: Any) -> None:
        pass

    def pod(self, namespace: str, name: str) -> Any:
        try:
            return self._pods.get(name, namespace)
        except NotFound:
            return None

    def claim(self, namespace: str, name: str) -> Any:
        try:
            return self._claims_api.get(name, namespace)
        except NotFound:
            return None


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def lifecycle(api: FakeApi) -> ClaimLifecycle:
    pods, claims = api.resource(PODS), api.resource(RESOURCE_CLAIMS)
    return ClaimLifecycle(
        caches=CachesFromApi(pods, claims),  # type: ignore[arg-type]
        pods=pods,  # type: ignore[arg-type]
        claims=claims,  # type: ignore[arg-type]
        writer=ClaimWriter(claims),  # type: ignore[arg-type]
        deleted_pods=DeletedPods(),
        config=ControllerConfig(claim_generation=ClaimGeneration.ALL),
        metrics=ControllerMetrics(),
    )


def pod(api: FakeApi, name: str, phase: str = "Running") -> dict[str, Any]:
    return api.resource(PODS).create(
        {"metadata": {"name": name, "namespace": NS}, "spec": {"nodeName": "node-a"},
         "status": {"phase": phase}}
    )  # fmt: skip


def claim(api: FakeApi, name: str, *, owner: dict[str, Any] | None = None,
          reserved_for: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "finalizers": [FINALIZER]}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "controller": True,
                                        "name": owner["metadata"]["name"],
                                        "uid": owner["metadata"]["uid"]}]  # fmt: skip
    claims = api.resource(RESOURCE_CLAIMS)
    created = claims.create({"metadata": metadata, "spec": {}})
    created["status"] = {"allocation": {"devices": {"results": []}},
                         "reservedFor": reserved_for}  # fmt: skip
    return claims.update_status(created)


def consumer(p: dict[str, Any]) -> dict[str, Any]:
    return {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}


@pytest.mark.parametrize("recreated", [False, True], ids=["pod-gone", "pod-recreated"])
def test_reservation_of_a_vanished_pod_is_dropped_and_the_claim_deallocated(
    api: FakeApi, lifecycle: ClaimLifecycle, recreated: bool
) -> None:
    gone = pod(api, "gone")
    claim(api, "shared", reserved_for=[consumer(gone)])
    api.resource(PODS).delete("gone", NS)
    if recreated:  # same name, new UID: not the consumer the claim was reserved for
        pod(api, "gone")
    lifecycle.sync_claim(NS, "shared")
    stored = api.resource(RESOURCE_CLAIMS).get("shared", NS)
    assert stored["status"].get("reservedFor") is None
    assert stored["status"].get("allocation") is None
    assert FINALIZER not in (stored["metadata"].get("finalizers") or [])


def test_reservation_of_a_running_pod_is_kept_without_a_write(
    api: FakeApi, lifecycle: ClaimLifecycle
) -> None:
    running = pod(api, "worker")
    before = claim(api, "shared", reserved_for=[consumer(running)])
    lifecycle.sync_claim(NS, "shared")
    after = api.resource(RESOURCE_CLAIMS).get("shared", NS)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_only_the_reservation_of_the_vanished_pod_of_two_is_dropped(
    api: FakeApi, lifecycle: ClaimLifecycle
) -> None:
    staying, gone = pod(api, "staying"), pod(api, "gone")
    claim(api, "shared", reserved_for=[consumer(staying), consumer(gone)])
    api.resource(PODS).delete("gone", NS)
    lifecycle.sync_claim(NS, "shared")
    stored = api.resource(RESOURCE_CLAIMS).get("shared", NS)
    assert stored["status"]["reservedFor"] == [consumer(staying)]
    assert stored["status"]["allocation"] is not None


def test_generated_claim_of_a_finished_pod_is_deleted(
    api: FakeApi, lifecycle: ClaimLifecycle
) -> None:
    finished = pod(api, "job", phase="Succeeded")
    claim(api, "job-gpu", owner=finished)
    lifecycle.sync_claim(NS, "job-gpu")
    with pytest.raises(NotFound):
        api.resource(RESOURCE_CLAIMS).get("job-gpu", NS)


def test_user_claim_without_consumers_stays(api: FakeApi, lifecycle: ClaimLifecycle) -> None:
    claim(api, "mine")
    lifecycle.sync_claim(NS, "mine")
    assert api.resource(RESOURCE_CLAIMS).get("mine", NS)["metadata"]["name"] == "mine"


@pytest.mark.parametrize(
    ("spec", "metadata", "phase", "expected"),
    [
        pytest.param({"schedulerName": "drakit"}, {}, "Pending", True, id="pending-ours"),
        pytest.param({"schedulerName": "default-scheduler"}, {}, "Pending", False, id="other"),
        pytest.param(
            {"schedulerName": "drakit", "nodeName": "n"}, {}, "Pending", False, id="already-bound"
        ),
        pytest.param({"schedulerName": "drakit"}, {}, "Failed", False, id="finished"),
        pytest.param(
            {"schedulerName": "drakit"},
            {"deletionTimestamp": "2026-01-01T00:00:00Z"},
            "Pending",
            False,
            id="being-deleted",
        ),
    ],
)
def test_which_pods_the_scheduler_takes(
    spec: dict[str, Any], metadata: dict[str, Any], phase: str, expected: bool
) -> None:
    pod_obj = {"metadata": {"name": "p", **metadata}, "spec": spec, "status": {"phase": phase}}
    assert needs_scheduling(pod_obj, "drakit") is expected
