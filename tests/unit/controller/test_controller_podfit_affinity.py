"""InterPodAffinity and PodTopologySpread, decided over plain data."""

from __future__ import annotations

from typing import Any

from drakit.controller.podfit.affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)
from drakit.controller.podfit.podinfo import PodInfo
from drakit.controller.podfit.spread import (
    REASON_SPREAD,
    REASON_SPREAD_LABEL,
    SpreadNode,
    TopologySpread,
    spread_constraints,
)

ZONE = "topology.kubernetes.io/zone"
A = {ZONE: "a", "kubernetes.io/hostname": "n1"}
B = {ZONE: "b", "kubernetes.io/hostname": "n2"}


def info(name: str, labels: dict[str, str], namespace: str = "ns", **affinity: Any) -> PodInfo:
    spec: dict[str, Any] = {"containers": []}
    if affinity:
        spec["affinity"] = {
            kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}
            for kind, terms in affinity.items()
        }
    pod = {"metadata": {"name": name, "namespace": namespace, "uid": name, "labels": labels},
           "spec": spec}  # fmt: skip
    return PodInfo.of(pod)


def term(app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def test_affinity_needs_a_matching_pod_in_the_nodes_domain():
    web = info("web", {"app": "web"}, podAffinity=[term("db")])
    check = InterPodAffinity(web, [(info("db", {"app": "db"}), A)])
    assert check.reject_reason(A) is None
    assert check.reject_reason(B) == REASON_AFFINITY
    assert check.reject_reason({}) == REASON_AFFINITY  # no topology key


def test_the_first_pod_of_a_self_affine_group_may_go_anywhere():
    first = info("w1", {"app": "web"}, podAffinity=[term("web")])
    assert InterPodAffinity(first, []).reject_reason(B) is None
    other = info("x", {"app": "x"}, podAffinity=[term("web")])
    assert InterPodAffinity(other, []).reject_reason(B) == REASON_AFFINITY


def test_affinity_only_counts_pods_of_the_terms_namespaces():
    web = info("web", {"app": "web"}, podAffinity=[term("db")])
    elsewhere = info("db", {"app": "db"}, namespace="other")
    assert InterPodAffinity(web, [(elsewhere, A)]).reject_reason(A) == REASON_AFFINITY
    anywhere = info("web", {"app": "web"}, podAffinity=[term("db", namespaceSelector={})])
    assert InterPodAffinity(anywhere, [(elsewhere, A)]).reject_reason(A) is None


def test_anti_affinity_keeps_the_pod_out_of_a_domain_with_a_matching_pod():
    web = info("web", {"app": "web"}, podAntiAffinity=[term("web")])
    check = InterPodAffinity(web, [(info("w0", {"app": "web"}), A)])
    assert check.reject_reason(A) == REASON_ANTI_AFFINITY
    assert check.reject_reason(B) is None


def test_a_placed_pods_anti_affinity_keeps_matching_pods_away():
    loner = info("loner", {"app": "db"}, podAntiAffinity=[term("web", "kubernetes.io/hostname")])
    check = InterPodAffinity(info("web", {"app": "web"}), [(loner, A)])
    assert check.reject_reason(A) == REASON_EXISTING_ANTI_AFFINITY
    assert check.reject_reason(B) is None


def spread_pod(labels: dict[str, str], **constraint: Any) -> dict[str, Any]:
    c = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}, **constraint}  # fmt: skip
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "p", "labels": labels},
            "spec": {"containers": [], "topologySpreadConstraints": [c]}}  # fmt: skip


def spread(pod: dict[str, Any], *nodes: SpreadNode) -> TopologySpread:
    return TopologySpread(PodInfo.of(pod), spread_constraints(pod), nodes)


def web(n: int) -> list[PodInfo]:
    return [info(f"w{i}", {"app": "web"}) for i in range(n)]


def test_spread_refuses_the_domain_that_would_exceed_max_skew():
    pod = spread_pod({"app": "web"})
    check = spread(pod, SpreadNode(A, True, True, web(1)), SpreadNode(B, True, True, []))
    assert check.reject_reason(A) == REASON_SPREAD
    assert check.reject_reason(B) is None
    assert check.reject_reason({}) == REASON_SPREAD_LABEL


def test_spread_ignores_nodes_outside_the_pods_node_affinity_unless_told_to_count_them():
    pod = spread_pod({"app": "web"})
    excluded = SpreadNode(B, False, True, [])
    assert spread(pod, SpreadNode(A, True, True, web(1)), excluded).reject_reason(A) is None
    counted = spread_pod({"app": "web"}, nodeAffinityPolicy="Ignore")
    check = spread(counted, SpreadNode(A, True, True, web(1)), excluded)
    assert check.reject_reason(A) == REASON_SPREAD


def test_min_domains_counts_missing_domains_as_empty():
    pod = spread_pod({"app": "web"}, minDomains=3)
    check = spread(pod, SpreadNode(A, True, True, web(1)), SpreadNode(B, True, True, web(1)))
    assert check.reject_reason(A) == REASON_SPREAD


def test_schedule_anyway_constraints_do_not_filter():
    pod = spread_pod({"app": "web"}, whenUnsatisfiable="ScheduleAnyway")
    assert spread_constraints(pod) == ()
