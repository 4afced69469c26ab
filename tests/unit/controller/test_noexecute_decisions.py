"""The controller's NoExecute budget, decision by decision (pure: slices and rules as JSON, a
dict standing in for the API; the same reconcile against the real apiserver is in
tests/integration/controller/test_noexecute_budget.py)."""

from __future__ import annotations

from typing import Any

import pytest

from drakit.controller.noexecute.census import NODE_LABEL, request_key, view_of
from drakit.controller.noexecute.decision import Budget, cluster_cap
from drakit.controller.noexecute.reconciler import Reconciler
from drakit.controller.noexecute.rules import grant_of
from drakit.kubeapi.errors import AlreadyExists, NotFound

DRIVER = "gpu.example.com"


def _slice(
    node: str, devices: int, unhealthy: dict[str, str], *, per_device: bool = False
) -> dict[str, Any]:
    """One node's slice; ``unhealthy`` maps device names to the request's timeAdded."""
    entries = []
    for i in range(devices):
        name = f"gpu-{i}"
        entry: dict[str, Any] = {"name": name}
        if name in unhealthy:
            entry["taints"] = [
                {"key": f"{DRIVER}/unhealthy", "value": "Xid", "effect": "NoSchedule"},
                {"key": request_key(DRIVER), "value": "Xid", "effect": "None",
                 "timeAdded": unhealthy[name]},
            ]  # fmt: skip
        if per_device:
            entry["nodeName"] = node
        entries.append(entry)
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": f"{node}-pool" if per_device else node, "generation": 1},
        "devices": entries,
    }
    labels = {}
    if per_device:
        spec["perDeviceNodeSelection"] = True
        labels[NODE_LABEL] = node
    else:
        spec["nodeName"] = node
    return {"metadata": {"name": f"slice-{node}", "labels": labels}, "spec": spec}


class _Api:
    """The RuleWriter over a dict of rules (the API's truth for these tests)."""

    def __init__(self) -> None:
        self.rules: dict[str, dict[str, Any]] = {}
        self.creates = 0
        self.deletes = 0

    def create(self, rule: dict[str, Any]) -> None:
        name = rule["metadata"]["name"]
        if name in self.rules:
            raise AlreadyExists(name)
        self.rules[name] = rule
        self.creates += 1

    def delete(self, name: str) -> None:
        if self.rules.pop(name, None) is None:
            raise NotFound(name)
        self.deletes += 1

    def exists(self, name: str) -> bool:
        return name in self.rules

    def granted(self) -> set[tuple[str, str]]:
        grants = (grant_of(r, DRIVER) for r in self.rules.values())
        return {g.device for g in grants if g is not None}


def _reconciler(api: _Api, budget: Budget) -> Reconciler:
    return Reconciler(DRIVER, budget, api, "resource.k8s.io/v1")


def _run(reconciler: Reconciler, api: _Api, slices: list[dict[str, Any]], now: float) -> None:
    reconciler.reconcile(slices, list(api.rules.values()), now)


SECOND = "2026-12-07T10:00:00Z"


@pytest.mark.parametrize("per_device", [False, True])
def test_a_shared_fault_on_fifty_nodes_grants_exactly_the_cap_of_twenty(per_device: bool) -> None:
    # The review scenario: 50 nodes, per-node budget 1, cluster cap 20; one shared
    # cause hits a device on every node within one interval (all requests stamped in the
    # same second). The node-side budget granted all 50; the single decider grants 20,
    # the same 20 on every reconcile and after a restart (a new Reconciler lists the rules).
    budget = Budget(per_node=1, percent=5.0)  # 50 nodes x 8 devices = 400; 5% = 20
    slices = [_slice(f"node-{n:02d}", 8, {"gpu-0": SECOND}, per_device=per_device)
              for n in range(50)]  # fmt: skip
    assert cluster_cap(400, budget.percent) == 20
    api = _Api()
    _run(_reconciler(api, budget), api, slices, 0.0)
    first = api.granted()
    assert len(first) == 20
    # Ties within the second are broken by pool and device name: the lowest 20 nodes.
    pools = sorted(s["spec"]["pool"]["name"] for s in slices)[:20]
    assert first == {(pool, "gpu-0") for pool in pools}
    for now in (1.0, 2.0):
        _run(_reconciler(api, budget), api, slices, now)  # restarts / leader changes
    assert api.granted() == first
    assert (api.creates, api.deletes) == (20, 0)


def test_on_recovery_the_budget_passes_to_the_oldest_waiting_request() -> None:
    budget = Budget(per_node=1, percent=5.0)
    times = {n: f"2026-12-07T10:00:{n:02d}Z" for n in range(50)}
    slices = [_slice(f"node-{n:02d}", 8, {"gpu-0": times[n]}) for n in range(50)]
    api = _Api()
    reconciler = _reconciler(api, budget)
    _run(reconciler, api, slices, 0.0)
    assert api.granted() == {(f"node-{n:02d}", "gpu-0") for n in range(20)}
    slices[3] = _slice("node-03", 8, {})  # node-03's device recovered
    _run(reconciler, api, slices, 1.0)  # its rule is deleted; its place frees when seen gone
    _run(reconciler, api, slices, 2.0)
    assert ("node-03", "gpu-0") not in api.granted()
    assert ("node-20", "gpu-0") in api.granted()
    assert len(api.granted()) == 20


def test_a_granted_device_keeps_its_rule_while_an_older_request_waits() -> None:
    # No flapping: a request that ranks first but arrives late does not take a place.
    budget = Budget(per_node=1, percent=100.0)
    api = _Api()
    reconciler = _reconciler(api, budget)
    slices = [_slice("node-a", 2, {"gpu-1": "2026-12-07T10:00:05Z"})]
    _run(reconciler, api, slices, 0.0)
    slices = [_slice("node-a", 2, {"gpu-0": "2026-12-07T10:00:00Z",
                                   "gpu-1": "2026-12-07T10:00:05Z"})]  # fmt: skip
    for now in range(1, 5):
        _run(reconciler, api, slices, float(now))
    assert api.granted() == {("node-a", "gpu-1")}
    assert (api.creates, api.deletes) == (1, 0)


def test_a_device_missing_from_the_slices_keeps_its_rule_until_forget_after() -> None:
    budget = Budget(per_node=1, percent=100.0, forget_after=60.0)
    api = _Api()
    reconciler = _reconciler(api, budget)
    _run(reconciler, api, [_slice("node-a", 1, {"gpu-0": SECOND})], 0.0)
    _run(reconciler, api, [], 10.0)  # the kubelet wiped the slice: a plugin restart
    _run(reconciler, api, [], 69.0)
    assert api.granted() == {("node-a", "gpu-0")}
    _run(reconciler, api, [], 70.0)
    assert api.granted() == set()


def test_a_pool_published_by_two_nodes_is_never_granted() -> None:
    # A rule selects driver, pool and device: for a pool two nodes publish, it would also
    # taint the other node's device of that name.
    budget = Budget(per_node=1, percent=100.0)
    a = _slice("node-a", 1, {"gpu-0": SECOND})
    b = _slice("node-b", 1, {})
    b["spec"]["pool"]["name"] = "node-a"
    b["metadata"]["name"] = "slice-b"
    view = view_of([a, b], DRIVER)
    assert view.conflicted_pools == frozenset({"node-a"})
    api = _Api()
    _run(_reconciler(api, budget), api, [a, b], 0.0)
    assert api.granted() == set()


def test_a_new_leader_counts_the_rules_of_the_earlier_one_and_only_the_budgets() -> None:
    # No in-memory state carries the grants: a new leader reads them from the rules.
    slices = [_slice(f"node-{n}", 1, {"gpu-0": SECOND}) for n in range(3)]
    api = _Api()
    _run(_reconciler(api, Budget(per_node=1, percent=100.0)), api, slices, 0.0)
    assert len(api.granted()) == 3
    api.rules["admin-rule"] = {
        "metadata": {"name": "admin-rule", "labels": {}},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": "node-3", "device": "gpu-0"}},
    }
    slices.append(_slice("node-3", 1, {"gpu-0": "2026-12-07T09:00:00Z"}))  # oldest request
    # 75% of 4 devices: 3 places, all held by the earlier leader's rules; an administrator's
    # rule is neither counted nor touched.
    _run(_reconciler(api, Budget(per_node=1, percent=75.0)), api, slices, 1.0)
    assert len(api.granted()) == 3
    assert ("node-3", "gpu-0") not in api.granted()
    assert "admin-rule" in api.rules


def test_the_budget_refuses_impossible_limits() -> None:
    with pytest.raises(ValueError, match="per-node"):
        Budget(per_node=-1)
    with pytest.raises(ValueError, match="percentage"):
        Budget(percent=101)
