"""InterPodAffinity: required pod affinity and anti-affinity, the pod's and the placed pods'.

Built once per scheduling attempt from the placed pods (each with its node's labels), then
asked per node, as kube-scheduler's PreFilter/Filter do:

* **affinity**: the node must carry every term's topology key, and in each term's domain
  (the node's value of the key) some placed pod must match *all* the terms; when no placed
  pod anywhere matches, a pod that matches its own terms may start the group;
* **anti-affinity**: no placed pod matching a term may be in the node's domain of that term;
* **existing anti-affinity**: no placed pod whose anti-affinity term matches this pod may be
  in the node's domain of that term (the rule is symmetric).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from drakit.controller.podfit.podinfo import AffinityTerm, PodInfo

__all__ = [
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "InterPodAffinity",
]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Placed = tuple[PodInfo, Mapping[str, str]]  # a placed pod and its node's labels
_Domain = tuple[str, str]  # (topology key, value)


def _matches_all(terms: Iterable[AffinityTerm], pod: PodInfo) -> bool:
    terms = tuple(terms)
    return bool(terms) and all(t.matches(pod.namespace, pod.labels) for t in terms)


class InterPodAffinity:
    """The affinity verdicts for ``pod`` given ``placed`` (every placed pod, or at least
    every one with anti-affinity terms when ``pod`` has no terms of its own)."""

    def __init__(self, pod: PodInfo, placed: Iterable[Placed]) -> None:
        self._pod = pod
        self._affinity: Counter[_Domain] = Counter()
        self._anti: Counter[_Domain] = Counter()
        self._existing_anti: Counter[_Domain] = Counter()
        for other, node_labels in placed:
            self._count(other, node_labels)
        self._self_match = _matches_all(pod.affinity, pod)

    def _count(self, other: PodInfo, node_labels: Mapping[str, str]) -> None:
        pod = self._pod
        for term in other.anti_affinity:
            if term.topology_key in node_labels and term.matches(pod.namespace, pod.labels):
                self._existing_anti[(term.topology_key, node_labels[term.topology_key])] += 1
        if _matches_all(pod.affinity, other):
            for term in pod.affinity:
                if term.topology_key in node_labels:
                    self._affinity[(term.topology_key, node_labels[term.topology_key])] += 1
        for term in pod.anti_affinity:
            if term.topology_key in node_labels and term.matches(other.namespace, other.labels):
                self._anti[(term.topology_key, node_labels[term.topology_key])] += 1

    def reject_reason(self, node_labels: Mapping[str, str]) -> str | None:
        """None when the pod may go to a node with ``node_labels``, else why not."""
        if not self._satisfies_affinity(node_labels):
            return REASON_AFFINITY
        for term in self._pod.anti_affinity:
            value = node_labels.get(term.topology_key)
            if value is not None and self._anti[(term.topology_key, value)] > 0:
                return REASON_ANTI_AFFINITY
        if self._existing_anti and any(
            self._existing_anti[domain] > 0 for domain in node_labels.items()
        ):
            return REASON_EXISTING_ANTI_AFFINITY
        return None

    def _satisfies_affinity(self, node_labels: Mapping[str, str]) -> bool:
        terms = self._pod.affinity
        if not terms:
            return True
        if any(t.topology_key not in node_labels for t in terms):
            return False
        if all(self._affinity[(t.topology_key, node_labels[t.topology_key])] > 0 for t in terms):
            return True
        # No matching pod in this domain: only the first pod of a group may start it.
        return not self._affinity and self._self_match
