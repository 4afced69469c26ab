"""The real-node tier on several nodes: a ``NodeGroup`` (each node in its own network and
mount namespaces) with drakit's image in every node and drakit's chart installed as a
cluster runs it (pods on pod IPs, the charts' default folders, the apiserver reached
through the ``kubernetes`` Service).

``ClusterStack`` is a ``RealNodeStack`` whose ``node`` is the first node; what depends on
the node (slices, pod output, CDI specs) takes the node it is about.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import NodeAssets
from node_rig import DRIVER, RELEASE_NAMESPACE, Helm, RealNodeStack, eventually, merge_values

from drakit.demo.real_node import IMAGE_REPOSITORY, import_images
from drakit.kubeapi.client import load_client
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import LEASES, Resource, ResourceType, WatchEvent, WatchStream
from drakit.localcluster.node import LocalNode
from drakit.localcluster.nodegroup import GroupConfig, NodeGroup
from drakit.node_plugin.checkpoint import FILE_NAME as CHECKPOINT_FILE
from drakit.node_plugin.checkpoint import Checkpoint


@dataclass
class ClusterStack(RealNodeStack):
    """Several real nodes; ``node`` (RealNodeStack's) is the first of ``nodes``."""

    group: NodeGroup | None = None
    nodes: list[LocalNode] = field(default_factory=list)

    def node_named(self, name: str) -> LocalNode:
        return next(n for n in self.nodes if n.name == name)

    def cluster_values(self, **overrides: Any) -> dict[str, Any]:
        """The chart's defaults for a real cluster, but for the local image and text logs:
        no host network, the default kubelet and CDI folders, in-cluster credentials."""
        values: dict[str, Any] = {
            "image": {
                "repository": self.image_repository,
                "tag": self.image_tag,
                "pullPolicy": "Never",
            },
            "logging": {"format": "text", "level": "info"},
        }
        return merge_values(values, overrides)

    def slices_of(self, node: str, driver: str = DRIVER) -> list[KubeObject]:
        return [
            s
            for s in self.slices.list().items
            if s["spec"].get("driver") == driver and s["spec"].get("nodeName") == node
        ]

    def pod_output(self, namespace: str, pod: str, container: str, until: str = "ready") -> str:
        """The container's output, read on the node the pod runs on."""
        node = self.node_named(self.pods.get(pod, namespace)["spec"]["nodeName"])
        return str(
            eventually(
                lambda: (out := node.pod_log(namespace, pod, container)) and until in out and out,
                f"{namespace}/{pod}/{container} to print {until!r}",
            )
        )

    def plugin_pods_by_node(self, release: str = "drakit") -> dict[str, KubeObject]:
        """The plugin pods bound to a node (one being created has no node yet)."""
        return {
            p["spec"]["nodeName"]: p for p in self.plugin_pods(release) if p["spec"].get("nodeName")
        }

    def cdi_spec_texts(self, node: LocalNode) -> dict[str, str]:
        return {p.name: p.read_text() for p in node.cdi_root.glob("*") if p.is_file()}

    def checkpoint_claims(self, node: LocalNode, driver: str = DRIVER) -> set[str]:
        """Claim UIDs in the node plugin's checkpoint on ``node`` (snapshot and journal,
        read as the plugin reads them)."""
        checkpoint = Checkpoint(node.kubelet_dir / "plugins" / driver / CHECKPOINT_FILE)
        checkpoint.refresh()
        return {entry.uid for entry in checkpoint.entries()}

    def lease_holder(self, name: str, namespace: str = RELEASE_NAMESPACE) -> str:
        lease = self.resource(LEASES).get(name, namespace)
        return str((lease.get("spec") or {}).get("holderIdentity") or "")


@contextmanager
def make_cluster(
    assets: NodeAssets, work: Path, *, nodes: int = 3, own_folders: tuple[str, ...] = ()
) -> Iterator[ClusterStack]:
    """A control plane and ``nodes`` real nodes with drakit's image; torn down at the end."""
    group = NodeGroup(GroupConfig(nodes=nodes, work_dir=work / "group", own_folders=own_folders))
    with group:
        for node in group.nodes:
            import_images(node, assets.image_archive)
        assert group.cluster is not None
        client = load_client(group.kubeconfig)
        stack = ClusterStack(
            cluster=group.cluster,
            node=group.nodes[0],
            helm=Helm(assets.helm, work / "helm", group.kubeconfig),
            image_repository=IMAGE_REPOSITORY,
            image_tag=assets.image_tag,
            client=client,
            group=group,
            nodes=list(group.nodes),
        )
        try:
            yield stack
        finally:
            stack.uninstall_all()
            client.close()


class Recorder:
    """An independent watcher of one resource type for the length of a test: a list, then a
    watch from its resourceVersion (again after the server ends it), keeping the objects as
    they are now and calling ``on_change(objects)`` after every event, in order. Its own
    client: what the components under test do cannot hold it up.

    ``problems`` collects what ``on_change`` returns (a list of strings per call).
    """

    def __init__(
        self,
        kubeconfig: str,
        rtype: ResourceType,
        on_change: Callable[[dict[str, KubeObject]], list[str]],
        label_selector: str | None = None,
    ) -> None:
        self._client = load_client(kubeconfig)
        self._resource = Resource(self._client, rtype)
        self._on_change = on_change
        self._selector = label_selector
        self.objects: dict[str, KubeObject] = {}
        self.events: list[tuple[str, str]] = []  # (type, key) in the order they came
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._errors: list[BaseException] = []

    @staticmethod
    def key(obj: KubeObject) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def __enter__(self) -> Recorder:
        listing = self._resource.list(label_selector=self._selector)
        self.objects = {self.key(o): o for o in listing.items}
        self._version = listing.resource_version
        self.problems += self._on_change(dict(self.objects))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.close()
        self._thread.join(timeout=30)
        self._client.close()
        if self._errors:
            raise AssertionError(f"the recorder failed: {self._errors[0]!r}")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._stream = self._resource.watch(
                    resource_version=self._version,
                    label_selector=self._selector,
                    timeout_seconds=60,
                )
                with self._stream as stream:
                    for event in stream:
                        self._apply(event)
        except BaseException as exc:
            if not self._stop.is_set():
                self._errors.append(exc)

    def _apply(self, event: WatchEvent) -> None:
        if event.type == "BOOKMARK":
            self._version = event.resource_version or self._version
            return
        key = self.key(event.object)
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = event.object
        self._version = event.resource_version or self._version
        self.events.append((event.type, key))
        self.problems += self._on_change(dict(self.objects))
