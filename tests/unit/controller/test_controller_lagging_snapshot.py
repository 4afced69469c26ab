"""Decisions on a copy of the allocated state that lags the live state (no apiserver).

``DeviceBook.snapshot`` hands out a copy that may be a few changes old, so a busy scheduler
does not copy every allocated device for every pod. A node chosen on such a copy is checked
again under the book's lock; "no node fits" must only be concluded on a current copy. The
same scheduler against the real apiserver is in tests/integration/controller/.
"""

from __future__ import annotations

from typing import Any

from drakit.allocator.model import DeviceID
from drakit.controller.claimwrites import ClaimWriter
from drakit.controller.config import ControllerConfig
from drakit.controller.devicebook import SNAPSHOT_MAX_LAG, DeviceBook, claim_model
from drakit.controller.metrics import ControllerMetrics
from drakit.controller.scheduler import PodScheduler
from drakit.controller.waiting import WaitingPods
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import RESOURCE_CLAIMS
from drakit.kubeapi.testing import FakeApi, FakeResource

NS = "ns"


def slice_of(node: str, *devices: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-slice"},
        "spec": {
            "driver": "d",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": name} for name in devices],
        },
    }


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }


def claim(name: str, device: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if device is not None:
        result = {"request": "r", "driver": "d", "pool": "n1", "device": device}
        status["allocation"] = {"devices": {"results": [result]}}
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid", "resourceVersion": "1"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "gpu",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
        "status": status,
    }


class Store:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self._by_name = {o["metadata"]["name"]: o for o in objects}

    def all_keys(self) -> list[str]:
        return list(self._by_name)

    def get_by_name(self, name: str) -> dict[str, Any] | None:
        return self._by_name.get(name)

    def objects(self) -> list[dict[str, Any]]:
        return list(self._by_name.values())


class Caches:
    """The scheduler's view of its informer caches, over the fake claims API."""

    def __init__(self, claims: FakeResource, nodes: list[dict[str, Any]]) -> None:
        self._claims_api = claims
        self.claims = self
        self.nodes = self
        self.store = Store(nodes)

    def assume(self, _obj: Any) -> None:
        pass

    def claim(self, namespace: str, name: str) -> Any:
        try:
            return self._claims_api.get(name, namespace)
        except NotFound:
            return None


class Pods:
    """``pods/binding`` that records where each pod went."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.unschedulable = ""

    def create_subresource(self, name: str, _sub: str, body: Any, _namespace: str) -> None:
        self.bound[name] = body["target"]["name"]

    def patch_status(self, _pod: Any, patch: Any, **_kwargs: Any) -> None:
        self.unschedulable = patch["status"]["conditions"][0]["message"]


def test_snapshot_lags_at_most_the_bound_and_a_current_one_never_does() -> None:
    book = DeviceBook(list_slices=list, list_classes=list, get_claim=lambda _key: None)
    book.claim_changed(claim("held", "d0"))
    generation, state = book.snapshot()
    book.claim_deleted(claim("held", "d0"))
    assert book.snapshot() == (generation, state)  # one change behind: shared
    current_generation, current = book.snapshot(current=True)
    assert current_generation == book.generation
    assert not current.is_allocated(DeviceID("d", "n1", "d0"))
    for i in range(SNAPSHOT_MAX_LAG + 1):
        book.claim_changed(claim(f"c{i}", None))
    assert book.snapshot()[0] == book.generation  # too far behind: copied again


def test_pod_is_bound_when_only_a_lagging_copy_says_nothing_fits() -> None:
    """The device was freed after the copy was taken: the search on the copy finds no
    node, so the decision is made again on a current copy instead of parking the pod."""
    api = FakeApi()
    claims = api.resource(RESOURCE_CLAIMS)
    claims.create(claim("wanted"), NS)
    book = DeviceBook(
        list_slices=lambda: [slice_of("n1", "d0")],
        list_classes=lambda: [{"metadata": {"name": "gpu"}, "spec": {}}],
        get_claim=lambda key: None,
    )
    held = claim("held", "d0")
    model = claim_model(held)
    assert model is not None
    book.state.add(model)
    book.snapshot()  # an earlier decision's copy: d0 taken
    book.claim_deleted(held)  # freed since: the copy now lags by one change
    pods = Pods()
    scheduler = PodScheduler(
        caches=Caches(claims, [node("n1")]),  # type: ignore[arg-type]
        book=book,
        writer=ClaimWriter(claims),  # type: ignore[arg-type]
        pods=pods,  # type: ignore[arg-type]
        events=None,
        metrics=ControllerMetrics(),
        waiting=WaitingPods(),
        config=ControllerConfig(),
    )
    pod = {
        "metadata": {"name": "p", "namespace": NS, "uid": "p-uid"},
        "spec": {
            "schedulerName": ControllerConfig().scheduler_name,
            "containers": [{"name": "c", "image": "i"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "wanted"}],
        },
    }
    assert scheduler.schedule(pod) is None, pods.unschedulable
    assert pods.bound == {"p": "n1"}
    allocated = claims.get("wanted", NS)["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in allocated] == ["d0"]
