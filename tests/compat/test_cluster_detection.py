"""drakit meets the Kubernetes under test and adapts to it (``make test-compat`` runs this
once per supported minor; ``make test`` once for the default).

The other ``compat`` tests are the existing rigs run against that minor's binaries: its
kubelet harness registers and prepares through drakit's plugin
(tests/integration/test_kubelet_harness.py), its kube-scheduler allocates from drakit's
slices (tests/integration/publisher/test_slices_with_scheduler.py), drakit's controller
generates claims and schedules opted-in pods (tests/e2e/test_claim_flow.py,
tests/integration/controller/test_scheduling.py), and the chart passes server-side dry run
with the admission policy holding for node-bound tokens (tests/integration/deploy/).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.waiting import eventually
from integration.publisher.publisher_support import Pool, StaticBackend, make_node

from drakit.allocator.model import CounterSet, Device
from drakit.kubeapi.client import load_client
from drakit.kubeapi.clusterversion import (
    MinorFacts,
    detect,
    features_for_cluster,
    kubelet_health_services_for_node,
)
from drakit.kubeapi.resources import NODES, RESOURCE_SLICES, Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.publisher import Publisher

pytestmark = [pytest.mark.integration, pytest.mark.compat]

DRIVER = "compat.drakit.dev"


@pytest.fixture(scope="module")
def api(cluster: LocalCluster) -> Any:
    return load_client(cluster.kubeconfig, qps=200, burst=400)


@pytest.fixture
def node(api: Any) -> Iterator[str]:
    name = f"compat-{uuid.uuid4().hex[:8]}"
    make_node(api, name)
    yield name
    Resource(api, NODES).delete(name)


def test_detection_reports_the_version_under_test_and_its_gates(
    api: Any, kube_version: str, kube_facts: MinorFacts, cluster: LocalCluster
) -> None:
    info = detect(api)
    assert info.git_version == kube_version
    assert info.minor == kube_facts.minor
    assert "v1" in info.resource_versions
    assert info.gates is not None, "the admin may read /metrics, so gates are read, not assumed"
    assert info.gate("DRAListTypeAttributes") == ("DRAListTypeAttributes" in cluster.feature_gates)


def test_controller_allocates_with_the_features_of_the_cluster(
    api: Any, kube_facts: MinorFacts
) -> None:
    features = features_for_cluster(api)
    assert features is not None
    assert features.partitionable_devices == ("DRAPartitionableDevices" in kube_facts.default_on)
    assert features.consumable_capacity == ("DRAConsumableCapacity" in kube_facts.default_on)
    assert features.prioritized_list


def test_node_plugin_advertises_the_health_services_its_kubelet_calls(
    api: Any, node: str, kube_facts: MinorFacts
) -> None:
    # The test node has no kubelet version, so the apiserver's minor decides.
    assert kubelet_health_services_for_node(api, node) == kube_facts.kubelet_health_services


def _partitionable_pool(name: str) -> Pool:
    counters = CounterSet.from_dict({"name": "gpu-0", "counters": {"mem": {"value": "40Gi"}}})
    half = {"counterSet": "gpu-0", "counters": {"mem": {"value": "20Gi"}}}
    devices = (
        Device.from_dict({"name": "plain-0"}),
        Device.from_dict({"name": "half-0", "consumesCounters": [half]}),
        Device.from_dict({"name": "half-1", "consumesCounters": [half]}),
    )
    return Pool(name, devices, (counters,))


def test_publisher_writes_only_the_fields_the_cluster_keeps(
    api: Any, node: str, kube_facts: MinorFacts
) -> None:
    publisher = Publisher(
        api, DRIVER, node, StaticBackend([_partitionable_pool(node)]), detect_cluster=True
    )
    publisher.start()
    try:
        slices = Resource(api, RESOURCE_SLICES)

        def published() -> list[Any]:
            items = slices.list(field_selector=f"spec.driver={DRIVER},spec.nodeName={node}")
            return list(items.items)

        def names() -> set[str]:
            return {d["name"] for s in published() for d in s["spec"].get("devices", [])}

        if "DRAPartitionableDevices" in kube_facts.default_on:
            expected = {"plain-0", "half-0", "half-1"}
        else:
            # Without counters the halves could be handed out twice: withheld on purpose.
            expected = {"plain-0"}
        eventually(lambda: names() == expected, f"devices {sorted(expected)} published", 30)
        has_counters = any(s["spec"].get("sharedCounters") for s in published())
        assert has_counters == ("DRAPartitionableDevices" in kube_facts.default_on)
        assert publisher.metrics.dropped_fields_total.get() == 0
    finally:
        publisher.stop()
