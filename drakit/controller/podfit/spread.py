"""PodTopologySpread: the pod's ``DoNotSchedule`` topology spread constraints.

For each constraint, the eligible nodes (carrying every constraint's topology key, matching
the pod's node affinity and selector unless ``nodeAffinityPolicy: Ignore``, with no
untolerated NoSchedule/NoExecute taint when ``nodeTaintsPolicy: Honor``) are grouped into
domains by the key's value, and the matching pods are counted per domain: pods of the pod's
namespace, not being deleted, selected by ``labelSelector`` (plus ``matchLabelKeys`` taken
from the pod's labels). An empty selector counts no pods, as kube-scheduler's does.

A node passes when it carries the key and ``count(node's domain) + (1 if the pod matches its
own selector) - min count`` is at most ``maxSkew``; the minimum is 0 while fewer than
``minDomains`` domains exist. kube-scheduler's system default constraints are all
``ScheduleAnyway`` (scoring only), so a pod without constraints is never filtered here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drakit.controller.podfit.labels import LabelSelector
from drakit.controller.podfit.podinfo import PodInfo

__all__ = [
    "REASON_SPREAD",
    "REASON_SPREAD_LABEL",
    "SpreadConstraint",
    "SpreadNode",
    "TopologySpread",
    "spread_constraints",
]

REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"


@dataclass(frozen=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_taints: bool = False


def spread_constraints(pod: Mapping[str, Any]) -> tuple[SpreadConstraint, ...]:
    """The pod's hard constraints. Raises SelectorError."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found = []
    spec = pod.get("spec") or {}
    for index, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        where = f"spec.topologySpreadConstraints[{index}].labelSelector"
        selector = LabelSelector.parse(c.get("labelSelector"), where)
        keyed = {k: labels[k] for k in c.get("matchLabelKeys") or () if k in labels}
        found.append(
            SpreadConstraint(
                max_skew=int(c.get("maxSkew") or 1),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector.with_labels(keyed),
                min_domains=int(c.get("minDomains") or 1),
                honor_node_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class SpreadNode:
    """A node as the spread counting sees it."""

    labels: Mapping[str, str]
    matches_node_affinity: bool
    tolerated: bool  # no untolerated NoSchedule/NoExecute taint
    pods: Iterable[PodInfo]


class TopologySpread:
    """Counts for ``pod``'s ``constraints`` over ``nodes`` (all nodes of the cluster)."""

    def __init__(
        self,
        pod: PodInfo,
        constraints: tuple[SpreadConstraint, ...],
        nodes: Iterable[SpreadNode],
    ) -> None:
        self._constraints = constraints
        self._counts: list[Counter[str]] = [Counter() for _ in constraints]
        self._self = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        keys = [c.topology_key for c in constraints]
        for node in nodes:
            if any(k not in node.labels for k in keys):
                continue
            pods = None
            for i, c in enumerate(constraints):
                if c.honor_node_affinity and not node.matches_node_affinity:
                    continue
                if c.honor_taints and not node.tolerated:
                    continue
                pods = list(node.pods) if pods is None else pods
                self._counts[i][node.labels[c.topology_key]] += _matching(pods, c, pod.namespace)
        self._minimum = [
            min(counts.values()) if len(counts) >= c.min_domains else 0
            for c, counts in zip(constraints, self._counts, strict=True)
        ]

    def reject_reason(self, node_labels: Mapping[str, str]) -> str | None:
        for i, c in enumerate(self._constraints):
            value = node_labels.get(c.topology_key)
            if value is None:
                return REASON_SPREAD_LABEL
            if self._counts[i][value] + self._self[i] - self._minimum[i] > c.max_skew:
                return REASON_SPREAD
        return None


def _matching(pods: Iterable[PodInfo], constraint: SpreadConstraint, namespace: str) -> int:
    if constraint.selector.everything:
        return 0
    return sum(
        1
        for p in pods
        if p.namespace == namespace and not p.deleting and constraint.selector.matches(p.labels)
    )
