"""Which nodes a pod may run on, before devices are considered.

The kube-scheduler default filters, in its order, as far as drakit implements them: the node
is Ready and schedulable (NodeUnschedulable), its NoSchedule/NoExecute taints are tolerated
(TaintToleration), ``spec.nodeSelector`` and required node affinity match (NodeAffinity), the
pod's host ports are free (NodePorts), its requests fit (NodeResourcesFit), its topology
spread constraints hold (PodTopologySpread), and its and the placed pods' required pod
(anti-)affinity hold (InterPodAffinity). The last four need the placed pods: they run only
when the filter is given a ``ClusterView``. Each check returns kube-scheduler's reasons when
it fails; they are counted into the pod's "0/N nodes are available" message.

Pod spec features the default filters check and drakit does not are refused as a whole
(``unsupported``), before any node is looked at.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.allocator.model import ModelError, NodeSelector
from drakit.allocator.nodeselector import NodeSelectorError, node_selector_matches
from drakit.controller.naming import meta
from drakit.controller.podfit.affinity import InterPodAffinity, Placed
from drakit.controller.podfit.podinfo import PodInfo
from drakit.controller.podfit.ports import REASON_PORTS, ports_conflict
from drakit.controller.podfit.resources import allocatable_of, insufficient_resources
from drakit.controller.podfit.spread import SpreadNode, TopologySpread, spread_constraints
from drakit.controller.podfit.unsupported import unsupported_features
from drakit.controller.podfit.usage import NodeUsage
from drakit.kubeapi.objects import KubeObject

__all__ = ["UNSCHEDULABLE_TAINT", "ClusterView", "NodeFilter"]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

REASON_NOT_READY = "node(s) were not ready"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True)
class ClusterView:
    """What the pod-dependent filters read: the placed pods and the nodes."""

    usage: NodeUsage
    #: Every Node object of the cluster.
    nodes: Callable[[], Iterable[KubeObject]]
    #: The extended resource names a DeviceClass maps (DRA extended resources).
    dra_extended: Collection[str] = field(default_factory=frozenset)


class NodeFilter:
    """The node checks for one pod (its selector, affinity, requests and terms decoded
    once; affinity and spread counts computed once, on first use)."""

    def __init__(
        self, pod: KubeObject, view: ClusterView | None = None, info: PodInfo | None = None
    ) -> None:
        spec = pod.get("spec") or {}
        self._node_selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        self._tolerations: list[dict[str, Any]] = list(spec.get("tolerations") or ())
        self._affinity = _required_affinity(spec)
        self._view = view
        self._pod = pod
        self._info = info if info is not None or view is None else PodInfo.of(pod)
        self._spread_constraints = spread_constraints(pod) if view is not None else ()
        self._inter_pod: InterPodAffinity | None = None
        self._inter_pod_moot = False  # no term anywhere concerns this pod
        self._spread: TopologySpread | None = None

    @staticmethod
    def unsupported(pod: KubeObject) -> list[str]:
        """The pod spec features drakit's scheduler does not implement that ``pod`` uses."""
        return unsupported_features(pod)

    def reject_reason(self, node: KubeObject) -> str | None:
        """None when the pod may run on ``node``, else (the first reason) why not."""
        reasons = self.reject_reasons(node)
        return reasons[0] if reasons else None

    def reject_reasons(self, node: KubeObject) -> tuple[str, ...]:
        """Empty when the pod may run on ``node``, else the reasons of the first failing
        filter (NodeResourcesFit may give several)."""
        reason = self._node_reason(node)
        if reason is not None:
            return (reason,)
        if self._view is None or self._info is None:
            return ()
        return self._placement_reasons(node, self._view, self._info)

    # -- node-only filters -----------------------------------------------------------------

    def _node_reason(self, node: KubeObject) -> str | None:
        if not _is_ready(node):
            return REASON_NOT_READY
        spec = node.get("spec") or {}
        if spec.get("unschedulable") and not self._tolerates(
            {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
        ):
            return REASON_UNSCHEDULABLE
        if not self._tolerates_taints(node):
            return REASON_TAINT
        if not self._matches_node_affinity(node):
            return REASON_SELECTOR
        return None

    def _tolerates_taints(self, node: KubeObject) -> bool:
        return all(
            self._tolerates(taint)
            for taint in (node.get("spec") or {}).get("taints") or ()
            if taint.get("effect") in ("NoSchedule", "NoExecute")
        )

    def _matches_node_affinity(self, node: KubeObject) -> bool:
        labels = meta(node).get("labels") or {}
        if any(labels.get(k) != v for k, v in self._node_selector.items()):
            return False
        if self._affinity is None:
            return True
        try:
            return node_selector_matches(self._affinity, str(meta(node).get("name")), labels)
        except NodeSelectorError:
            return False

    def _tolerates(self, taint: Mapping[str, Any]) -> bool:
        return any(_toleration_matches(t, taint) for t in self._tolerations)

    # -- filters that read the placed pods -------------------------------------------------

    def _placement_reasons(
        self, node: KubeObject, view: ClusterView, info: PodInfo
    ) -> tuple[str, ...]:
        name = str(meta(node).get("name"))
        if info.ports and ports_conflict(info.ports, view.usage.ports(name)):
            return (REASON_PORTS,)
        short = insufficient_resources(
            info.requests, allocatable_of(node), view.usage.used(name), view.dra_extended
        )
        if short:
            return tuple(short)
        labels = meta(node).get("labels") or {}
        if self._spread_constraints:
            reason = self._topology_spread(view, info).reject_reason(labels)
            if reason is not None:
                return (reason,)
        inter_pod = self._inter_pod_affinity(view, info)
        if inter_pod is not None:
            reason = inter_pod.reject_reason(labels)
            if reason is not None:
                return (reason,)
        return ()

    def _topology_spread(self, view: ClusterView, info: PodInfo) -> TopologySpread:
        if self._spread is None:
            nodes = [
                SpreadNode(
                    labels=meta(n).get("labels") or {},
                    matches_node_affinity=self._matches_node_affinity(n),
                    tolerated=self._tolerates_taints(n),
                    pods=view.usage.pods_on(str(meta(n).get("name"))),
                )
                for n in view.nodes()
            ]
            self._spread = TopologySpread(info, self._spread_constraints, nodes)
        return self._spread

    def _inter_pod_affinity(self, view: ClusterView, info: PodInfo) -> InterPodAffinity | None:
        """The affinity counts, or None when no term anywhere concerns this pod."""
        if self._inter_pod is None and not self._inter_pod_moot:
            own_terms = bool(info.affinity or info.anti_affinity)
            placed = view.usage.placed() if own_terms else view.usage.placed_with_anti_affinity()
            if not placed and not own_terms:
                self._inter_pod_moot = True
                return None
            labels_of = {str(meta(n).get("name")): meta(n).get("labels") or {}
                         for n in view.nodes()}  # fmt: skip
            with_labels: list[Placed] = [
                (pod, labels_of[node]) for pod, node in placed if node in labels_of
            ]
            self._inter_pod = InterPodAffinity(info, with_labels)
        return self._inter_pod


def _required_affinity(spec: Mapping[str, Any]) -> NodeSelector | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return None
    try:
        return NodeSelector.from_dict(required)
    except ModelError:
        # The apiserver validated it; an undecodable selector matches no node.
        return NodeSelector(node_selector_terms=())


def _is_ready(node: KubeObject) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _toleration_matches(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if not key and operator == "Equal":
        return False  # an empty key needs Exists
    return bool(toleration.get("value", "") == taint.get("value", ""))
