"""Builders for the objects a driver's tests create: claims with opaque config, pods using
them, and the allocation kube-scheduler would write.

Each builder returns a plain dict, the body the apiserver takes (resource.k8s.io/v1), so a
test can change any field before creating it. :func:`allocate` writes what the scheduler
writes when a test runs without one (``drakit_cluster`` has none): the allocation result
and the pod's reservation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drakit.kubeapi.resources import PODS, RESOURCE_CLAIMS, Resource

Body = dict[str, Any]
#: The image of builder pods: the kubelet harness never runs it.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def opaque_config(driver: str, parameters: Mapping[str, Any], requests: Sequence[str] = ()) -> Body:
    """One ``spec.devices.config[]`` entry: ``parameters`` for ``driver``'s backend (its
    ``config_model``), for the named requests (all of the claim's when empty)."""
    entry: Body = {"opaque": {"driver": driver, "parameters": dict(parameters)}}
    if requests:
        entry["requests"] = list(requests)
    return entry


def claim(
    name: str,
    device_class: str,
    *,
    count: int = 1,
    request: str = "dev",
    config: Iterable[Body] = (),
) -> Body:
    """A ResourceClaim for ``count`` devices of ``device_class`` in one request named
    ``request``, with ``config`` entries (see :func:`opaque_config`)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": request,
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ],
                "config": list(config),
            }
        },
    }


def pod(name: str, node: str, claims: Sequence[str], container: str = "main") -> Body:
    """A Pod bound to ``node`` whose one container uses every claim in ``claims`` (by name)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
            "containers": [
                {
                    "name": container,
                    "image": PAUSE_IMAGE,
                    "resources": {"claims": [{"name": c} for c in claims]},
                }
            ],
        },
    }


@dataclass(frozen=True)
class Allocated:
    """One device of an allocation: ``pool`` (the node's name for drakit's publisher unless
    the backend names its pools) and ``device``; ``request`` as in the claim."""

    pool: str
    device: str
    request: str = "dev"


def allocate(
    api: Any,
    namespace: str,
    pod_body: Body,
    claims: Sequence[tuple[Body, Sequence[Allocated]]],
    *,
    driver: str,
) -> tuple[list[Body], Body]:
    """Create each claim and the pod, then write, for each claim, the allocation of its
    devices and the pod's reservation as kube-scheduler would (the claim's config entries
    copied ``FromClaim``).

    Returns the stored claims and pod. The devices are not checked against what the driver
    published: a test may allocate what the scheduler would refuse, to see the plugin refuse.
    """
    resource = Resource(api, RESOURCE_CLAIMS)
    stored = [(resource.create(body, namespace), devices) for body, devices in claims]
    created_pod = Resource(api, PODS).create(pod_body, namespace)
    reservation = {
        "resource": "pods",
        "name": created_pod["metadata"]["name"],
        "uid": created_pod["metadata"]["uid"],
    }
    allocated = []
    for obj, devices in stored:
        configs = obj["spec"]["devices"].get("config") or []
        results = [
            {"request": d.request, "driver": driver, "pool": d.pool, "device": d.device}
            for d in devices
        ]
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": results,
                    "config": [{**c, "source": "FromClaim"} for c in configs],
                }
            },
            "reservedFor": [reservation],
        }
        allocated.append(dict(resource.update_status(obj)))
    return allocated, dict(created_pod)
