"""A backend pool that needs no node preparation is published with ``spec.skipNodeOperations``
(KEP-5945), on the real apiserver.

Kubernetes 1.37 has the field behind the alpha gate DRAOptionalNodeOperations; its scheduler
allocates such devices only for a Node that declares the feature (``status.declaredFeatures``,
set by a kubelet with the gate on), and a kubelet then skips NodePrepareResources and
NodeUnprepareResources for claims of only such devices. This module runs its own control plane
with the gate on; the session's runs with it off.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from publisher_support import DRIVER, StaticBackend, make_node, node_slices, settle

from drakit.allocator.model import CounterSet, Device
from drakit.kubeapi.client import load_client
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster
from drakit.localcluster.cluster import ClusterConfig
from drakit.localcluster.kubeversions import default_feature_gates, minor_of
from drakit.node_plugin.publisher import Publisher

pytestmark = pytest.mark.integration

BOTH = ["NodePrepareResources", "NodeUnprepareResources"]


@dataclass(frozen=True)
class Pool:
    """A backend pool, shaped like ``drakit.plugin.PoolDescription``."""

    name: str
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    needs_node_preparation: bool = True


@pytest.fixture(scope="module")
def gated_api(kube_version: str) -> Iterator[Any]:
    if minor_of(kube_version) < 37:
        pytest.skip("spec.skipNodeOperations is a 1.37 field")
    gates = ",".join(
        filter(None, (default_feature_gates(kube_version), "DRAOptionalNodeOperations=true"))
    )
    with LocalCluster(ClusterConfig(kube_version=kube_version, feature_gates=gates)) as cluster:
        yield load_client(cluster.kubeconfig, qps=0)


def declaring_node(api: Any, *features: str) -> str:
    """A new Node whose status declares ``features``; its name."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    node = make_node(api, name)
    if features:
        node["status"]["declaredFeatures"] = list(features)
        Resource(api, NODES).update_status(node)
    return name


def published(
    api: Any, node_name: str, *pools: Pool, detect: bool = True
) -> Iterator[tuple[Publisher, list[Any]]]:
    publisher = Publisher(api, DRIVER, node_name, StaticBackend(list(pools)), detect_cluster=detect)
    publisher.start()
    try:
        slices = Resource(api, RESOURCE_SLICES)
        settle(publisher, slices, node_name)
        yield publisher, node_slices(slices, node_name)
    finally:
        publisher.stop()


def skips_by_pool(items: list[Any]) -> dict[str, Any]:
    return {s["spec"]["pool"]["name"]: s["spec"].get("skipNodeOperations") for s in items}


def test_a_pool_needing_no_node_preparation_is_published_skipping_both_operations(
    gated_api: Any,
) -> None:
    node_name = declaring_node(gated_api, "DRAOptionalNodeOperations")
    plain = Pool(node_name, (Device(name="gpu-0"),))
    free = Pool(f"{node_name}-free", (Device(name="link-0"),), needs_node_preparation=False)
    for publisher, items in published(gated_api, node_name, plain, free):
        assert skips_by_pool(items) == {plain.name: None, free.name: BOTH}
        assert publisher.metrics.dropped_fields_total.get() == 0


def test_not_on_a_node_whose_kubelet_does_not_declare_the_feature(gated_api: Any) -> None:
    """The scheduler would allocate none of such devices for this node: they are published
    as devices the kubelet prepares."""
    node_name = declaring_node(gated_api)
    free = Pool(node_name, (Device(name="link-0"),), needs_node_preparation=False)
    for _, items in published(gated_api, node_name, free):
        assert skips_by_pool(items) == {free.name: None}


def test_not_where_the_cluster_has_the_gate_off(api: Any) -> None:
    # The session's control plane runs with DRAOptionalNodeOperations off (its default).
    node_name = declaring_node(api, "DRAOptionalNodeOperations")
    free = Pool(node_name, (Device(name="link-0"),), needs_node_preparation=False)
    for publisher, items in published(api, node_name, free):
        assert skips_by_pool(items) == {free.name: None}
        # Left out, not sent and dropped by the apiserver.
        assert publisher.metrics.dropped_fields_total.get() == 0


def test_a_dropped_field_is_reported_once_and_not_sent_again(api: Any) -> None:
    """A publisher that does not ask the cluster (every field kept) meets an apiserver with
    the gate off: the loss is counted once, and the slices settle (no rewrite loop)."""
    node_name = declaring_node(api, "DRAOptionalNodeOperations")
    free = Pool(node_name, (Device(name="link-0"),), needs_node_preparation=False)
    for publisher, items in published(api, node_name, free, detect=False):
        assert skips_by_pool(items) == {free.name: None}
        assert publisher.metrics.dropped_fields_total.get() == 1
        # Someone touches the slice: the pool is synced again, and nothing is rewritten.
        (item,) = items
        slices = Resource(api, RESOURCE_SLICES)
        slices.patch(item["metadata"]["name"], {"metadata": {"labels": {"touched": "yes"}}})
        settle(publisher, slices, node_name)
        (after,) = node_slices(slices, node_name)
        assert after["metadata"]["labels"]["touched"] == "yes"
        assert after["metadata"]["generation"] == item["metadata"]["generation"]
        assert publisher.metrics.dropped_fields_total.get() == 1
