"""Per-node usage kept from pod events and assumptions; unsupported pod features."""

from __future__ import annotations

from typing import Any

from drakit.controller.podfit.podinfo import PodInfo
from drakit.controller.podfit.unsupported import unsupported_features
from drakit.controller.podfit.usage import NodeUsage


def pod(uid: str, node: str | None = None, cpu: str = "1", phase: str = "Running") -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}},
                                            "ports": [{"hostPort": 80}]}]}  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": uid, "namespace": "ns", "uid": uid}, "spec": spec,
            "status": {"phase": phase}}  # fmt: skip


def test_bound_pods_count_on_their_node_until_they_finish():
    usage = NodeUsage()
    assert usage.observe(pod("a", "n1")).added
    usage.observe(pod("b", "n1", cpu="500m"))
    assert (usage.used("n1").requests.milli_cpu, usage.used("n1").pods) == (1500, 2)
    assert usage.ports("n1") == (("0.0.0.0", "TCP", 80),)
    assert usage.observe(pod("a", "n1", phase="Succeeded")).removed
    assert usage.forget(pod("b", "n1")).removed
    assert usage.used("n1").pods == 0
    assert usage.ports("n1") == ()


def test_pending_pods_do_not_count():
    usage = NodeUsage()
    usage.observe(pod("a"))
    assert usage.placed() == []


def test_an_assumed_pod_counts_until_its_binding_is_seen_or_undone():
    usage = NodeUsage()
    usage.assume(PodInfo.of(pod("a")), "n1")
    usage.observe(pod("a"))  # a stale, unbound copy does not undo the assumption
    assert usage.used("n1").pods == 1
    usage.observe(pod("a", "n1"))
    usage.forget_assumed("a")  # confirmed by the informer: stays
    assert usage.used("n1").pods == 1
    usage.assume(PodInfo.of(pod("b")), "n1")
    usage.forget_assumed("b")
    assert usage.used("n1").pods == 1


def test_a_moved_pod_leaves_its_old_node():
    usage = NodeUsage()
    usage.assume(PodInfo.of(pod("a")), "n1")
    usage.observe(pod("a", "n2"))  # an earlier attempt bound it elsewhere
    assert (usage.used("n1").pods, usage.used("n2").pods) == (0, 1)


def test_volumes_that_need_volume_binding_are_unsupported():
    spec = {"volumes": [{"name": "cfg", "configMap": {"name": "x"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]}  # fmt: skip
    found = unsupported_features({"spec": spec})
    assert len(found) == 1
    assert "volume 'data' of type persistentVolumeClaim" in found[0]


def test_scheduling_gates_and_namespace_selectors_are_unsupported():
    term = {
        "labelSelector": {},
        "topologyKey": "k",
        "namespaceSelector": {"matchLabels": {"a": "b"}},
    }
    spec = {
        "schedulingGates": [{"name": "wait"}],
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    }
    found = unsupported_features({"spec": spec})
    assert "spec.schedulingGates (wait)" in found[0]
    assert "namespaceSelector" in found[1]
    assert unsupported_features({"spec": {"containers": []}}) == []
