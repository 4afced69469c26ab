"""KEP-5945 on Kubernetes 1.37 with DRAOptionalNodeOperations on: a pool whose backend needs
no node preparation is published with ``spec.skipNodeOperations``, and the kubelet's own DRA
manager (the kubelet harness) then neither prepares nor unprepares a claim of its devices,
while it still does both for a claim of the driver's other devices.

The allocation is written as kube-scheduler writes it: each result carries a copy of its
slice's ``spec.skipNodeOperations``, read from the published slice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually

from drakit.kubeapi.resources import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.kubeversions import default_feature_gates, minor_of
from drakit.plugin import (
    BackendBase,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    Device,
    KubeletPlugin,
    PluginOptions,
    PoolDescription,
    RequestContext,
)
from drakit.testing import HarnessNode, claim, pod
from drakit.version import KUBERNETES_VERSION

pytestmark = pytest.mark.integration

DRIVER = "link.example.com"
GATE = "DRAOptionalNodeOperations"


@pytest.fixture(scope="module")
def drakit_cluster() -> Iterator[LocalCluster]:
    """This module's own control plane, with the gate on (the harness gets the same gates)."""
    if minor_of(KUBERNETES_VERSION) < 37:
        pytest.skip("DRAOptionalNodeOperations is a 1.37 gate")
    gates = ",".join(filter(None, (default_feature_gates(KUBERNETES_VERSION), f"{GATE}=true")))
    with LocalCluster(ClusterConfig(feature_gates=gates)) as cluster:
        yield cluster


class Links(BackendBase):
    """A pool of links that need nothing on the node, and one of GPUs that do; counts the
    prepare and unprepare calls per claim UID."""

    name = "links"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.calls: list[tuple[str, str]] = []

    def discover(self) -> tuple[PoolDescription, ...]:
        node = self.context.node_name
        return (
            PoolDescription(node, (Device(name="gpu-0"),)),
            PoolDescription(
                f"{node}-links", (Device(name="link-0"),), needs_node_preparation=False
            ),
        )

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        self.calls.append(("prepare", claim.uid))
        return BackendPrepared(tuple(ContainerEdits(env=("GPU=1",)) for _ in claim.devices))

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        self.calls.append(("unprepare", claim.uid))


def published_skips(api: Any, node: str) -> dict[str, Any]:
    """Pool name -> the ``spec.skipNodeOperations`` of its slices on ``node``."""
    listed = Resource(api, RESOURCE_SLICES).list(
        field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
    )
    return {s["spec"]["pool"]["name"]: s["spec"].get("skipNodeOperations") for s in listed.items}


def allocate_as_the_scheduler(
    api: Any, namespace: str, name: str, *, node: str, device: tuple[str, str], skips: Any
) -> dict[str, Any]:
    """Claim ``name`` and pod ``name`` on ``node``, the claim allocated ``device`` (pool,
    device) with the slice's ``skips`` copied into the result, and reserved for the pod."""
    claims = Resource(api, RESOURCE_CLAIMS)
    stored = claims.create(claim(name, DRIVER), namespace)
    created = Resource(api, PODS).create(pod(name, node, [name]), namespace)
    pool, name_in_pool = device
    result: dict[str, Any] = {
        "request": "dev", "driver": DRIVER, "pool": pool, "device": name_in_pool
    }  # fmt: skip
    if skips:
        result["skipNodeOperations"] = list(skips)
    stored["status"] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": created["metadata"]["uid"]}],
    }
    return dict(claims.update_status(stored))


def test_the_kubelet_skips_prepare_and_unprepare_of_devices_that_need_no_node_preparation(
    drakit_cluster: LocalCluster, drakit_api: Any, drakit_namespace: str, drakit_node: HarnessNode
) -> None:
    ns, node = drakit_namespace, drakit_node.name
    # The kubelet with the gate on declares the feature; the harness runs no node status
    # updater, so the test writes what a 1.37 kubelet writes.
    nodes = Resource(drakit_api, NODES)
    obj = nodes.get(node)
    obj["status"]["declaredFeatures"] = [GATE]
    nodes.update_status(obj)

    options = PluginOptions(
        DRIVER,
        node,
        kubeconfig=Path(drakit_cluster.kubeconfig),
        registrar_dir=drakit_node.folders.registrar,
        plugins_dir=drakit_node.folders.plugins,
        cdi_root=drakit_node.folders.cdi,
    )
    backend = Links(options.backend_context())
    since = drakit_node.events.mark()
    plugin = KubeletPlugin(backend, options)
    try:
        assert plugin.start(timeout=60) is True
        drakit_node.events.wait("registered", timeout=60, since=since, driver=DRIVER)
        both = ["NodePrepareResources", "NodeUnprepareResources"]
        skips = eventually(
            lambda: (
                (s := published_skips(drakit_api, node)) == {node: None, f"{node}-links": both}
                and s
            ),
            "the links pool published with skipNodeOperations",
        )

        links = f"{node}-links"
        skipped = allocate_as_the_scheduler(
            drakit_api, ns, "skipped", node=node, device=(links, "link-0"), skips=skips[links]
        )
        prepared = allocate_as_the_scheduler(
            drakit_api, ns, "gpu", node=node, device=(node, "gpu-0"), skips=None
        )
        assert drakit_node.wait_prepared(ns, "skipped")["containers"] == {"main": []}
        assert drakit_node.wait_prepared(ns, "gpu")["containers"]["main"] != []
        for name in ("skipped", "gpu"):
            drakit_api.pods.delete(name, ns)
            drakit_node.wait_unprepared(ns, name)
    finally:
        assert plugin.stop(timeout=60)
    gpu_uid, link_uid = prepared["metadata"]["uid"], skipped["metadata"]["uid"]
    assert backend.calls == [("prepare", gpu_uid), ("unprepare", gpu_uid)]
    assert link_uid not in {uid for _, uid in backend.calls}
