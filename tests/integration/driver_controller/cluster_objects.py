"""Test objects for the scheduler cluster of this folder: fake Ready nodes with one
ResourceSlice each, a DeviceClass, claims and pods. Each ``Made`` has a driver name of its own,
so devices of other tests never match; ``cleanup()`` deletes the cluster-scoped objects."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

PAUSE = "registry.k8s.io/pause:3.10"


class Made:
    def __init__(self, api: Any) -> None:
        self.pods = Resource(api, PODS)
        self.claims = Resource(api, RESOURCE_CLAIMS)
        self.slices = Resource(api, RESOURCE_SLICES)
        self.classes = Resource(api, DEVICE_CLASSES)
        self.nodes = Resource(api, NODES)
        self.tag = uuid.uuid4().hex[:8]
        self.driver = f"{self.tag}.test.drakit.dev"
        self._created: list[tuple[Resource, str]] = []

    def cleanup(self) -> None:
        for resource, name in reversed(self._created):
            with contextlib.suppress(ApiError):
                resource.delete(name)

    def node(self, devices: list[dict[str, Any]]) -> str:
        """A Ready, untainted fake node with a slice of ``devices`` of this driver."""
        name = f"n-{self.tag}-{len(self._created)}"
        self.nodes.create({"metadata": {"name": name}})
        self._created.append((self.nodes, name))
        status = {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}],
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        }
        node = self.nodes.update_status({**self.nodes.get(name), "status": status})
        taints = [t for t in node["spec"].get("taints") or () if "not-ready" not in t["key"]]
        self.nodes.update({**node, "spec": {**node["spec"], "taints": taints}})
        self.slices.create(
            {
                "metadata": {"name": name},
                "spec": {
                    "driver": self.driver,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
        self._created.append((self.slices, name))
        return name

    def device_class(self, extended_resource_name: str | None = None) -> str:
        name = f"c-{self.tag}"
        spec: dict[str, Any] = {
            "selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]
        }
        if extended_resource_name:
            spec["extendedResourceName"] = extended_resource_name
        self.classes.create({"metadata": {"name": name}, "spec": spec})
        self._created.append((self.classes, name))
        return name

    def claim(self, namespace: str, name: str, device_class: str) -> KubeObject:
        request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
        return self.claims.create(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"devices": {"requests": [request]}},
            }
        )

    def pod(
        self,
        namespace: str,
        name: str,
        *,
        claims: dict[str, str] | None = None,
        limits: dict[str, str] | None = None,
        scheduler: str = "default-scheduler",
    ) -> KubeObject:
        pod_claims = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
        container: dict[str, Any] = {"name": "main", "image": PAUSE, "resources": {}}
        if pod_claims:
            container["resources"]["claims"] = [{"name": c["name"]} for c in pod_claims]
        if limits:
            container["resources"]["limits"] = limits
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [container],
            "tolerations": [{"operator": "Exists"}],
        }
        if pod_claims:
            spec["resourceClaims"] = pod_claims
        return self.pods.create({"metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def node_of(self, namespace: str, pod: str) -> str:
        return str(self.pods.get(pod, namespace)["spec"].get("nodeName") or "")
