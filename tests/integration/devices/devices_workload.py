"""A DRA workload on two nodes with every kind of device ``drakit devices`` tells apart.

node-a, pool ``node-a`` (plain devices):
  gpu-0  allocated to <ns>/plain (reserved for pod-a)
  gpu-1  free
  gpu-2  tainted example.com/maintenance:NoSchedule
  gpu-3  tainted <driver>/unhealthy:NoSchedule (unhealthy)
  gpu-4  held only by <admin-ns>/watcher with adminAccess (reserved for pod-admin)
node-b, pool ``node-b-part`` (partitionable: a counters-only slice + a devices slice):
  counter set gpu-counters: memory 40Gi
  part-full (40Gi), part-half-0 (20Gi, allocated to <ns>/part for pod-b), part-half-1 (20Gi)
node-b, pool ``node-b-shared`` (consumable capacity, allowMultipleAllocations):
  shared-0  memory 16Gi, shared by <ns>/share-1 (4Gi, pod-c) and <ns>/share-2 (2Gi, pod-d)
  shared-1  memory 16Gi, free

Every name carries a random suffix so that the session's other tests never see these objects.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NAMESPACES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


@dataclass
class Workload:
    api: Any
    namespace: str
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    created: list[tuple[Resource, str, str | None]] = field(default_factory=list)

    @property
    def driver(self) -> str:
        return f"gpu-{self.suffix}.example.com"

    @property
    def admin_namespace(self) -> str:
        return f"admin-{self.suffix}"

    @property
    def device_class(self) -> str:
        return f"plain-{self.suffix}"

    # -- objects ----------------------------------------------------------------------------

    def create(self) -> None:
        namespaces = Resource(self.api, NAMESPACES)
        self._keep(
            namespaces,
            namespaces.create(
                {
                    "metadata": {
                        "name": self.admin_namespace,
                        "labels": {ADMIN_ACCESS_LABEL: "true"},
                    }
                }
            ),
        )
        slices = Resource(self.api, RESOURCE_SLICES)
        for body in self.slice_bodies():
            self._keep(slices, slices.create(body))
        classes = Resource(self.api, DEVICE_CLASSES)
        self._keep(
            classes,
            classes.create(
                {
                    "metadata": {"name": self.device_class},
                    "spec": {
                        "selectors": [
                            {
                                "cel": {
                                    "expression": f'device.driver == "{self.driver}" && '
                                    f'device.attributes["{self.driver}"].kind == "plain"'
                                }
                            }
                        ]
                    },
                }
            ),
        )
        self.claim("plain", self.namespace, [self.result("gpu-0", "node-a")], ["pod-a"])
        self.claim(
            "watcher",
            self.admin_namespace,
            [self.result("gpu-4", "node-a", adminAccess=True)],
            ["pod-admin"],
            admin=True,
        )
        self.claim("part", self.namespace, [self.result("part-half-0", "node-b-part")], ["pod-b"])
        for name, pod, amount, share in (
            ("share-1", "pod-c", "4Gi", "1"),
            ("share-2", "pod-d", "2Gi", "2"),
        ):
            self.claim(
                name,
                self.namespace,
                [
                    self.result(
                        "shared-0",
                        "node-b-shared",
                        shareID=f"00000000-0000-4000-8000-00000000000{share}",
                        consumedCapacity={"memory": amount},
                    )
                ],
                [pod],
            )

    def delete(self) -> None:
        for resource, name, namespace in reversed(self.created):
            # Already gone is fine: a namespace takes its claims with it.
            with contextlib.suppress(Exception):
                resource.delete(name, namespace)

    def _keep(self, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        self.created.append((resource, meta["name"], meta.get("namespace")))
        return obj

    def result(self, device: str, pool: str, **extra: Any) -> dict[str, Any]:
        return {"request": "req", "driver": self.driver, "pool": pool, "device": device, **extra}

    def claim(
        self,
        name: str,
        namespace: str,
        results: list[dict[str, Any]],
        pods: list[str],
        *,
        admin: bool = False,
    ) -> dict[str, Any]:
        """Create a claim, then allocate and reserve it through the status subresource."""
        claims = Resource(self.api, RESOURCE_CLAIMS)
        exactly: dict[str, Any] = {"deviceClassName": self.device_class}
        if admin:
            exactly["adminAccess"] = True
        obj = self._keep(
            claims,
            claims.create(
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"devices": {"requests": [{"name": "req", "exactly": exactly}]}},
                }
            ),
        )
        obj["status"] = {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [
                {"resource": "pods", "name": pod, "uid": str(uuid.uuid4())} for pod in pods
            ],
        }
        return claims.update_status(obj)

    def slice_bodies(self) -> list[dict[str, Any]]:
        d = self.driver

        def device(name: str, kind: str, **extra: Any) -> dict[str, Any]:
            return {"name": name, "attributes": {"kind": {"string": kind}}, **extra}

        def taint(key: str) -> dict[str, Any]:
            return {"taints": [{"key": key, "effect": "NoSchedule"}]}

        def pool(name: str, count: int = 1) -> dict[str, Any]:
            return {"name": name, "generation": 1, "resourceSliceCount": count}

        def consumes(amount: str) -> dict[str, Any]:
            return {
                "consumesCounters": [
                    {"counterSet": "gpu-counters", "counters": {"memory": {"value": amount}}}
                ]
            }

        shared_capacity = {
            "allowMultipleAllocations": True,
            "capacity": {
                "memory": {
                    "value": "16Gi",
                    "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}},
                }
            },
        }
        return [
            {
                "metadata": {"name": f"{self.suffix}-node-a"},
                "spec": {
                    "driver": d,
                    "nodeName": "node-a",
                    "pool": pool("node-a"),
                    "devices": [
                        device("gpu-0", "plain"),
                        device("gpu-1", "plain"),
                        device("gpu-2", "plain", **taint("example.com/maintenance")),
                        device("gpu-3", "plain", **taint(f"{d}/unhealthy")),
                        device("gpu-4", "plain"),
                    ],
                },
            },
            {
                "metadata": {"name": f"{self.suffix}-node-b-counters"},
                "spec": {
                    "driver": d,
                    "nodeName": "node-b",
                    "pool": pool("node-b-part", 2),
                    "sharedCounters": [
                        {"name": "gpu-counters", "counters": {"memory": {"value": "40Gi"}}}
                    ],
                },
            },
            {
                "metadata": {"name": f"{self.suffix}-node-b-part"},
                "spec": {
                    "driver": d,
                    "nodeName": "node-b",
                    "pool": pool("node-b-part", 2),
                    "devices": [
                        device("part-full", "partition", **consumes("40Gi")),
                        device("part-half-0", "partition", **consumes("20Gi")),
                        device("part-half-1", "partition", **consumes("20Gi")),
                    ],
                },
            },
            {
                "metadata": {"name": f"{self.suffix}-node-b-shared"},
                "spec": {
                    "driver": d,
                    "nodeName": "node-b",
                    "pool": pool("node-b-shared"),
                    "devices": [
                        device("shared-0", "shared", **shared_capacity),
                        device("shared-1", "shared", **shared_capacity),
                    ],
                },
            },
        ]
