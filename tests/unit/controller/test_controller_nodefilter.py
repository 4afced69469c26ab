"""Node filtering: readiness, unschedulable, taints and tolerations, selector, affinity."""

from __future__ import annotations

from typing import Any

from drakit.controller.nodefilter import (
    REASON_NOT_READY,
    REASON_SELECTOR,
    REASON_TAINT,
    REASON_UNSCHEDULABLE,
    ClusterView,
    NodeFilter,
)
from drakit.controller.podfit.usage import NodeUsage


def node(name: str = "n1", *, ready: str = "True", labels: Any = None, **spec: Any) -> Any:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def pod(**spec: Any) -> Any:
    return {"metadata": {"name": "p"}, "spec": spec}


def test_ready_node_without_constraints_fits():
    assert NodeFilter(pod()).reject_reason(node()) is None


def test_not_ready_or_unknown_node_is_rejected():
    assert NodeFilter(pod()).reject_reason(node(ready="False")) == REASON_NOT_READY
    no_conditions = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    assert NodeFilter(pod()).reject_reason(no_conditions) == REASON_NOT_READY


def test_unschedulable_node_is_rejected_unless_tolerated():
    cordoned = node(unschedulable=True)
    assert NodeFilter(pod()).reject_reason(cordoned) == REASON_UNSCHEDULABLE
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert NodeFilter(tolerant).reject_reason(cordoned) is None


def test_no_schedule_taint_needs_a_matching_toleration():
    tainted = node(taints=[{"key": "gpu", "value": "busy", "effect": "NoSchedule"}])
    assert NodeFilter(pod()).reject_reason(tainted) == REASON_TAINT
    equal = pod(tolerations=[{"key": "gpu", "value": "busy", "effect": "NoSchedule"}])
    assert NodeFilter(equal).reject_reason(tainted) is None
    wrong_value = pod(tolerations=[{"key": "gpu", "value": "idle"}])
    assert NodeFilter(wrong_value).reject_reason(tainted) == REASON_TAINT
    exists_all = pod(tolerations=[{"operator": "Exists"}])
    assert NodeFilter(exists_all).reject_reason(tainted) is None


def test_prefer_no_schedule_taint_does_not_reject():
    soft = node(taints=[{"key": "gpu", "effect": "PreferNoSchedule"}])
    assert NodeFilter(pod()).reject_reason(soft) is None


def test_node_selector_must_match_labels():
    selective = pod(nodeSelector={"zone": "a"})
    assert NodeFilter(selective).reject_reason(node(labels={"zone": "a"})) is None
    assert NodeFilter(selective).reject_reason(node(labels={"zone": "b"})) == REASON_SELECTOR


def test_required_node_affinity_by_label_and_by_name():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
        ]}}}  # fmt: skip
    f = NodeFilter(pod(affinity=affinity))
    assert f.reject_reason(node(labels={"gpu": "yes"})) is None
    assert f.reject_reason(node("n9")) is None
    assert f.reject_reason(node("n1")) == REASON_SELECTOR


def test_with_placed_pods_a_pod_too_big_for_the_node_is_rejected_as_kube_scheduler_words_it():
    small = node(labels={})
    small["status"]["allocatable"] = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    big = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "64"}}}])
    view = ClusterView(usage=NodeUsage(), nodes=lambda: [small])
    assert NodeFilter(big, view).reject_reasons(small) == ("Insufficient cpu",)
    fits = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "2"}}}])
    assert NodeFilter(fits, view).reject_reasons(small) == ()
