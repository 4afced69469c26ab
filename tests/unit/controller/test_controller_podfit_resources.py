"""NodeResourcesFit: pod requests (containers, init containers, sidecars, overhead, pod-level
resources) against allocatable minus what placed pods take."""

from __future__ import annotations

from typing import Any

from drakit.controller.podfit.requests import Requests, pod_requests
from drakit.controller.podfit.resources import (
    REASON_TOO_MANY_PODS,
    Allocatable,
    Used,
    allocatable_of,
    dra_extended_reason,
    insufficient_resources,
)


def container(name: str = "c", **requests: str) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": dict(requests)}}


def pod(*containers: Any, init: Any = (), **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": list(containers), "initContainers": list(init), **spec},
    }


def node(**allocatable: str) -> Allocatable:
    return Allocatable.of({"status": {"allocatable": allocatable}})


def test_requests_sum_containers_in_millicores_and_bytes():
    r = pod_requests(pod(container(cpu="500m", memory="1Gi"), container(cpu="1", memory="1Mi")))
    assert (r.milli_cpu, r.memory) == (1500, 2**30 + 2**20)


def test_an_init_container_larger_than_the_containers_sets_the_request():
    r = pod_requests(pod(container(cpu="1"), init=[container("i", cpu="3")]))
    assert r.milli_cpu == 3000


def test_sidecars_add_to_the_containers_and_to_later_init_containers():
    sidecar = {**container("s", cpu="1"), "restartPolicy": "Always"}
    later = container("i", cpu="2")
    r = pod_requests(pod(container(cpu="1"), init=[sidecar, later]))
    assert r.milli_cpu == 3000  # max(1 + 1 sidecar, 2 init + 1 sidecar)


def test_overhead_is_added_and_pod_level_requests_replace_the_container_sum():
    spec = {"overhead": {"cpu": "250m"}, "resources": {"requests": {"memory": "4Gi"}}}
    r = pod_requests(pod(container(cpu="1", memory="1Gi"), **spec))
    assert (r.milli_cpu, r.memory) == (1250, 4 * 2**30)


def test_scalar_resources_are_kept_and_unknown_native_names_ignored():
    r = pod_requests(pod(container(**{"example.com/gpu": "2", "hugepages-2Mi": "4Mi"})))
    assert r.scalar == {"example.com/gpu": 2, "hugepages-2Mi": 4 * 2**20}


def test_sixty_four_cpus_do_not_fit_a_two_cpu_node():
    assert insufficient_resources(Requests(milli_cpu=64000), node(cpu="2", pods="110"), Used()) == [
        "Insufficient cpu"
    ]


def test_requests_fit_only_into_what_placed_pods_left():
    used = Used(Requests(milli_cpu=1500, memory=2**30), pods=3)
    allocatable = node(cpu="2", memory="2Gi", pods="110")
    assert insufficient_resources(Requests(milli_cpu=500), allocatable, used) == []
    assert insufficient_resources(Requests(milli_cpu=501, memory=2**30 + 1), allocatable, used) == [
        "Insufficient cpu",
        "Insufficient memory",
    ]


def test_a_pod_requesting_nothing_still_needs_a_pod_slot():
    assert insufficient_resources(Requests(), node(pods="2"), Used(pods=2)) == [
        REASON_TOO_MANY_PODS
    ]
    assert insufficient_resources(Requests(), node(), Used()) == [REASON_TOO_MANY_PODS]
    assert insufficient_resources(Requests(), node(pods="2"), Used(pods=1)) == []


def test_an_unrequested_resource_is_not_checked_even_when_overcommitted():
    used = Used(Requests(milli_cpu=4000), pods=1)
    assert (
        insufficient_resources(Requests(memory=1), node(cpu="2", memory="1", pods="9"), used) == []
    )


def test_an_extended_resource_the_node_does_not_list_is_insufficient():
    request = Requests(scalar={"example.com/gpu": 1})
    assert insufficient_resources(request, node(pods="9"), Used()) == [
        "Insufficient example.com/gpu"
    ]
    listed = node(pods="9", **{"example.com/gpu": "1"})
    assert insufficient_resources(request, listed, Used()) == []


def test_an_extended_resource_a_device_class_maps_is_named_as_unsupported():
    request = Requests(scalar={"example.com/gpu": 1})
    assert insufficient_resources(request, node(pods="9"), Used(), {"example.com/gpu"}) == [
        dra_extended_reason("example.com/gpu")
    ]


def test_a_nodes_allocatable_is_read_again_when_the_node_changes():
    def version(rv: str, cpu: str) -> dict[str, Any]:
        return {"metadata": {"name": "n", "resourceVersion": rv},
                "status": {"allocatable": {"cpu": cpu}}}  # fmt: skip

    assert allocatable_of(version("1", "2")).milli_cpu == 2000
    assert allocatable_of(version("2", "4")).milli_cpu == 4000
