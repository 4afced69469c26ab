"""Work queue semantics: coalescing, one worker per key, parallel keys, backoff, delays."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

import pytest
from helpers.clock import FakeClock

from drakit.kubeapi.errors import Conflict
from drakit.kubeapi.ratelimit import TokenBucket
from drakit.kubeapi.workqueue import RateLimiter, WorkQueue, WorkQueueMetrics
from drakit.telemetry.metrics import Registry


def test_adding_a_waiting_key_twice_queues_it_once() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("a")
    q.add("a")
    assert len(q) == 1


def test_keys_come_out_in_the_order_they_were_added() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    for key in ("c", "a", "b"):
        q.add(key)
    assert [q.get(timeout=0), q.get(timeout=0), q.get(timeout=0)] == ["c", "a", "b"]


def test_a_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.add("a")
    assert q.get(timeout=0) is None  # still processing: not handed to a second worker
    q.done("a")
    assert q.get(timeout=0) == "a"


def test_a_key_not_added_again_is_gone_after_done() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    q.add("a")
    q.get(timeout=0)
    q.done("a")
    assert q.get(timeout=0) is None


def test_a_key_is_never_processed_by_two_workers_at_once() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    lock = threading.Lock()
    running: dict[str, int] = defaultdict(int)
    overlaps: list[str] = []
    processed = threading.Semaphore(0)

    def handler(key: str) -> None:
        with lock:
            running[key] += 1
            if running[key] > 1:
                overlaps.append(key)
        threading.Event().wait(0.001)  # widen the window in which a second worker could enter
        with lock:
            running[key] -= 1
        processed.release()

    q.start(handler, workers=8)
    for _ in range(50):  # keep adding while earlier adds of the same keys are being processed
        for key in ("a", "b", "c"):
            q.add(key)
        assert processed.acquire(timeout=10)
    q.shutdown()
    assert overlaps == []


def test_different_keys_are_processed_in_parallel() -> None:
    q: WorkQueue[str] = WorkQueue("t", rate_limiter=RateLimiter(base_delay=1000.0))
    both_running = threading.Barrier(2, timeout=10)
    results: list[str] = []
    both_done = threading.Semaphore(0)

    def handler(key: str) -> None:
        both_running.wait()  # raises BrokenBarrierError unless both keys run at the same time
        results.append(key)
        both_done.release()

    q.start(handler, workers=2)
    q.add("a")
    q.add("b")
    assert both_done.acquire(timeout=20)
    assert both_done.acquire(timeout=20)
    q.shutdown()
    assert sorted(results) == ["a", "b"]


def test_backoff_doubles_per_failure_up_to_the_cap() -> None:
    limiter: RateLimiter[str] = RateLimiter(base_delay=0.005, max_delay=0.04, qps=0)
    delays = [limiter.when("a") for _ in range(6)]
    assert delays == [0.005, 0.01, 0.02, 0.04, 0.04, 0.04]


def test_backoff_is_per_key_and_forget_resets_it() -> None:
    limiter: RateLimiter[str] = RateLimiter(base_delay=1.0, qps=0)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 1.0
    limiter.forget("a")
    assert limiter.when("a") == 1.0
    assert limiter.retries("a") == 1


def test_overall_limit_delays_retries_once_the_burst_is_spent() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = RateLimiter(base_delay=0.0, qps=2.0, burst=2, clock=clock)
    assert [limiter.when(k) for k in ("a", "b")] == [0.0, 0.0]
    assert limiter.when("c") == 0.5
    assert limiter.when("d") == 1.0
    clock.advance(10)
    assert limiter.when("e") == 0.0


def test_token_bucket_refuses_a_zero_burst() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(1.0, 0)


def test_add_after_holds_the_key_until_it_is_due() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("t", clock=clock)
    q.add_after("a", 10)
    assert q.get(timeout=0) is None
    clock.advance(10)
    assert q.get(timeout=0) == "a"


def test_the_earlier_of_two_delays_for_a_key_wins() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("t", clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 2)
    q.add_after("a", 30)
    clock.advance(2)
    assert q.get(timeout=0) == "a"
    q.done("a")
    clock.advance(100)
    assert q.get(timeout=0) is None


def test_rate_limited_add_uses_the_backoff_delay() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = RateLimiter(base_delay=4.0, qps=0, clock=clock)
    q: WorkQueue[str] = WorkQueue("t", rate_limiter=limiter, clock=clock)
    assert q.add_rate_limited("a") == 4.0
    clock.advance(3.9)
    assert q.get(timeout=0) is None
    clock.advance(0.1)
    assert q.get(timeout=0) == "a"


def test_a_failed_sync_is_retried_and_its_cause_logged(caplog: pytest.LogCaptureFixture) -> None:
    q: WorkQueue[str] = WorkQueue("claims", rate_limiter=RateLimiter(base_delay=0.001))
    attempts: list[str] = []
    succeeded = threading.Event()

    def handler(key: str) -> None:
        attempts.append(key)
        if len(attempts) < 3:
            raise Conflict("the object has been modified", code=409, reason="Conflict")
        succeeded.set()

    with caplog.at_level(logging.WARNING, logger="drakit.kubeapi.workqueue"):
        q.start(handler, workers=1)
        q.add("ns/claim")
        assert succeeded.wait(10)
        q.shutdown()
    failures = [r for r in caplog.records if r.getMessage() == "Sync failed, will retry"]
    assert len(failures) == 2
    assert failures[0].key == "ns/claim"  # type: ignore[attr-defined]
    assert "the object has been modified" in failures[0].cause  # type: ignore[attr-defined]
    assert [f.retries for f in failures] == [1, 2]  # type: ignore[attr-defined]
    assert q.rate_limiter.retries("ns/claim") == 0  # forgotten after the success


def test_a_failed_sync_logs_a_traceback_for_an_unexpected_error_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q: WorkQueue[str] = WorkQueue("claims", rate_limiter=RateLimiter(base_delay=0.001))
    both_failed = threading.Event()

    def handler(key: str) -> None:
        if key == "ns/api":
            raise Conflict("the object has been modified", code=409, reason="Conflict")
        if key == "ns/bug":
            both_failed.set()
            raise ZeroDivisionError("division by zero")

    with caplog.at_level(logging.WARNING, logger="drakit.kubeapi.workqueue"):
        q.start(handler, workers=1)
        q.add("ns/api")
        q.add("ns/bug")
        assert both_failed.wait(10)
        q.shutdown()
    failures = [r for r in caplog.records if r.getMessage() == "Sync failed, will retry"]
    first = {r.key: r for r in reversed(failures)}  # type: ignore[attr-defined]
    assert not first["ns/api"].exc_info  # an API error is routine: no traceback
    bug = first["ns/bug"].exc_info
    assert bug and bug[0] is ZeroDivisionError


def test_a_handler_returning_seconds_is_synced_again() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    calls: list[str] = []
    second = threading.Event()

    def handler(key: str) -> float | None:
        calls.append(key)
        if len(calls) == 2:
            second.set()
            return None
        return 0.001

    q.start(handler)
    q.add("a")
    assert second.wait(10)
    q.shutdown()
    assert calls == ["a", "a"]


def test_shutdown_wakes_waiting_workers_and_drops_queued_keys() -> None:
    q: WorkQueue[str] = WorkQueue("t")
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.get()))
    waiter.start()
    q.shutdown()
    waiter.join(10)
    q.add("a")
    assert got == [None]
    assert len(q) == 0
    assert q.get(timeout=0) is None


def test_metrics_report_depth_adds_retries_and_durations_per_queue() -> None:
    registry = Registry()
    metrics = WorkQueueMetrics(registry)
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("resource_claim", clock=clock, metrics=metrics)
    other: WorkQueue[str] = WorkQueue("pods", clock=clock, metrics=metrics)
    q.add("a")
    q.add("b")
    other.add("x")
    clock.advance(2)
    key = q.get(timeout=0)
    clock.advance(3)
    assert key == "a"
    q.done(key)
    q.add_rate_limited("a")

    def sample(metric: str, name: str = "resource_claim") -> float | None:
        return registry.get_sample_value(metric, {"name": name})

    assert sample("workqueue_depth") == 1
    assert sample("workqueue_depth", "pods") == 1
    assert sample("workqueue_adds_total") == 2
    assert sample("workqueue_retries_total") == 1
    assert sample("workqueue_queue_duration_seconds_sum") == 2
    assert sample("workqueue_work_duration_seconds_sum") == 3


def test_run_pending_retries_a_failed_key_once_its_backoff_has_passed() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = RateLimiter(base_delay=1.0, clock=clock)
    q: WorkQueue[str] = WorkQueue("t", rate_limiter=limiter, clock=clock)
    attempts: list[str] = []

    def conflict_once(key: str) -> None:
        attempts.append(key)
        if len(attempts) == 1:
            raise Conflict("the object has been modified", code=409, reason="Conflict")

    q.add("pool-a")
    assert q.run_pending(conflict_once) == 1
    assert q.run_pending(conflict_once) == 0  # backing off
    clock.advance(1.0)
    assert q.run_pending(conflict_once) == 1
    assert attempts == ["pool-a", "pool-a"] and limiter.retries("pool-a") == 0


def test_the_queue_is_idle_only_once_every_added_key_was_handled() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("t", clock=clock)
    assert q.idle()
    q.add("a")
    assert not q.idle()  # queued
    key = q.get(timeout=0)
    assert key == "a" and not q.idle()  # being processed
    q.done("a")
    assert q.idle()
    q.add_after("b", 5)
    assert not q.idle()  # waiting out its delay
    clock.advance(5)
    assert q.run_pending(lambda _key: None) == 1
    assert q.idle()
