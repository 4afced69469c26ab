"""The real kube-scheduler v1.37.2 allocates devices from the slices drakit publishes.

A fake Node (Ready, no kubelet), the publisher, a DeviceClass, a ResourceClaim created by the
test (kube-controller-manager does not run, so nothing would create one from a template) and a
pod that references it by ``resourceClaimName``. The scheduler's own allocator must pick a
device from our slices and bind the pod to our node.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from publisher_support import DRIVER, Pool, StaticBackend, make_node

from drakit.allocator.model import CounterSet, Device
from drakit.kubeapi.client import load_client
from drakit.kubeapi.clusterversion import MinorFacts
from drakit.kubeapi.errors import NotFound
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    Resource,
)
from drakit.localcluster import LocalCluster
from drakit.node_plugin.publisher import Publisher

pytestmark = pytest.mark.integration

CLASS_NAME = "publisher-test.drakit.dev"


@pytest.fixture(scope="module")
def sched_api(cluster_with_scheduler: LocalCluster) -> Any:
    return load_client(cluster_with_scheduler.kubeconfig, qps=1000, burst=1000)


@pytest.fixture(scope="module")
def device_class(sched_api: Any) -> str:
    classes = Resource(sched_api, DEVICE_CLASSES)
    with contextlib.suppress(NotFound):
        classes.delete(CLASS_NAME)
    classes.create(
        {
            "metadata": {"name": CLASS_NAME},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    return CLASS_NAME


@pytest.fixture
def sched_node(sched_api: Any) -> Iterator[str]:
    name = f"sched-{uuid.uuid4().hex[:8]}"
    make_node(sched_api, name)
    nodes = Resource(sched_api, NODES)
    # The apiserver taints new Nodes not-ready until a kubelet reports; there is none here.
    node = nodes.get(name)
    node["spec"]["taints"] = []
    nodes.update(node)
    yield name
    with contextlib.suppress(NotFound):
        nodes.delete(name)


@pytest.fixture
def sched_namespace(sched_api: Any) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    namespaces = Resource(sched_api, NAMESPACES)
    namespaces.create({"metadata": {"name": name}})
    yield name
    namespaces.delete(name)


@pytest.fixture
def start_publisher(sched_api: Any) -> Iterator[Any]:
    started: list[Publisher] = []

    def start(node_name: str, pools: list[Pool]) -> Publisher:
        # As in the node plugin: the fields published follow the cluster's version.
        publisher = Publisher(
            sched_api, DRIVER, node_name, StaticBackend(pools), detect_cluster=True
        )
        publisher.start()
        started.append(publisher)
        return publisher

    yield start
    for publisher in started:
        publisher.stop()


def _claim(api: Any, namespace: str, name: str, selector: str, count: int = 1) -> None:
    Resource(api, RESOURCE_CLAIMS).create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": CLASS_NAME,
                                "selectors": [{"cel": {"expression": selector}}],
                                "count": count,
                            },
                        }
                    ]
                }
            },
        }
    )


def _pod(api: Any, namespace: str, name: str, claim: str) -> None:
    Resource(api, PODS).create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            },
        }
    )


def _allocated(api: Any, namespace: str, claim: str) -> list[dict[str, Any]]:
    obj = Resource(api, RESOURCE_CLAIMS).get(claim, namespace)
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _bound_node(api: Any, namespace: str, pod: str) -> str:
    return str(Resource(api, PODS).get(pod, namespace)["spec"].get("nodeName") or "")


def _unschedulable(api: Any, namespace: str, pod: str) -> bool:
    status = Resource(api, PODS).get(pod, namespace).get("status") or {}
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
    )


def _gpu(name: str, model: str) -> Device:
    return Device.from_dict(
        {
            "name": name,
            "attributes": {"model": {"string": model}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
    )


@pytest.mark.compat
def test_the_scheduler_allocates_a_device_from_published_slices(
    *,
    sched_api: Any,
    device_class: str,
    sched_node: str,
    sched_namespace: str,
    start_publisher: Any,
    eventually: Any,
) -> None:
    devices = (*(_gpu(f"gpu-{i}", "a100") for i in range(200)), _gpu("gpu-h100", "h100"))
    start_publisher(sched_node, [Pool(sched_node, devices)])
    _claim(
        sched_api,
        sched_namespace,
        "want-h100",
        f'device.attributes["{DRIVER}"].model == "h100"',
    )
    _pod(sched_api, sched_namespace, "workload", "want-h100")

    eventually(
        lambda: _bound_node(sched_api, sched_namespace, "workload") == sched_node,
        what="pod bound to the node that publishes the device",
    )
    (result,) = _allocated(sched_api, sched_namespace, "want-h100")
    assert (result["driver"], result["pool"], result["device"]) == (
        DRIVER,
        sched_node,
        "gpu-h100",
    )


def _partitionable_pool(node: str) -> Pool:
    counters = CounterSet.from_dict(
        {"name": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}
    )

    def device(name: str, kind: str, memory: str) -> Device:
        return Device.from_dict(
            {
                "name": name,
                "attributes": {"kind": {"string": kind}},
                "capacity": {"memory": {"value": memory}},
                "consumesCounters": [
                    {"counterSet": "gpu-0-mem", "counters": {"memory": {"value": memory}}}
                ],
            }
        )

    devices = (
        device("gpu-0", "whole", "40Gi"),
        device("gpu-0-half-0", "partition", "20Gi"),
        device("gpu-0-half-1", "partition", "20Gi"),
    )
    return Pool(node, devices, (counters,))


@pytest.mark.compat
def test_the_scheduler_honours_shared_counters_of_a_partitionable_device(
    *,
    sched_api: Any,
    device_class: str,
    sched_node: str,
    sched_namespace: str,
    start_publisher: Any,
    eventually: Any,
    kube_facts: MinorFacts,
) -> None:
    if "DRAPartitionableDevices" not in kube_facts.default_on:
        pytest.skip(f"partitionable devices are off by default in 1.{kube_facts.minor}")
    start_publisher(sched_node, [_partitionable_pool(sched_node)])
    kind = f'device.attributes["{DRIVER}"].kind'
    _claim(sched_api, sched_namespace, "halves", f'{kind} == "partition"', count=2)
    _pod(sched_api, sched_namespace, "uses-halves", "halves")
    eventually(
        lambda: _bound_node(sched_api, sched_namespace, "uses-halves") == sched_node,
        what="pod with both partitions bound",
    )
    assert sorted(r["device"] for r in _allocated(sched_api, sched_namespace, "halves")) == [
        "gpu-0-half-0",
        "gpu-0-half-1",
    ]

    # The partitions used up the GPU's memory counter: the whole GPU cannot be allocated.
    _claim(sched_api, sched_namespace, "whole", f'{kind} == "whole"')
    _pod(sched_api, sched_namespace, "uses-whole", "whole")
    eventually(
        lambda: _unschedulable(sched_api, sched_namespace, "uses-whole"),
        what="pod needing the whole GPU reported unschedulable",
    )
    assert _allocated(sched_api, sched_namespace, "whole") == []
    assert _bound_node(sched_api, sched_namespace, "uses-whole") == ""
