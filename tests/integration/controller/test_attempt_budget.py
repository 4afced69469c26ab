"""A scheduling attempt has a time budget over all the nodes it tries (issue 30, item 5): a
pod whose selectors are slow is reported unschedulable when the budget is spent, instead of
holding a scheduling worker for the per-node limit on every node."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conftest import StartController
from controller_harness import Objects
from test_selector_budget import SLOW, claim_with_selector, pod_scheduled_condition

pytestmark = pytest.mark.integration


def test_attempt_that_spends_its_time_budget_leaves_the_pod_unschedulable_saying_so(
    objects: Objects, namespace: str, start_controller: StartController, eventually: Any
) -> None:
    node = f"n-{uuid.uuid4().hex[:6]}"
    objects.node(node, devices=128)
    device_class = objects.device_class()
    # The per-node limit alone would let the slow selector run to its end.
    start_controller(workers=1, allocation_timeout=600.0, attempt_timeout=0.5)
    claim_with_selector(objects, namespace, "slow", device_class, SLOW)
    objects.pod(namespace, "p", claims={"gpu": "slow"})
    condition = eventually(lambda: pod_scheduled_condition(objects, namespace, "p"))
    assert condition["reason"] == "Unschedulable"
    # Spent before an allocator call, or cut short inside one: either way within the budget.
    message = condition["message"]
    assert "time budget of 0.5s" in message or "time limit exceeded" in message, message
