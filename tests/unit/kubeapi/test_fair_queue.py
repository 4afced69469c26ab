"""Namespaces take turns in the work queue: one namespace's backlog cannot starve another's
keys (issue 30, item 5)."""

from __future__ import annotations

import pytest

from drakit.kubeapi.fairqueue import FairQueue
from drakit.kubeapi.workqueue import WorkQueue


def drain(queue: FairQueue[str]) -> list[str]:
    return [queue.popleft() for _ in range(len(queue))]


def test_tenants_take_turns_one_key_each_and_keep_their_own_order() -> None:
    queue: FairQueue[str] = FairQueue(lambda key: key[0])
    for key in ("a1", "a2", "a3", "b1", "c1", "b2"):
        queue.append(key)
    assert drain(queue) == ["a1", "b1", "c1", "a2", "b2", "a3"]


def test_a_tenant_arriving_behind_a_backlog_is_served_within_one_round() -> None:
    queue: FairQueue[str] = FairQueue(lambda key: key.split("-")[0])
    for i in range(1000):
        queue.append(f"noisy-{i}")
    queue.append("quiet-0")
    assert drain(queue)[:2] == ["noisy-0", "quiet-0"]


def test_a_tenant_that_emptied_and_returns_queues_behind_the_waiting_tenants() -> None:
    queue: FairQueue[str] = FairQueue(lambda key: key[0])
    queue.append("a1")
    queue.append("b1")
    queue.append("b2")
    assert queue.popleft() == "a1"
    queue.append("a2")  # a's earlier turn is over: b goes first
    assert drain(queue) == ["b1", "a2", "b2"]
    assert queue.tenants() == 0


def test_without_tenants_the_queue_is_a_plain_fifo() -> None:
    queue: FairQueue[str] = FairQueue()
    for key in ("c", "a", "b"):
        queue.append(key)
    assert drain(queue) == ["c", "a", "b"]
    with pytest.raises(IndexError):
        queue.popleft()


def namespace_of(key: str) -> str:
    return key.partition(":")[2].partition("/")[0]


def test_work_queue_hands_a_quiet_namespaces_key_out_before_a_noisy_backlog() -> None:
    queue: WorkQueue[str] = WorkQueue("t", tenant_of=namespace_of)
    for i in range(50):
        queue.add(f"schedule:noisy/pod-{i}")
    queue.add("claim:quiet/claim-0")
    handed_out = [queue.get(timeout=0) for _ in range(2)]
    assert handed_out == ["schedule:noisy/pod-0", "claim:quiet/claim-0"]
