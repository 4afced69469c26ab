"""Builders for the checker's tests: real API objects in a real apiserver, real node files.

States the checker must judge are written directly (claim status, pod phase, checkpoint
and CDI files) the way a controller, a kubelet or a node plugin would write them, broken
ones included. The node files are written by the node plugin's own writers
(``drakit.node_plugin.checkpoint``, ``drakit.node_plugin.cdi``), so the checker's
independent reading is tested against the real format.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, Resource
from drakit.node_plugin.cdi import CDIDevice, CDISpecs
from drakit.node_plugin.checkpoint import COMPLETED, Checkpoint, ClaimEntry
from drakit.node_plugin.driver import PreparedDevice
from drakit.plugin import ContainerEdits
from soak.checker import Bounds, Checker, NodeView

FINALIZER = "resource.kubernetes.io/delete-protection"
BOOT_ID = "soak-checker-test-boot"


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class World:
    """One test's nodes, slices, claims, pods and node files; ``cleanup()`` removes them."""

    def __init__(self, api: Any, namespace: str, root: Path) -> None:
        self.api = api
        self.namespace = namespace
        self.root = root
        self.driver = f"{uuid.uuid4().hex[:8]}.soak.drakit.dev"
        self.nodes = Resource(api, NODES)
        self.slices = Resource(api, RESOURCE_SLICES)
        self.claims = Resource(api, RESOURCE_CLAIMS)
        self.pods = Resource(api, PODS)
        self.views: dict[str, NodeView] = {}
        self._cleanups: list[Callable[[], object]] = []

    def cleanup(self) -> None:
        """Drop finalizers (so the namespace can go) and delete cluster-scoped objects."""
        for claim in self.claims.list(self.namespace).items:
            if claim["metadata"].get("finalizers"):
                with contextlib.suppress(ApiError):
                    self.claims.patch(
                        claim["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                        namespace=self.namespace,
                    )
        for undo in reversed(self._cleanups):
            with contextlib.suppress(ApiError):
                undo()

    # -- cluster-scoped ----------------------------------------------------------------

    def node(self, label: str = "") -> str:
        """A Node object, its plugin folders (checkpoint, CDI) and its NodeView."""
        name = f"soak-{uuid.uuid4().hex[:8]}"
        labels = {"soak-test/label": label} if label else {}
        self.nodes.create({"metadata": {"name": name, "labels": labels}})
        self._cleanups.append(lambda: self.nodes.delete(name))
        folder = self.root / name
        (folder / "cdi").mkdir(parents=True)
        self.views[name] = NodeView(name, folder / "plugin" / "checkpoint.json", folder / "cdi")
        return name

    def slice(
        self,
        node: str,
        devices: list[dict[str, Any]],
        *,
        pool: str | None = None,
        counters: list[dict[str, Any]] | None = None,
        generation: int = 1,
        count: int = 1,
        suffix: str = "",
    ) -> str:
        """A ResourceSlice of this test's driver on ``node`` (devices or shared counters)."""
        name = f"{node}-{self.driver.split('.')[0]}{suffix}"
        spec: dict[str, Any] = {
            "driver": self.driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
        }
        if counters is not None:
            spec["sharedCounters"] = counters
        else:
            spec["devices"] = devices
        self.slices.create({"metadata": {"name": name}, "spec": spec})
        self._cleanups.append(lambda: self.slices.delete(name))
        return name

    # -- claims and pods ---------------------------------------------------------------

    def claim(
        self, name: str, *, finalizer: bool = True, owner: KubeObject | None = None
    ) -> KubeObject:
        """An unallocated claim with one request ``gpu`` (optionally owned by a pod)."""
        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if finalizer:
            metadata["finalizers"] = [FINALIZER]
        if owner is not None:
            metadata["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ]
            metadata["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        request = {"name": "gpu", "exactly": {"deviceClassName": "any"}}
        return self.claims.create(
            {"metadata": metadata, "spec": {"devices": {"requests": [request]}}}
        )

    def allocate(
        self,
        claim: KubeObject,
        node: str,
        devices: list[str],
        *,
        pool: str | None = None,
        reserved_for: list[KubeObject] = (),  # type: ignore[assignment]
        consumed: dict[str, str] | None = None,
    ) -> KubeObject:
        """Write ``status.allocation`` (node selector of ``node``) and ``reservedFor``, as an
        allocator writes them: no check of the finalizer or the devices is made here."""
        results = []
        for device in devices:
            result: dict[str, Any] = {
                "request": "gpu",
                "driver": self.driver,
                "pool": pool or node,
                "device": device,
            }
            if consumed is not None:
                result["shareID"] = str(uuid.uuid4())
                result["consumedCapacity"] = consumed
            results.append(result)
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        status: dict[str, Any] = {
            "allocation": {"devices": {"results": results}, "nodeSelector": selector}
        }
        if reserved_for:
            status["reservedFor"] = [
                {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                for p in reserved_for
            ]
        current = self.claims.get(claim["metadata"]["name"], self.namespace)
        return self.claims.update_status({**current, "status": status})

    def pod(
        self, name: str, claims: dict[str, str], node: str | None, *, running: bool
    ) -> KubeObject:
        """A pod using ``claims`` (entry -> claim name), bound to ``node``, maybe Running."""
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": entry} for entry in claims]},
                }
            ],
            "resourceClaims": [{"name": e, "resourceClaimName": c} for e, c in claims.items()],
        }
        if node:
            spec["nodeName"] = node
        pod = self.pods.create(
            {"metadata": {"name": name, "namespace": self.namespace}, "spec": spec}
        )
        if running:
            pod = self.pods.update_status({**pod, "status": {"phase": "Running"}})
        return pod

    # -- node files --------------------------------------------------------------------

    def prepare(
        self, node: str, claim: KubeObject, devices: list[str], *, cdi: bool = True
    ) -> None:
        """Record ``claim`` PrepareCompleted in ``node``'s checkpoint (and its CDI spec), with
        the node plugin's own writers."""
        view = self.views[node]
        uid = claim["metadata"]["uid"]
        specs = CDISpecs(view.cdi_dir, self.driver)
        names = [specs.device_name(uid, d) for d in devices]
        prepared = tuple(
            PreparedDevice(("gpu",), node, d, (specs.device_id(n),))
            for d, n in zip(devices, names, strict=True)
        )
        checkpoint = Checkpoint(view.checkpoint_path, boot_id=lambda: BOOT_ID)
        checkpoint.refresh()
        checkpoint.put(
            ClaimEntry(uid, self.namespace, claim["metadata"]["name"], COMPLETED, devices=prepared)
        )
        view.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.save()
        if cdi:
            specs.write(uid, [CDIDevice(n, ContainerEdits(env=(f"DEV={n}",))) for n in names])

    def unprepare(self, node: str, claim: KubeObject) -> None:
        """Remove ``claim`` from ``node``'s checkpoint, leaving its CDI spec behind."""
        checkpoint = Checkpoint(self.views[node].checkpoint_path, boot_id=lambda: BOOT_ID)
        checkpoint.refresh()
        checkpoint.remove(claim["metadata"]["uid"])
        checkpoint.save()

    def checker(self, clock: FakeClock | None = None, **bounds: float) -> Checker:
        """A checker of this world's driver, nodes and namespace (bounds default to 0 s)."""
        values = {"recovery_s": 0.0, "liveness_s": 0.0, "slice_heal_s": 0.0, "confirm_s": 0.0}
        return Checker(
            self.api,
            self.driver,
            list(self.views.values()),
            Bounds(**{**values, **bounds}),
            namespaces=[self.namespace],
            **({"clock": clock} if clock else {}),
        )


def gpus(count: int) -> list[dict[str, Any]]:
    return [{"name": f"gpu-{i}"} for i in range(count)]


def proxied_kubeconfig(kubeconfig: str, port: int, folder: Path) -> str:
    """A copy of ``kubeconfig`` whose server is a chaos proxy on ``port`` (same
    certificates: TLS passes through the proxy)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)
