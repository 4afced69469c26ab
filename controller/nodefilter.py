"""Which nodes a pod may run on, before devices are considered.

The checks of the kube-scheduler's default filters that matter for a DRA pod: the node is
Ready and schedulable, its NoSchedule/NoExecute taints are tolerated, ``spec.nodeSelector``
matches, and ``requiredDuringSchedulingIgnoredDuringExecution`` node affinity matches. Each
check returns a short reason when it fails; the reasons are counted into the pod's
"0/N nodes are available" message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from allocator.model import ModelError, NodeSelector
from allocator.nodeselector import NodeSelectorError, node_selector_matches
from controller.naming import meta
from kubeapi.objects import KubeObject

__all__ = ["UNSCHEDULABLE_TAINT", "NodeFilter"]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

REASON_NOT_READY = "node(s) were not ready"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TAINT = "node(s) had untolerated taint(s)"
REASON_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


class NodeFilter:
    """The node checks for one pod (its selector and affinity decoded once)."""

    def __init__(self, pod: KubeObject) -> None:
        spec = pod.get("spec") or {}
        self._node_selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        self._tolerations: list[dict[str, Any]] = list(spec.get("tolerations") or ())
        self._affinity = _required_affinity(spec)

    def reject_reason(self, node: KubeObject) -> str | None:
        """None when the pod may run on ``node``, else why not."""
        if not _is_ready(node):
            return REASON_NOT_READY
        spec = node.get("spec") or {}
        if spec.get("unschedulable") and not self._tolerates(
            {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
        ):
            return REASON_UNSCHEDULABLE
        for taint in spec.get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not self._tolerates(taint):
                return REASON_TAINT
        labels = meta(node).get("labels") or {}
        if any(labels.get(k) != v for k, v in self._node_selector.items()):
            return REASON_SELECTOR
        if self._affinity is not None:
            try:
                if not node_selector_matches(self._affinity, str(meta(node).get("name")), labels):
                    return REASON_SELECTOR
            except NodeSelectorError:
                return REASON_SELECTOR
        return None

    def _tolerates(self, taint: Mapping[str, Any]) -> bool:
        return any(_toleration_matches(t, taint) for t in self._tolerations)


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
