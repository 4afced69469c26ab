"""Hostile device selectors against the real apiserver and drakit's controller.

A selector written by one namespace's user can fail that user's claim, never stall the
scheduling of anybody else's pod, and never take the controller down; SIGTERM is honoured
while a selector is being evaluated.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_harness import ControllerProcess, Objects, RunningController

from drakit.controller.app import Controller
from drakit.controller.config import ClaimGeneration, ControllerConfig
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.resources import EVENTS, Resource

pytestmark = pytest.mark.integration

REDOS = '"' + "a" * 48 + 'b".find("^(a+)+$") != ""'  # RE2: linear, false (no device fits)
# Fails at run time on every device (Kubernetes: the same), accepted by the apiserver.
FAILING = '"x".matches(device.driver.substring(0, 0) + "(")'
# The most the apiserver's cost estimate lets through: 16 doublings (4 MiB). Guarded (a
# forked child per device), false on every device: seconds of evaluation for 128 devices.
SLOW = (
    'cel.bind(s0, "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01", '
    + "".join(f"cel.bind(s{i}, s{i - 1} + s{i - 1}, " for i in range(1, 17))
    + "s16.size() == 0"
    + ")" * 17
)


def claim_with_selector(objects: Objects, namespace: str, name: str, cls: str, expr: str) -> None:
    exactly = {"deviceClassName": cls, "selectors": [{"cel": {"expression": expr}}]}
    objects.claims.create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
    )


def pod_scheduled_condition(objects: Objects, namespace: str, name: str) -> Any:
    conditions = (objects.pods.get(name, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def bound(objects: Objects, namespace: str, name: str) -> str | None:
    node: str | None = objects.pods.get(name, namespace)["spec"].get("nodeName")
    return node


@pytest.fixture
def controller_with_events(api: Any) -> Iterator[EventRecorder]:
    recorder = EventRecorder(api, reporting_controller="drakit.dev/test", reporting_instance="t")
    config = ControllerConfig(claim_generation=ClaimGeneration.SCOPED, workers=4)
    running = RunningController(Controller(api, config, events=recorder)).start()
    try:
        yield recorder
    finally:
        running.stop()
        recorder.stop()


def test_redos_selector_fails_its_pod_while_another_namespace_pod_is_bound(
    objects, namespace, other_namespace, controller_with_events, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    cls = objects.device_class()
    claim_with_selector(objects, namespace, "redos", cls, REDOS)
    objects.pod(namespace, "victim", claims={"gpu": "redos"})
    objects.claim(other_namespace, "plain", cls)
    objects.pod(other_namespace, "bystander", claims={"gpu": "plain"})
    assert eventually(lambda: bound(objects, other_namespace, "bystander")) == node
    cond = eventually(lambda: pod_scheduled_condition(objects, namespace, "victim"))
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "cannot allocate all claims" in cond["message"]
    assert bound(objects, namespace, "victim") is None


def test_failing_selector_makes_its_pod_unschedulable_with_a_warning_on_the_claim(
    objects, namespace, other_namespace, controller_with_events, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=2)
    cls = objects.device_class()
    claim_with_selector(objects, namespace, "failing", cls, FAILING)
    objects.pod(namespace, "victim", claims={"gpu": "failing"})
    objects.claim(other_namespace, "plain", cls)
    objects.pod(other_namespace, "bystander", claims={"gpu": "plain"})
    assert eventually(lambda: bound(objects, other_namespace, "bystander")) == node
    cond = eventually(lambda: pod_scheduled_condition(objects, namespace, "victim"))
    assert cond["reason"] == "Unschedulable"
    assert "CEL runtime error: Illegal regex: error parsing regexp" in cond["message"]
    assert f"ResourceClaim {namespace}/failing: spec.devices.requests[0].exactly" in cond["message"]
    events = Resource(objects.api, EVENTS)

    def claim_warning() -> list[Any]:
        controller_with_events.flush()
        return [
            e for e in events.list(namespace).items
            if e.get("reason") == "AllocationFailed" and e["regarding"]["name"] == "failing"
        ]  # fmt: skip

    (event,) = eventually(claim_warning)
    assert event["type"] == "Warning"
    assert "Illegal regex" in event["note"]


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended while listed
        found += [int(c) for c in text]
    return found


def test_sigterm_during_a_long_selector_evaluation_stops_the_controller_within_5_seconds(
    objects, cluster, namespace, tmp_path, eventually
):
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=128)
    cls = objects.device_class()
    process = ControllerProcess(cluster.kubeconfig, tmp_path / "controller.log")
    try:
        claim_with_selector(objects, namespace, "slow", cls, SLOW)
        objects.pod(namespace, "p", claims={"gpu": "slow"})
        # a guarded child that evaluates the selector exists: an evaluation is running
        eventually(lambda: children_of(process.process.pid), timeout=120, what="no child")
        process.process.send_signal(signal.SIGTERM)
        # liveness bound from the issue: the controller is gone within 5 seconds
        code = process.process.wait(timeout=5)
    finally:
        process.kill()
    assert code == 0
