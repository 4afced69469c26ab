"""The real-node tier on several nodes: a ``NodeGroup`` (each node in its own network and
mount namespaces) with drakit's image in every node and drakit's chart installed as a
cluster runs it (pods on pod IPs, the charts' default folders, the apiserver reached
through the ``kubernetes`` Service).

``ClusterStack`` is a ``RealNodeStack`` whose ``node`` is the first node; what depends on
the node (slices, pod output, CDI specs) takes the node it is about.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import NodeAssets
from node_rig import DRIVER, RELEASE_NAMESPACE, Helm, RealNodeStack, eventually

from drakit.demo.real_node import IMAGE_REPOSITORY, import_images
from drakit.kubeapi.client import load_client
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import LEASES
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
        return _merge(values, overrides)

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
        return {p["spec"]["nodeName"]: p for p in self.plugin_pods(release)}

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


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
