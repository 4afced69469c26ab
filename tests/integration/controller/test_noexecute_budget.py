"""The controller's NoExecute budget against the real apiserver: fake nodes' slices carrying
node plugins' requests (written here, as the plugins write them), the running controller
writing DeviceTaintRules, and a watcher of every rule change checking the cap at every
moment (docs/health.md, "The NoExecute budget")."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from controller_harness import Objects

from drakit.controller.noexecute.decision import Budget
from drakit.controller.noexecute.rules import BUDGET_LABEL
from drakit.controller.noexecute.runner import RULE_VERSIONS, rule_type
from drakit.kubeapi.clusterversion import served_version
from drakit.kubeapi.informer import EventHandlers, Informer
from drakit.kubeapi.objects import KubeObject
from drakit.kubeapi.resources import Resource

pytestmark = pytest.mark.integration

NODES = 10
DEVICES = 4  # 40 devices; 10 %: a cap of 4, below the number of nodes
SECOND = "2026-12-07T10:00:00Z"


class RuleWatcher:
    """Every change of one driver's budget rules, in order, with the count after each."""

    def __init__(self, api: Any, driver: str) -> None:
        self._lock = threading.Lock()
        self.most = 0
        self.per_node_most = 0
        self.created: Counter[str] = Counter()
        self.deleted: Counter[str] = Counter()
        self._selector = f"{BUDGET_LABEL}={driver}"
        self.informer = Informer(Resource(api, rule_type("v1")), label_selector=self._selector)
        self.informer.add_handlers(EventHandlers(on_add=self._added, on_delete=self._deleted))

    def __enter__(self) -> RuleWatcher:
        self.informer.start()
        assert self.informer.wait_for_sync(30)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.informer.stop()
        rules = self.informer.resource
        for rule in rules.list(label_selector=self._selector).items:
            rules.delete(rule["metadata"]["name"])

    def devices(self) -> set[tuple[str, str]]:
        selectors = (r["spec"]["deviceSelector"] for r in self.informer.store.objects())
        return {(s["pool"], s["device"]) for s in selectors}

    def _added(self, rule: KubeObject, _initial: bool) -> None:
        with self._lock:
            self.created[rule["metadata"]["name"]] += 1
            rules = self.informer.store.objects()
            self.most = max(self.most, len(rules))
            nodes = Counter(r["spec"]["deviceSelector"]["pool"] for r in rules)
            self.per_node_most = max(self.per_node_most, *nodes.values())

    def _deleted(self, rule: KubeObject) -> None:
        with self._lock:
            self.deleted[rule["metadata"]["name"]] += 1


def _set_requests(objects: Objects, node: str, unhealthy: dict[str, str]) -> None:
    """Write the node's slice as its plugin would: NoSchedule and the request on each
    unhealthy device (``unhealthy``: device name -> the request's timeAdded)."""
    name = f"{node}-{objects.driver.split('.')[0]}"
    obj = objects.slices.get(name)
    for device in obj["spec"]["devices"]:
        stamp = unhealthy.get(device["name"])
        device["taints"] = (
            [
                {"key": f"{objects.driver}/unhealthy", "value": "Xid79", "effect": "NoSchedule",
                 "timeAdded": stamp},
                {"key": f"{objects.driver}/noexecute-request", "value": "Xid79",
                 "effect": "None", "timeAdded": stamp},
            ]
            if stamp
            else []
        )  # fmt: skip
    objects.slices.update(obj)


def _nodes(objects: Objects) -> list[str]:
    prefix = objects.driver.split(".")[0]
    names = [f"nx-{prefix}-{i:02d}" for i in range(NODES)]
    for name in names:
        objects.node(name, devices=DEVICES)
    return names


def test_the_apiserver_serves_devicetaintrule_in_v1(api: Any) -> None:
    # Kubernetes 1.37 (the pinned test version): GA, on by default; no gate, no runtime-config.
    assert served_version(api, "resource.k8s.io", "devicetaintrules", RULE_VERSIONS) == "v1"
    assert served_version(api, "resource.k8s.io", "nosuchthings", RULE_VERSIONS) is None


def test_a_shared_fault_on_every_node_holds_the_cap_and_passes_it_on_recovery(
    *, api: Any, objects: Objects, start_controller: Any, eventually: Any
) -> None:
    nodes = _nodes(objects)
    with RuleWatcher(api, objects.driver) as watcher:
        running = start_controller(noexecute=Budget(per_node=1, percent=10.0))
        for node in nodes:  # one cause, one second, every node
            _set_requests(objects, node, {"dev-0": SECOND})
        first = {(node, "dev-0") for node in sorted(nodes)[:4]}  # ties: by pool name
        eventually(lambda: watcher.devices() == first, what="the first four granted")
        budget = running.controller.noexecute
        assert budget is not None
        budget.kick()
        eventually(lambda: len(budget.last[objects.driver].plan.waiting) == NODES - 4,
                   what="six requests waiting")  # fmt: skip

        for node in sorted(nodes)[:2]:  # two granted devices recover
            _set_requests(objects, node, {})
        second = {(node, "dev-0") for node in sorted(nodes)[2:6]}
        eventually(lambda: watcher.devices() == second, what="the budget passed on")

        assert watcher.most <= 4, f"{watcher.most} rules at once, cap 4"
        assert watcher.per_node_most <= 1
        # One create per granted device and one delete per recovery: no flip.
        assert max(watcher.created.values()) == 1
        assert sum(watcher.deleted.values()) == 2


def test_a_new_leader_reads_the_rules_and_changes_none(
    *, api: Any, objects: Objects, start_controller: Any, eventually: Any
) -> None:
    nodes = _nodes(objects)
    with RuleWatcher(api, objects.driver) as watcher:
        first = start_controller(noexecute=Budget(per_node=1, percent=10.0))
        for node in nodes:
            _set_requests(objects, node, {"dev-0": f"2026-12-07T10:00:{nodes.index(node):02d}Z"})
        granted = {(node, "dev-0") for node in nodes[:4]}  # the four oldest requests
        eventually(lambda: watcher.devices() == granted, what="granted")
        first.stop()

        second = start_controller(noexecute=Budget(per_node=1, percent=10.0))
        budget = second.controller.noexecute
        assert budget is not None
        eventually(lambda: objects.driver in budget.last, what="the new leader decided")
        budget.kick()
        eventually(lambda: len(budget.last[objects.driver].plan.waiting) == NODES - 4,
                   what="the new leader's plan")  # fmt: skip
        assert budget.last[objects.driver].plan.create == ()
        assert watcher.devices() == granted
        assert sum(watcher.created.values()) == 4
        assert sum(watcher.deleted.values()) == 0
