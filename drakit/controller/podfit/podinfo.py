"""A pod as the filters see it: decoded once, kept instead of the whole object.

For a pod bound to a node the controller keeps one ``PodInfo`` (its requests, host ports,
labels and required pod affinity terms), which is what NodeResourcesFit, NodePorts,
InterPodAffinity and PodTopologySpread read of the pods already placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.controller.podfit.labels import LabelSelector
from drakit.controller.podfit.ports import HostPort, host_ports
from drakit.controller.podfit.requests import Requests, pod_requests

__all__ = ["AffinityTerm", "PodInfo", "required_terms"]


@dataclass(frozen=True)
class AffinityTerm:
    """One required (anti-)affinity term, its namespaces resolved.

    ``namespaces`` lists the namespaces the term selects pods in (the pod's own when the
    term names none and has no namespaceSelector); ``all_namespaces`` is an empty
    namespaceSelector; ``namespace_selector`` is a non-empty one, which needs Namespace
    labels drakit does not watch (see ``unsupported``).
    """

    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    all_namespaces: bool = False
    namespace_selector: bool = False

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is selected by this term. A term
        with a non-empty namespaceSelector is taken to select every namespace: for an
        existing pod's anti-affinity that errs on the side of not placing."""
        in_scope = self.all_namespaces or self.namespace_selector or namespace in self.namespaces
        return in_scope and self.selector.matches(labels)


def required_terms(pod: Mapping[str, Any], kind: str) -> tuple[AffinityTerm, ...]:
    """The ``requiredDuringSchedulingIgnoredDuringExecution`` terms of ``kind``
    (``podAffinity`` or ``podAntiAffinity``). Raises SelectorError."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    section = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    terms = []
    required = section.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    for index, term in enumerate(required):
        where = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{index}]"
        namespace_selector = term.get("namespaceSelector")
        restricted = namespace_selector is not None and _has_rules(namespace_selector)
        names = frozenset(term.get("namespaces") or ())
        if not names and namespace_selector is None:
            names = frozenset({namespace})
        terms.append(
            AffinityTerm(
                selector=LabelSelector.parse(term.get("labelSelector"), where),
                topology_key=str(term.get("topologyKey") or ""),
                namespaces=names,
                all_namespaces=namespace_selector is not None and not restricted,
                namespace_selector=restricted,
            )
        )
    return tuple(terms)


def _has_rules(selector: Mapping[str, Any]) -> bool:
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


@dataclass(frozen=True)
class PodInfo:
    """The parts of a pod the filters read. Build with ``PodInfo.of``."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    requests: Requests = field(default_factory=Requests)
    ports: tuple[HostPort, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    deleting: bool = False

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodInfo:
        """Decode ``pod``; raises RequestError or SelectorError for a corrupt spec."""
        metadata = pod.get("metadata") or {}
        return cls(
            uid=str(metadata.get("uid") or ""),
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
            labels=dict(metadata.get("labels") or {}),
            requests=pod_requests(pod),
            ports=host_ports(pod),
            affinity=required_terms(pod, "podAffinity"),
            anti_affinity=required_terms(pod, "podAntiAffinity"),
            deleting=bool(metadata.get("deletionTimestamp")),
        )
