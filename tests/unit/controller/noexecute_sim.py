"""A simulated cluster for the NoExecute budget's property test (pure Python, seeded).

The simulation holds the API's truth (each node's ResourceSlice, the DeviceTaintRules) and
runs the real :class:`~drakit.controller.noexecute.reconciler.Reconciler` against it through
a :class:`SimWriter` that can fail (refused before writing, or written but answered with an
error), with watch views that lag behind the truth object by object. One schedule is a random
sequence of steps:

* failures (single devices, or one device on most nodes at once: the shared cause),
  recoveries, and node plugins publishing what they know (late, in any order);
* node plugin restarts: the slice stays, or the kubelet wipes it and the plugin publishes it
  again a little later (within the controller's ``forget_after``);
* controller restarts and leader changes: the old leader is fenced (it may still reconcile,
  but must write nothing), and the new one lists the API afresh;
* API write failures, and the controller reconciling from stale views.

:class:`Checker` checks after every write and every step, from the API's truth alone: the
budget's rules never exceed the cap (computed from every node's devices) nor ``per_node``
on any node, and no device's rule is deleted while the device still asks for NoExecute or
created twice while it keeps asking. At the end the cluster settles, and no waiting request
could still be granted.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from drakit.controller.noexecute.census import NODE_LABEL, bounded_total, request_key
from drakit.controller.noexecute.decision import Budget, cluster_cap
from drakit.controller.noexecute.reconciler import Reconciler
from drakit.controller.noexecute.rules import BUDGET_LABEL, NODE_ANNOTATION
from drakit.kubeapi.errors import (
    AlreadyExists,
    ApiUnavailable,
    NotFound,
    ServerError,
    TooManyRequests,
)

DRIVER = "gpu.example.com"
#: A field of the simulation in each published device entry (the census ignores it): the
#: index of the device's latest request change.
SIM_INDEX = "x-sim-request-index"


class Violation(AssertionError):  # noqa: N818 - a broken property, named as the tests say it
    """The invariant or the no-flip rule broke; the message says how and when."""


@dataclass
class Device:
    """One simulated device: the truth of its health and what its plugin asks for."""

    node: str
    pool: str
    name: str
    unhealthy: bool = False
    #: Whether the plugin's published slice carries the request.
    requested: bool = False
    #: Request changes published so far (the index of the latest).
    changes: int = 0
    stamp: str = ""


@dataclass
class Checker:
    """Checks the API's truth (see the module docstring).

    The no-flip rule, exactly: every request change of a device (published with the request,
    published without it) has an index, counted up per device. A rule change must be backed
    by the writing controller's own view of that device: a create by a view that shows the
    request, a delete by one that shows the device without it, and the index it saw must be
    above the one the device's previous rule change saw. So each rule change uses up a real
    change of its own, in order, however late the controller's view is.
    """

    cap: int
    per_node: int
    devices: dict[tuple[str, str], Device]
    used: dict[tuple[str, str], int] = field(default_factory=dict)
    step: int = 0

    def check_rules(self, rules: dict[str, dict[str, Any]]) -> None:
        mine = [r for r in rules.values() if r["metadata"]["labels"].get(BUDGET_LABEL) == DRIVER]
        if len(mine) > self.cap:
            raise Violation(f"step {self.step}: {len(mine)} rules in effect, cap {self.cap}")
        if len(mine) <= self.per_node:
            return  # no node can hold more rules than there are
        per_node: dict[str, int] = {}
        truth: dict[str, int] = {}
        for rule in mine:
            node = rule["metadata"]["annotations"][NODE_ANNOTATION]
            per_node[node] = per_node.get(node, 0) + 1
            node = self.devices[_ref(rule)].node
            truth[node] = truth.get(node, 0) + 1
        for counts in (per_node, truth):
            node, most = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
            if most > self.per_node:
                raise Violation(f"step {self.step}: {most} rules on node {node}")

    def changed(self, rule: dict[str, Any], seen: dict[str, Any] | None, created: bool) -> None:
        """A rule was created or deleted by a controller whose view of the device is
        ``seen`` (its slice entry; None: not in its view)."""
        ref = _ref(rule)
        what = "created" if created else "deleted"
        if seen is None:
            raise Violation(f"step {self.step}: rule of {ref} {what} without the device in view")
        asks = any(t["effect"] == "None" for t in seen["taints"])
        index = seen[SIM_INDEX]
        if asks != created or index <= self.used.get(ref, 0):
            raise Violation(
                f"step {self.step}: rule of {ref} {what} a second time for one request change "
                f"(view index {index}, asks {asks}, last change at {self.used.get(ref, 0)})"
            )
        self.used[ref] = index


class SimWriter:
    """The Reconciler's RuleWriter against the simulated API, failing as ``rng`` says."""

    def __init__(self, sim: Sim, failure_rate: float) -> None:
        self.sim = sim
        self.failure_rate = failure_rate

    def _fails(self) -> str:
        """ "" (works), "before" (refused, nothing written) or "after" (written, error)."""
        if self.sim.rng.random() >= self.failure_rate:
            return ""
        return self.sim.rng.choice(("before", "after"))

    def create(self, rule: dict[str, Any]) -> None:
        self.sim.assert_acting(self)
        mode = self._fails()
        if mode == "before":
            raise self.sim.rng.choice((ServerError, ApiUnavailable, TooManyRequests))("injected")
        name = rule["metadata"]["name"]
        if name in self.sim.rules:
            raise AlreadyExists(f"{name} exists")
        self.sim.rules[name] = rule
        self.sim.changed(("rule", name))
        self.sim.checker.changed(rule, self.sim.seen_by(self, rule), created=True)
        self.sim.checker.check_rules(self.sim.rules)
        if mode == "after":
            raise ServerError("injected after the write")

    def delete(self, name: str) -> None:
        self.sim.assert_acting(self)
        mode = self._fails()
        if mode == "before":
            raise ApiUnavailable("injected")
        rule = self.sim.rules.pop(name, None)
        if rule is None:
            raise NotFound(name)
        self.sim.changed(("rule", name))
        self.sim.checker.changed(rule, self.sim.seen_by(self, rule), created=False)
        if mode == "after":
            raise ServerError("injected after the write")

    def exists(self, name: str) -> bool:
        if self._fails():
            raise ApiUnavailable("injected")
        return name in self.sim.rules


@dataclass
class Controller:
    """One controller process: its reconciler, its watch views and whether it leads."""

    reconciler: Reconciler
    writer: SimWriter
    slices: dict[str, dict[str, Any]]
    rules: dict[str, dict[str, Any]]
    leading: bool = True
    #: Objects (("slice", node) or ("rule", name)) changed since this view last saw them.
    undelivered: set[tuple[str, str]] = field(default_factory=set)


class Sim:
    """One schedule (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        size = rng.random()
        nodes = (
            rng.randint(100, 300) if size < 0.02 else rng.randint(13, 60) if size < 0.2 else
            rng.randint(2, 12)
        )  # fmt: skip
        self.per_device_pools = rng.random() < 0.3
        self.budget = Budget(
            per_node=rng.choice((1, 1, 2)),
            percent=rng.choice((1.0, 5.0, 10.0, 20.0, 50.0)),
            forget_after=10_000.0,
        )
        self.failure_rate = rng.choice((0.0, 0.05, 0.3))
        self.now = 1_700_000_000.0
        self.devices: dict[tuple[str, str], Device] = {}
        self.by_node: dict[str, list[Device]] = {}
        for n in range(nodes):
            node = f"node-{n:03d}"
            pool = f"{node}-pool" if self.per_device_pools else node
            count = rng.choice((1, 2, 4, 8))
            self.by_node[node] = [Device(node, pool, f"gpu-{i}") for i in range(count)]
            for device in self.by_node[node]:
                self.devices[(pool, device.name)] = device
        counts = {node: len(devs) for node, devs in self.by_node.items()}
        self.checker = Checker(
            cluster_cap(bounded_total(counts), self.budget.percent),
            self.budget.per_node,
            self.devices,
        )
        self.slices: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.generation: Counter[str] = Counter()
        self.wiped: dict[str, int] = {}
        self.rules: dict[str, dict[str, Any]] = {}
        self.pool_node = {d.pool: d.node for d in self.devices.values()}
        self.device_list = list(self.devices.values())
        self.controllers: list[Controller] = []
        #: Nodes whose health changed since their plugin last published.
        self.dirty: set[str] = set()
        for node in self.by_node:
            self.publish(node)
        self.new_leader()

    # -- the API's truth -----------------------------------------------------------------------

    def publish(self, node: str) -> None:
        """The node plugin writes its slice from the health it knows now."""
        devices = []
        for device in self.by_node[node]:
            taints = []
            was = device.requested
            device.requested = device.unhealthy
            device.changes += was != device.requested
            if device.unhealthy:
                if not was or not device.stamp:
                    stamp = dt.datetime.fromtimestamp(int(self.now), dt.UTC)
                    device.stamp = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
                taints.append(
                    {"key": f"{DRIVER}/unhealthy", "value": "Xid", "effect": "NoSchedule"}
                )
                taints.append({"key": request_key(DRIVER), "value": "Xid", "effect": "None",
                               "timeAdded": device.stamp})  # fmt: skip
            entry: dict[str, Any] = {
                "name": device.name,
                "taints": taints,
                SIM_INDEX: device.changes,
            }
            if self.per_device_pools:
                entry["nodeName"] = node
            devices.append(entry)
        self.generation[node] += 1
        spec: dict[str, Any] = {
            "driver": DRIVER,
            "pool": {"name": self.by_node[node][0].pool, "generation": self.generation[node]},
            "devices": devices,
        }
        labels = {}
        if self.per_device_pools:
            spec["perDeviceNodeSelection"] = True
            labels[NODE_LABEL] = node
        else:
            spec["nodeName"] = node
        self.version += 1
        meta = {"name": f"slice-{node}", "labels": labels, "resourceVersion": str(self.version)}
        self.slices[node] = {"metadata": meta, "spec": spec}
        self.dirty.discard(node)
        self.changed(("slice", node))

    def changed(self, key: tuple[str, str]) -> None:
        """An object of the API changed: every watch has an event to deliver."""
        for controller in self.controllers:
            controller.undelivered.add(key)

    def seen_by(self, writer: SimWriter, rule: dict[str, Any]) -> dict[str, Any] | None:
        """The writing controller's view of the rule's device (its slice entry), if any."""
        pool, name = _ref(rule)
        controller = next(c for c in self.controllers if c.writer is writer)
        slice_ = controller.slices.get(self.pool_node[pool])
        for entry in slice_["spec"]["devices"] if slice_ else ():
            if entry["name"] == name:
                return entry  # type: ignore[no-any-return]
        return None

    def assert_acting(self, writer: SimWriter) -> None:
        for controller in self.controllers:
            if controller.writer is writer and not controller.leading:
                raise Violation(f"step {self.checker.step}: a fenced controller wrote")

    # -- controllers ---------------------------------------------------------------------------

    def new_leader(self) -> None:
        """The old leader (if any) stops leading; a new one lists the API afresh."""
        for controller in self.controllers:
            controller.leading = False
        self.controllers = self.controllers[-1:]  # the old one lingers, fenced, for a while
        writer = SimWriter(self, self.failure_rate)
        state = Controller(None, writer, dict(self.slices), dict(self.rules))  # type: ignore[arg-type]
        state.reconciler = Reconciler(
            DRIVER, self.budget, writer, "resource.k8s.io/v1", fence=lambda: state.leading
        )
        self.controllers.append(state)

    def sync_views(self, controller: Controller, everything: bool = False) -> None:
        """Deliver watch events: every object's latest state, or a random part of them."""
        for key in sorted(controller.undelivered):
            if not everything and self.rng.random() < 0.5:
                continue
            controller.undelivered.discard(key)
            kind, name = key
            truth, view = (
                (self.slices, controller.slices)
                if kind == "slice"
                else (self.rules, controller.rules)
            )
            if name in truth:
                view[name] = truth[name]
            else:
                view.pop(name, None)

    def reconcile(self, controller: Controller) -> None:
        controller.reconciler.reconcile(
            list(controller.slices.values()), list(controller.rules.values()), self.now
        )
        self.checker.check_rules(self.rules)

    # -- steps ---------------------------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        self.now += rng.choice((0.0, 0.3, 1.0, 2.5))
        kind = rng.random()
        if kind < 0.08:
            self.shared_fault()
        elif kind < 0.25:
            self.set_health(rng.choice(self.device_list), unhealthy=True)
        elif kind < 0.40:
            for device in rng.sample(self.device_list, min(3, len(self.device_list))):
                self.set_health(device, unhealthy=False)
        elif kind < 0.45:
            self.restart_plugin(rng.choice(list(self.by_node)))
        elif kind < 0.50:
            self.new_leader()
        for node in sorted(self.dirty):
            if node not in self.wiped and rng.random() < 0.6:
                self.publish(node)
        self.tick_wipes()
        for controller in self.controllers:
            self.sync_views(controller)
            if rng.random() < 0.8:
                self.reconcile(controller)

    def shared_fault(self) -> None:
        """One cause hits a device on most nodes at once."""
        for devices in self.by_node.values():
            if self.rng.random() < 0.9:
                self.set_health(devices[0], unhealthy=True)

    def set_health(self, device: Device, *, unhealthy: bool) -> None:
        device.unhealthy = unhealthy
        self.dirty.add(device.node)

    def restart_plugin(self, node: str) -> None:
        if self.rng.random() < 0.5:
            return  # the slice stays; the plugin seeds its state from it
        self.slices.pop(node, None)
        self.changed(("slice", node))
        self.wiped[node] = self.rng.randint(1, 5)

    def tick_wipes(self) -> None:
        for node in list(self.wiped):
            self.wiped[node] -= 1
            if self.wiped[node] <= 0:
                del self.wiped[node]
                self.publish(node)

    def settle(self) -> None:
        """No more faults: every plugin publishes, the leader sees everything and decides
        until nothing changes; then no waiting request could be granted."""
        for node in list(self.wiped):
            del self.wiped[node]
        for node in self.by_node:
            self.publish(node)
        leader = self.controllers[-1]
        leader.writer.failure_rate = 0.0
        for _ in range(4):
            self.sync_views(leader, everything=True)
            self.reconcile(leader)
        self.check_settled()

    def check_settled(self) -> None:
        mine = [r for r in self.rules.values() if r["metadata"]["labels"][BUDGET_LABEL] == DRIVER]
        held = {_ref(r) for r in mine}
        for ref in held:
            if not self.devices[ref].requested:
                raise Violation(f"settled: {ref} holds NoExecute but recovered")
        per_node = Counter(self.devices[ref].node for ref in held)
        for ref, device in self.devices.items():
            if device.requested and ref not in held:
                room = len(held) < self.checker.cap and per_node[device.node] < self.budget.per_node
                if room:
                    raise Violation(f"settled: {ref} waits with room in the budget")

    def run(self, steps: int) -> None:
        for step in range(steps):
            self.checker.step = step
            self.step()
        self.settle()


def _ref(rule: dict[str, Any]) -> tuple[str, str]:
    selector = rule["spec"]["deviceSelector"]
    return (selector["pool"], selector["device"])
