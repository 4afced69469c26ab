"""Selective requeueing: an event wakes only the pods waiting for it."""

from __future__ import annotations

from drakit.controller.waiting import CAPACITY, WaitingPods, claim_reason, class_reason


def test_event_wakes_only_pods_waiting_for_it_and_unparks_them():
    waiting = WaitingPods()
    waiting.park("ns/a", frozenset({claim_reason("ns", "c1")}))
    waiting.park("ns/b", frozenset({CAPACITY}))
    waiting.park("ns/c", frozenset({CAPACITY, class_reason("gpu")}))
    assert waiting.wake(claim_reason("ns", "c2")) == []
    assert waiting.wake(class_reason("gpu")) == ["ns/c"]
    assert waiting.wake(CAPACITY) == ["ns/b"]  # c was unparked by the class event
    assert waiting.wake(claim_reason("ns", "c1")) == ["ns/a"]
    assert len(waiting) == 0


def test_parking_again_replaces_the_reasons():
    waiting = WaitingPods()
    waiting.park("ns/a", frozenset({CAPACITY}))
    waiting.park("ns/a", frozenset({claim_reason("ns", "c")}))
    assert waiting.wake(CAPACITY) == []
    assert waiting.reasons("ns/a") == frozenset({claim_reason("ns", "c")})
