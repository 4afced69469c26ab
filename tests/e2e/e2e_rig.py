"""The end-to-end rig: two simulated nodes, each with a kubelet harness and a node plugin.

A :class:`NodeRig` is one node: a Ready Node object, its host folders under
``/tmp/dk-<id>/<node>``, the kubelet harness (the real v1.37.2 DRA manager
and plugin manager) and the current ``drakit node-plugin`` process(es). The
harness starts before the plugin because the DRA manager wipes the node's
ResourceSlices when it starts.

Object builders and :class:`ClaimHistory` (a watch that records every state
a namespace's claims go through) are here so that scenario tests read as
the flow they check.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kubelet import HarnessEvent, KubeletHarness
from helpers.waiting import eventually as wait_until

from drakit.kubeapi.errors import ApiError, NotFound
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import (
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Resource,
)
from drakit.localcluster import LocalCluster, stack
from drakit.localcluster.stack import DEVICE_CLASS, DRIVER, Component, NodeFolders

#: Generous bounds that only keep a broken run from hanging; nothing asserts on durations.
WAIT = 90.0
NODE_NAMES = ("e2e-node-a", "e2e-node-b")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def eventually(
    check: Callable[[], Any], what: str | Callable[[], str], timeout: float = WAIT
) -> Any:
    """:func:`helpers.waiting.eventually` with the e2e tier's default timeout."""
    return wait_until(check, what, timeout)


# -- one node -----------------------------------------------------------------------------------


@dataclass
class PluginInstance:
    """One running ``drakit node-plugin`` process and where to find it."""

    process: Component
    pod_uid: str
    metrics_url: str
    dra_socket: Path

    def metrics(self) -> str:
        return stack.scrape(self.metrics_url) or ""


@dataclass
class NodeRig:
    """A simulated node: Node object, folders, kubelet harness and node plugin(s)."""

    name: str
    folders: NodeFolders
    harness: KubeletHarness
    kubeconfig: str
    log_dir: Path
    plugins: list[PluginInstance] = field(default_factory=list)
    _instances: int = 0

    @property
    def plugin(self) -> PluginInstance:
        """The newest plugin instance (the one the kubelet uses)."""
        return self.plugins[-1]

    def start_plugin(self, pod_uid: str | None = None) -> PluginInstance:
        """Start a node plugin and wait until the kubelet harness registered it.

        ``pod_uid`` names the instance as the DaemonSet's downward API would;
        reuse it to restart "the same pod" (same socket names), pass a new one
        for the second instance of a rolling update.
        """
        from drakit.node_plugin.sockets import socket_paths  # noqa: PLC0415

        self._instances += 1
        pod_uid = pod_uid or f"{self.name}-{self._instances}-{uuid.uuid4().hex[:6]}"
        port = stack.allocate_port()
        process = Component(
            f"node-plugin {self.name} ({pod_uid})",
            stack.node_plugin_command(
                kubeconfig=self.kubeconfig,
                node=self.name,
                folders=self.folders,
                metrics_port=port,
                pod_uid=pod_uid,
            ),
            self.log_dir / f"node-plugin-{pod_uid}.log",
        )
        sockets = socket_paths(
            self.folders.registrar, self.folders.plugins / DRIVER, DRIVER, pod_uid
        )
        since = self.harness.mark()
        process.start()
        instance = PluginInstance(process, pod_uid, stack.metrics_url(port), sockets.dra)
        self.plugins.append(instance)
        self.wait_registered(instance, since)
        return instance

    def wait_registered(self, instance: PluginInstance, since: int) -> HarnessEvent:
        """The harness's ``registered`` event for ``instance`` (after event index ``since``)."""
        try:
            return self.harness.wait_for(
                "registered",
                driver=DRIVER,
                since=since,
                timeout=WAIT,
                where=lambda ev: ev.get("endpoint") == str(instance.dra_socket),
            )
        except AssertionError as err:
            raise AssertionError(f"{err}\nplugin log:\n{instance.process.log_tail(40)}") from err

    def stop_plugins(self) -> None:
        for instance in self.plugins:
            instance.process.terminate()
        self.plugins.clear()

    def cdi_spec_for(self, claim_uid: str) -> Path | None:
        """The CDI spec file whose name carries ``claim_uid``, if any."""
        matches = [p for p in self.folders.cdi_spec_files() if claim_uid in p.name]
        return matches[0] if matches else None


@dataclass
class E2EStack:
    """The running stack: control plane, controller and the simulated nodes by name."""

    cluster: LocalCluster
    client: Any
    controller: Component
    controller_metrics_url: str
    nodes: dict[str, NodeRig]
    root: Path

    @property
    def node_a(self) -> NodeRig:
        return self.nodes[NODE_NAMES[0]]

    @property
    def node_b(self) -> NodeRig:
        return self.nodes[NODE_NAMES[1]]


# -- objects ------------------------------------------------------------------------------------


def claim_template(name: str) -> KubeObject:
    """A ResourceClaimTemplate asking for one GPU of drakit's DeviceClass."""
    request = {"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": [request]}}}}


def pod(name: str, node: str, *, template: str) -> KubeObject:
    """A pod kept on ``node`` by a node selector whose container ``main`` uses a claim
    generated from ``template``; container ``sidecar`` uses none."""
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar", "image": PAUSE_IMAGE},
            ],
        },
    }


# -- the API, as the scenarios read it ----------------------------------------------------------


class Api:
    """Resources of one namespace, plus the cluster-wide ones the scenarios read."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.namespace = namespace
        self.pods = Resource(client, PODS)
        self.claims = Resource(client, RESOURCE_CLAIMS)
        self.templates = Resource(client, RESOURCE_CLAIM_TEMPLATES)
        self.slices = Resource(client, RESOURCE_SLICES)

    def create_pod(self, body: KubeObject) -> KubeObject:
        return self.pods.create(body, self.namespace)

    def get_pod(self, name: str) -> KubeObject | None:
        try:
            return self.pods.get(name, self.namespace)
        except NotFound:
            return None

    def get_claim(self, name: str) -> KubeObject | None:
        try:
            return self.claims.get(name, self.namespace)
        except NotFound:
            return None

    def bound_pod(self, name: str) -> KubeObject:
        """Wait until the pod is bound to a node and return it."""
        return eventually(
            lambda: (p := self.get_pod(name)) and p["spec"].get("nodeName") and p,
            f"pod {self.namespace}/{name} to be bound to a node",
        )

    def generated_claim_name(self, pod_name: str, pod_claim: str = "gpu") -> str:
        """Wait for ``pod.status.resourceClaimStatuses`` to name the generated claim."""

        def name() -> str | None:
            p = self.get_pod(pod_name)
            for status in ((p or {}).get("status") or {}).get("resourceClaimStatuses") or []:
                if status.get("name") == pod_claim and status.get("resourceClaimName"):
                    return str(status["resourceClaimName"])
            return None

        found: str = eventually(name, f"a claim generated for pod {self.namespace}/{pod_name}")
        return found

    def allocated_claim(self, name: str) -> KubeObject:
        """Wait until the claim has an allocation and return it."""
        return eventually(
            lambda: (c := self.get_claim(name)) and (c.get("status") or {}).get("allocation") and c,
            f"claim {self.namespace}/{name} to be allocated",
        )

    def delete_pod(self, name: str) -> None:
        with suppress(NotFound):
            self.pods.delete(name, self.namespace)

    def pod_gone(self, name: str) -> None:
        eventually(lambda: self.get_pod(name) is None, f"pod {self.namespace}/{name} to be gone")


def reserved_pod_names(claim_obj: KubeObject) -> set[str]:
    return {
        r.get("name", "")
        for r in (claim_obj.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods"
    }


def allocated_devices(claim_obj: KubeObject) -> list[tuple[str, str, str]]:
    """``(driver, pool, device)`` of every allocation result of the claim."""
    results = ((claim_obj.get("status") or {}).get("allocation") or {}).get("devices", {})
    return [(r["driver"], r["pool"], r["device"]) for r in results.get("results") or []]


class ClaimHistory:
    """Every watch event of the claims in one namespace, from the moment it starts.

    Deallocation followed by deletion can happen within milliseconds; the
    watch sees every intermediate state a poll could miss.
    """

    def __init__(self, api: Api) -> None:
        self._api = api
        self._events: list[tuple[str, KubeObject]] = []
        self._lock = threading.Lock()
        listed = api.claims.list(api.namespace)
        self._stream = api.claims.watch(
            api.namespace, resource_version=listed.resource_version, timeout_seconds=600
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream:
                with self._lock:
                    self._events.append((event.type, event.object))
        except ApiError:
            pass  # closed or failed: wait_deleted then reports what was seen

    def close(self) -> None:
        self._stream.close()
        self._thread.join(timeout=5)

    def states(self, name: str) -> list[tuple[str, KubeObject]]:
        with self._lock:
            return [(t, o) for t, o in self._events if o["metadata"]["name"] == name]

    def wait_deleted(self, name: str) -> KubeObject:
        """Wait for the DELETED event of claim ``name`` and return its last state."""

        def deleted() -> KubeObject | None:
            for event_type, obj in self.states(name):
                if event_type == "DELETED":
                    return obj
            return None

        found: KubeObject = eventually(deleted, f"claim {self._api.namespace}/{name} deleted")
        return found


@contextmanager
def claim_history(api: Api) -> Iterator[ClaimHistory]:
    history = ClaimHistory(api)
    try:
        yield history
    finally:
        history.close()


def create_namespace(client: Any) -> str:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    Resource(client, NAMESPACES).create({"metadata": {"name": name}})
    return name


def delete_namespace(client: Any, name: str) -> None:
    with suppress(NotFound):
        Resource(client, NAMESPACES).delete(name)
