"""The bookkeeping of bounded backend unprepares (pure; the stuck backend on the real socket
is tests/integration/node_plugin/test_bounded_unprepare.py)."""

from __future__ import annotations

import threading

from helpers.waiting import eventually

from drakit.node_plugin.prepare.bounded import UnprepareAttempts

UID = "5b0c7c3e-1f6a-4a8e-9d55-0a2b3c4d5e6f"


def test_a_failed_attempt_that_outlived_its_wait_is_run_again_by_the_next_call() -> None:
    attempts = UnprepareAttempts(timeout=5)
    release, calls = threading.Event(), []

    def failing() -> str:
        calls.append("failing")
        release.wait(30)
        return "device busy"

    assert attempts.run(UID, failing, wait=0) is None
    assert attempts.running(UID) and attempts.pending(UID)
    release.set()
    eventually(lambda: not attempts.running(UID), "the first attempt to finish")
    assert attempts.run(UID, lambda: calls.append("again") or "", wait=5) == ""
    assert calls == ["failing", "again"]
    assert not attempts.pending(UID)


def test_a_successful_attempt_that_outlived_its_wait_is_collected_not_repeated() -> None:
    attempts = UnprepareAttempts(timeout=5)
    release, calls = threading.Event(), []

    def slow() -> str:
        calls.append("slow")
        release.wait(30)
        return ""

    assert attempts.run(UID, slow, wait=0) is None
    release.set()
    assert attempts.run(UID, lambda: calls.append("again") or "", wait=5) == ""
    assert calls == ["slow"]
    assert not attempts.pending(UID)


def test_a_finished_attempt_nobody_collects_can_be_dropped_a_running_one_not() -> None:
    attempts = UnprepareAttempts(timeout=5)
    release = threading.Event()

    def slow() -> str:
        release.wait(30)
        return ""

    assert attempts.run(UID, slow, wait=0) is None
    attempts.drop_finished(UID)
    assert attempts.running(UID)  # still running: kept, the backend is never called twice
    release.set()
    eventually(lambda: not attempts.running(UID), "the attempt to finish")
    assert attempts.pending(UID)
    attempts.drop_finished(UID)
    assert not attempts.pending(UID)
