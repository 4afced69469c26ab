"""The guide's partitionable NPU driver (docs/examples/npu_driver.py, included in
docs/writing-a-driver.md) as ``drakit node-plugin`` runs it under the kubelet's DRA manager,
on a control plane with the real kube-scheduler (drakit.testing's fixtures): it publishes
its partitions with the NPUs' shared counters; kube-scheduler places a half and two quarters
of one NPU together and nothing more on it; the plugin prepares them with the claim's
config, writes their device status and gives the container the claim-wide list of
partitions once, and two claims in one container each keep their own list."""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually

from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)
from drakit.localcluster import LocalCluster
from drakit.testing import (
    Allocated,
    HarnessNode,
    StartPlugin,
    allocate,
    claim,
    opaque_config,
    pod,
)

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
WAIT = 60.0
GI = 1024**3


@pytest.fixture
def drakit_cluster(cluster_with_scheduler: LocalCluster) -> LocalCluster:
    """drakit.testing's fixtures on the control plane that runs kube-scheduler."""
    return cluster_with_scheduler


@pytest.fixture
def npu_backend() -> Iterator[type]:
    """The guide's backend class, imported from the file the guide includes."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import npu_driver  # noqa: PLC0415

        yield npu_driver.NpuBackend
    finally:
        sys.path.remove(str(EXAMPLES))
        sys.modules.pop("npu_driver", None)


@pytest.fixture
def driver(drakit_api: Any, drakit_plugin: StartPlugin, npu_backend: type) -> Iterator[str]:
    """The NPU driver running on the test's node under a name of its own, and a DeviceClass
    of that name selecting its partitions."""
    name = f"npu-{uuid.uuid4().hex[:8]}.example.com"
    classes = Resource(drakit_api, DEVICE_CLASSES)
    selector = {"cel": {"expression": f'device.driver == "{name}"'}}
    classes.create({"metadata": {"name": name}, "spec": {"selectors": [selector]}})
    drakit_plugin(npu_backend, name)
    yield name
    with contextlib.suppress(NotFound):
        classes.delete(name)


def published(api: Any, driver: str, node: str) -> list[dict[str, Any]]:
    slices = Resource(api, RESOURCE_SLICES).list(
        field_selector=f"spec.driver={driver},spec.nodeName={node}"
    )
    return list(slices.items)


def partition_is(driver: str, kind: str) -> str:
    return f'device.attributes["{driver}"].partition == "{kind}"'


def request(name: str, driver: str, kind: str, count: int = 1) -> dict[str, Any]:
    selectors = [{"cel": {"expression": partition_is(driver, kind)}}]
    exactly = {"deviceClassName": driver, "count": count, "selectors": selectors}
    return {"name": name, "exactly": exactly}


def scheduled_pod(name: str, claim_name: str) -> dict[str, Any]:
    """A pod kube-scheduler places (no nodeName), its one container using ``claim_name``."""
    body = pod(name, "", [claim_name])
    del body["spec"]["nodeName"]
    return body


def test_kube_scheduler_places_a_half_and_two_quarters_of_one_npu_and_nothing_more(
    drakit_api: Any, drakit_namespace: str, drakit_node: HarnessNode, driver: str
) -> None:
    slices = eventually(
        lambda: published(drakit_api, driver, drakit_node.name), what="the NPU slices"
    )
    counters = {
        cs["name"]: cs["counters"] for s in slices for cs in s["spec"].get("sharedCounters") or []
    }
    assert counters == {
        f"npu-{n}": {"memory": {"value": "32Gi"}, "cores": {"value": "8"}} for n in range(2)
    }
    devices = {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}
    assert len(devices) == 14
    assert devices["npu-1-half-0"]["consumesCounters"] == [
        {"counterSet": "npu-1", "counters": {"memory": {"value": "16Gi"}, "cores": {"value": "4"}}}
    ]

    # One claim: a half and two quarters of the same NPU (all of it), clocked up.
    trio = claim("trio", driver, config=[opaque_config(driver, {"clock": "boost"})])
    trio["spec"]["devices"]["requests"] = [
        request("half", driver, "half"),
        request("quarters", driver, "quarter", count=2),
    ]
    trio["spec"]["devices"]["constraints"] = [{"matchAttribute": f"{driver}/npu"}]
    claims = Resource(drakit_api, RESOURCE_CLAIMS)
    claims.create(trio, drakit_namespace)
    Resource(drakit_api, PODS).create(scheduled_pod("p1", "trio"), drakit_namespace)

    prepared = drakit_node.wait_prepared(drakit_namespace, "p1")
    allocation = claims.get("trio", drakit_namespace)["status"]["allocation"]
    names = sorted(r["device"] for r in allocation["devices"]["results"])
    (npu,) = {devices[n]["attributes"]["npu"]["int"] for n in names}
    assert [devices[n]["attributes"]["partition"]["string"] for n in names] == [
        "half", "quarter", "quarter",
    ]  # fmt: skip
    memory = sum(
        int(devices[n]["consumesCounters"][0]["counters"]["memory"]["value"].removesuffix("Gi"))
        for n in names
    )
    assert memory == 32  # the NPU's memory, not more

    env = drakit_node.container_env(prepared["containers"]["main"])
    in_claim_order = ",".join(r["device"] for r in allocation["devices"]["results"])
    assert sorted(e for e in env if e.startswith("NPU_")) == sorted(
        [f"{n.upper().replace('-', '_')}_CLOCK=boost" for n in names]
        + [f"NPU_VISIBLE_DEVICES_TRIO={in_claim_order}"]
    )
    status = eventually(
        lambda: claims.get("trio", drakit_namespace).get("status", {}).get("devices"),
        what="the device status of the claim with opaque config",
        timeout=WAIT,
    )
    assert sorted((e["device"], e["data"]["clock"]) for e in status) == [
        (n, "boost") for n in names
    ]

    # Any further partition of that NPU would over-commit it: kube-scheduler keeps the pod.
    more = claim("more", driver)
    more["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f'device.attributes["{driver}"].npu == {npu}'}}
    ]
    claims.create(more, drakit_namespace)
    pods = Resource(drakit_api, PODS)
    pods.create(scheduled_pod("p2", "more"), drakit_namespace)

    def unschedulable() -> bool:
        conditions = (pods.get("p2", drakit_namespace).get("status") or {}).get("conditions")
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in conditions or ()
        )

    eventually(unschedulable, what="p2 unschedulable", timeout=WAIT)
    assert not claims.get("more", drakit_namespace).get("status", {}).get("allocation")


def test_two_claims_in_one_container_each_give_their_partition_list_once(
    drakit_api: Any, drakit_namespace: str, drakit_node: HarnessNode, driver: str
) -> None:
    # Claim b has two partitions: a claim-wide variable copied onto each device's edits
    # came twice, and under one name the second claim's list replaced the first's.
    eventually(lambda: published(drakit_api, driver, drakit_node.name), what="the NPU slices")
    node = drakit_node.name
    allocate(
        drakit_api,
        drakit_namespace,
        pod("p", node, ["a", "b"]),
        [
            (claim("a", driver), [Allocated(node, "npu-0-half-0")]),
            (
                claim("b", driver, count=2),
                [Allocated(node, "npu-1-quarter-0"), Allocated(node, "npu-1-quarter-1")],
            ),
        ],
        driver=driver,
    )
    ids = drakit_node.wait_prepared(drakit_namespace, "p")["containers"]["main"]
    assert len(ids) == 3
    env = drakit_node.container_env(ids)
    assert sorted(e for e in env if e.startswith("NPU_VISIBLE_DEVICES_")) == [
        "NPU_VISIBLE_DEVICES_A=npu-0-half-0",
        "NPU_VISIBLE_DEVICES_B=npu-1-quarter-0,npu-1-quarter-1",
    ]
    assert sorted(e for e in env if e.endswith("_CLOCK=base")) == [
        "NPU_0_HALF_0_CLOCK=base",
        "NPU_1_QUARTER_0_CLOCK=base",
        "NPU_1_QUARTER_1_CLOCK=base",
    ]
