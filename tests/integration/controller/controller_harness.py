"""Builders for the controller's integration tests and a controller on a background thread.

Imported by the tests of this folder (pytest puts the folder on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from drakit.controller.app import Controller
from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)


class Objects:
    """Create test objects through the real API."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.pods = Resource(api, PODS)
        self.claims = Resource(api, RESOURCE_CLAIMS)
        self.templates = Resource(api, RESOURCE_CLAIM_TEMPLATES)
        self.slices = Resource(api, RESOURCE_SLICES)
        self.classes = Resource(api, DEVICE_CLASSES)
        self.nodes = Resource(api, NODES)
        #: A driver name of its own per test, so devices of other tests never match.
        self.driver = f"{uuid.uuid4().hex[:8]}.test.drakit.dev"
        self._created: list[tuple[Resource, str]] = []  # cluster-scoped objects to delete

    def cleanup(self) -> None:
        """Delete the cluster-scoped objects this instance created (namespaces are the
        caller's), so later tests do not see this test's nodes and devices."""
        for resource, name in reversed(self._created):
            with contextlib.suppress(ApiError):
                resource.delete(name)
        self._created.clear()

    def device_class(self, name: str | None = None) -> str:
        name = name or f"gpu-{self.driver.split('.')[0]}"
        selector = {"cel": {"expression": f'device.driver == "{self.driver}"'}}
        self.classes.create({"metadata": {"name": name}, "spec": {"selectors": [selector]}})
        self._created.append((self.classes, name))
        return name

    def node(self, name: str, devices: int = 8, *, labels: dict[str, str] | None = None) -> None:
        """A Ready fake node with a ResourceSlice of ``devices`` devices of this test's driver."""
        self.nodes.create({"metadata": {"name": name, "labels": labels or {}}})
        self._created.append((self.nodes, name))
        status = {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Fake"}],
            # kube-scheduler counts pods against allocatable "pods".
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        }
        node = self.nodes.get(name)
        node = self.nodes.update_status({**node, "status": status})
        # The TaintNodesByCondition admission plugin taints new nodes not-ready; the node
        # lifecycle controller (not running) would remove the taint once the node is Ready.
        taints = [t for t in node["spec"].get("taints") or () if "not-ready" not in t["key"]]
        self.nodes.update({**node, "spec": {**node["spec"], "taints": taints}})
        if devices:
            self.slice(name, devices)

    def slice(self, node: str, devices: int) -> None:
        self._created.append((self.slices, f"{node}-{self.driver.split('.')[0]}"))
        self.slices.create(
            {
                "metadata": {"name": f"{node}-{self.driver.split('.')[0]}"},
                "spec": {
                    "driver": self.driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"dev-{i}"} for i in range(devices)],
                },
            }
        )

    def template(self, namespace: str, name: str, device_class: str, **extra: Any) -> KubeObject:
        spec: dict[str, Any] = {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
                }
            }
        }
        if extra:
            spec["metadata"] = extra
        return self.templates.create(
            {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        )

    def claim(self, namespace: str, name: str, device_class: str) -> KubeObject:
        return self.claims.create(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
                    }
                },
            }
        )

    def pod(
        self,
        namespace: str,
        name: str,
        *,
        templates: dict[str, str] | None = None,
        claims: dict[str, str] | None = None,
        scheduler: str = "drakit",
        node_name: str | None = None,
        tolerate_all: bool = True,
        node_selector: dict[str, str] | None = None,
    ) -> KubeObject:
        resource_claims = [
            {"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()
        ] + [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": c["name"]} for c in resource_claims]},
                }
            ],
            "resourceClaims": resource_claims,
        }
        if tolerate_all:
            spec["tolerations"] = [{"operator": "Exists"}]
        if node_selector:
            spec["nodeSelector"] = node_selector
        if node_name:
            spec["nodeName"] = node_name
        return self.pods.create({"metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def pod_claims_by_name(self, namespace: str, name: str) -> list[KubeObject]:
        """The claim called ``name`` (a list: empty when it does not exist)."""
        return [c for c in self.claims.list(namespace).items if c["metadata"]["name"] == name]

    def pod_claims(self, namespace: str, pod_name: str) -> list[KubeObject]:
        """Claims in the namespace controlled by the pod."""
        pod = self.pods.get(pod_name, namespace)
        return [
            c
            for c in self.claims.list(namespace).items
            if any(
                r.get("uid") == pod["metadata"]["uid"] and r.get("controller")
                for r in c["metadata"].get("ownerReferences") or ()
            )
        ]


class RunningController:
    """A controller on a background thread; ``stop()`` ends it."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self._stop = threading.Event()
        self._thread = threading.Thread(target=controller.run, args=(self._stop,), daemon=True)

    def start(self) -> RunningController:
        self._thread.start()
        if not self.controller.started.wait(60):
            raise RuntimeError("controller did not start")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


class ClaimHistory:
    """Every version of one claim the apiserver reports through a watch, in order (the last
    one is its final state when it was deleted)."""

    def __init__(self, claims: Resource, namespace: str, name: str) -> None:
        self.versions: list[KubeObject] = []
        self.deleted = threading.Event()
        start = claims.get(name, namespace)
        self.versions.append(start)
        self._stream = claims.watch(
            namespace,
            resource_version=start["metadata"]["resourceVersion"],
            field_selector=f"metadata.name={name}",
        )
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        for event in self._stream:
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                self.versions.append(event.object)
            if event.type == "DELETED":
                self.deleted.set()
                return

    def stop(self) -> None:
        self._stream.close()


class ControllerProcess:
    """``drakit controller`` as a real process (so it can be killed with SIGKILL)."""

    def __init__(self, kubeconfig: str, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self._log = log_path.open("ab")
        drakit = Path(sys.executable).with_name("drakit")
        self.process = subprocess.Popen(
            [str(drakit), "controller", "--kubeconfig", kubeconfig, "--log-format", "json",
             *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL: no clean-up, no Lease release."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self._log.close()

    def terminate(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            code = self.process.wait(60)
        finally:
            self._log.close()
        return code

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for raw in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
        return lines
