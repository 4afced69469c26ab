"""The soak's independent checker on the whole stack without faults: pods scheduled by
kube-scheduler and by drakit, a shared claim, prepared by the real kubelet DRA manager
through drakit's node plugin, then deleted. Every reading must be free of violations, so
the checker's reading of real checkpoints, CDI specs and claims is sound (no false
positives from legal states), and liveness and the quiet checks pass at the end."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from e2e_rig import Api, E2EStack, claim_template, eventually, pod
from soak.checker import Bounds, Checker, NodeView, Violation
from soak.nodefiles import read_cdi_specs, read_checkpoint

from drakit.localcluster.stack import DRAKIT_SCHEDULER, DRIVER

pytestmark = pytest.mark.e2e

#: Generous: the e2e stack is shared and the machine loaded; no test asserts on time.
BOUNDS = Bounds(recovery_s=90.0, liveness_s=90.0, slice_heal_s=90.0, confirm_s=2.0)


def checker_for(e2e: E2EStack, api: Api) -> Checker:
    views = [
        NodeView(n.name, n.folders.plugins / DRIVER / "checkpoint.json", n.folders.cdi)
        for n in e2e.nodes.values()
    ]
    return Checker(e2e.client, DRIVER, views, BOUNDS, namespaces=[api.namespace])


def test_the_soak_checker_finds_no_violation_in_legal_claim_flows(e2e: E2EStack, api: Api) -> None:
    checker = checker_for(e2e, api)
    found: list[Violation] = []

    def checked(condition: Callable[[], object], what: str) -> None:
        """Wait for ``condition``, judging every state on the way."""
        eventually(lambda: found.extend(checker.check_safety()) or condition(), what)

    api.templates.create(claim_template("one-gpu"), api.namespace)
    by_kube = pod("by-kube", e2e.node_a.name, template="one-gpu")
    by_drakit = pod("by-drakit", e2e.node_b.name, template="one-gpu")
    by_drakit["spec"]["schedulerName"] = DRAKIT_SCHEDULER
    for body in (by_kube, by_drakit):
        api.create_pod(body)
    for name, node in (("by-kube", e2e.node_a), ("by-drakit", e2e.node_b)):
        wanted = {"event": "prepared", "pod": f"{api.namespace}/{name}"}
        checked(
            lambda n=node, w=wanted: any(w.items() <= e.items() for e in n.harness.events),
            f"{name} prepared",
        )
    found += checker.wait_liveness([api.namespace], timeout=BOUNDS.liveness_s)
    for name, node in (("by-kube", e2e.node_a), ("by-drakit", e2e.node_b)):
        # The checker's own reading of the plugin's files finds the prepared claim.
        claim = api.allocated_claim(api.generated_claim_name(name))
        entry = read_checkpoint(node.folders.plugins / DRIVER / "checkpoint.json")[
            claim["metadata"]["uid"]
        ]
        spec = read_cdi_specs(node.folders.cdi, DRIVER)[claim["metadata"]["uid"]]
        assert entry.completed and entry.cdi_ids
        assert all(spec.defines(cdi_id) for cdi_id in entry.cdi_ids)
    for name in ("by-kube", "by-drakit"):
        api.delete_pod(name)
    checked(lambda: not api.pods.list(api.namespace).items, "pods gone")
    checked(lambda: not api.claims.list(api.namespace).items, "generated claims deleted")
    found += checker.check_quiet()
    assert found == []
    summary = checker.summary()
    assert summary["checks"] >= 3 and summary["violations"] == {}
