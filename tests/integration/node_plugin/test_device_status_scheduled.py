"""Device status of claims with opaque config that the real kube-scheduler allocated, written
by ``drakit node-plugin`` under the kubelet harness (real apiserver, kube-scheduler, kubelet
DRA manager; drakit.testing's fixtures on the control plane with a scheduler).

kube-scheduler copies the claim's opaque ``parameters`` into the allocation with their bytes
(protobuf), so the bytes the claim's creator wrote decide whether any later patch of the
claim, the plugin's status write among them, is accepted: the apiserver re-encodes the
stored claim as Go does to apply a patch and compares ``status.allocation`` byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.rawclaims import send
from helpers.waiting import eventually
from status_backend import StatusBackend

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.lightclient import load_light_client
from drakit.kubeapi.resources import DEVICE_CLASSES, EVENTS, PODS, RESOURCE_CLAIMS, Resource
from drakit.localcluster import LocalCluster
from drakit.testing import HarnessNode, StartPlugin, claim, opaque_config

pytestmark = pytest.mark.integration

WAIT = 60.0
SHARING = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
GPU_CONFIG = {
    "apiVersion": "gpu.resource.example.com/v1alpha1",
    "kind": "GpuConfig",
    "sharing": SHARING,
}


@pytest.fixture
def drakit_cluster(cluster_with_scheduler: LocalCluster) -> LocalCluster:
    """drakit.testing's fixtures on the control plane that runs kube-scheduler."""
    return cluster_with_scheduler


@pytest.fixture
def driver(drakit_api: Any) -> Iterator[str]:
    """A driver name of this test alone, and a DeviceClass selecting its devices."""
    name = f"status-{uuid.uuid4().hex[:8]}.example.com"
    classes = Resource(drakit_api, DEVICE_CLASSES)
    selector = {"cel": {"expression": f'device.driver == "{name}"'}}
    classes.create({"metadata": {"name": name}, "spec": {"selectors": [selector]}})
    yield name
    with contextlib.suppress(NotFound):
        classes.delete(name)


@pytest.fixture
def plugin(drakit_node: HarnessNode, drakit_plugin: StartPlugin, driver: str) -> None:
    config = drakit_node.folders.root / "status-backend.json"
    config.write_text(json.dumps({"gpus": 2}))
    drakit_plugin(StatusBackend, driver, backend_config=config)


def scheduled_pod(name: str, claim_name: str) -> dict[str, Any]:
    """A pod kube-scheduler places (no nodeName) using ``claim_name``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def status_devices(api: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    stored = Resource(api, RESOURCE_CLAIMS).get(name, namespace)
    return list((stored.get("status") or {}).get("devices") or ())


Schedule = Callable[[str], str]


@pytest.fixture
def schedule(
    drakit_api: Any, drakit_cluster: LocalCluster, drakit_namespace: str, driver: str
) -> Schedule:
    """``schedule(client_kind)``: claim ``gpu`` (one device of ``driver``, opaque config)
    and pod ``p`` using it, for kube-scheduler to place; returns ``driver``. The claim is
    created through drakit.testing's client (the full one), the light client, or sent as
    Python's ``json.dumps`` writes it (as the kubernetes package's own REST layer does: ", "
    and ": " separators)."""

    def create(client_kind: str) -> str:
        body = claim("gpu", driver, request="gpu", config=[opaque_config(driver, GPU_CONFIG)])
        _create(client_kind, body)
        Resource(drakit_api, PODS).create(scheduled_pod("p", "gpu"), drakit_namespace)
        return driver

    def _create(client_kind: str, body: dict[str, Any]) -> None:
        if client_kind == "drakit.testing's client (full)":
            Resource(drakit_api, RESOURCE_CLAIMS).create(body, drakit_namespace)
            return
        light = load_light_client(drakit_cluster.kubeconfig)
        try:
            if client_kind == "light client":
                Resource(light, RESOURCE_CLAIMS).create(body, drakit_namespace)
            else:
                send(light, "POST", RESOURCE_CLAIMS.path(drakit_namespace), json.dumps(body))
        finally:
            light.close()

    return create


@pytest.mark.usefixtures("plugin")
@pytest.mark.parametrize("client_kind", ["drakit.testing's client (full)", "light client"])
def test_a_scheduled_claim_with_opaque_config_gets_its_device_status(
    drakit_api: Any,
    drakit_namespace: str,
    drakit_node: HarnessNode,
    schedule: Schedule,
    client_kind: str,
) -> None:
    driver = schedule(client_kind)

    drakit_node.wait_prepared(drakit_namespace, "p")
    (entry,) = eventually(
        lambda: status_devices(drakit_api, drakit_namespace, "gpu"),
        what="status.devices written",
        timeout=WAIT,
    )
    assert (entry["driver"], entry["pool"]) == (driver, drakit_node.name)
    assert entry["data"] == {"device": entry["device"], "strategy": "TimeSlicing"}
    assert [c["type"] for c in entry["conditions"]] == ["Ready"]


@pytest.mark.usefixtures("plugin")
def test_a_claim_whose_parameters_no_patch_can_keep_gets_an_event_saying_why(
    drakit_api: Any,
    drakit_namespace: str,
    drakit_node: HarnessNode,
    schedule: Schedule,
) -> None:
    # Written by a client outside drakit with json.dumps' ", " separators: the apiserver
    # refuses every JSON patch of the allocated claim, whoever sends it. The pod still runs.
    schedule("json.dumps")

    drakit_node.wait_prepared(drakit_namespace, "p")
    events = Resource(drakit_api, EVENTS)
    (event,) = eventually(
        lambda: [
            e
            for e in events.list(drakit_namespace).items
            if e.get("reason") == "DeviceStatusNotWritten"
        ],
        what="a DeviceStatusNotWritten Event",
        timeout=WAIT,
    )
    assert "status.allocation" in event["note"]
    assert (
        "the claim's opaque config parameters are stored in a form the apiserver changes "
        "when it applies a patch (not compact JSON as Go writes it, e.g. written with "
        '", " separators by Python\'s json.dumps): it refuses every patch of this claim; '
        "create such claims with kubectl, client-go or drakit's clients"
    ) in event["note"]
    assert status_devices(drakit_api, drakit_namespace, "gpu") == []
