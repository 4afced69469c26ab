"""FairPool with real threads: a newcomer is not starved by a caller with many tasks."""

from __future__ import annotations

import threading

from helpers.waiting import eventually

from drakit.node_plugin.fairpool import FairPool


class Recorder:
    """Tasks ``("a", i)`` block until released; ``("b", i)`` return at once. Start order is kept."""

    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []
        self.release = threading.Semaphore(0)
        self.cond = threading.Condition()

    def task(self, item: tuple[str, int]) -> tuple[str, int]:
        with self.cond:
            self.started.append(item)
            self.cond.notify_all()
        if item[0] == "a":
            self.release.acquire()
        return item

    def wait_started(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.started) >= count, timeout=30)


def _queued(pool: FairPool[tuple[str, int], tuple[str, int]]) -> int:
    return pool._pool._work_queue.qsize()  # observed, not timed


def test_a_second_caller_runs_after_one_task_of_a_busy_caller_not_after_all() -> None:
    rec = Recorder()
    pool: FairPool[tuple[str, int], tuple[str, int]] = FairPool(4, rec.task, "t")
    items_a = [("a", i) for i in range(40)]
    out: dict[str, list[tuple[str, int]]] = {}
    a = threading.Thread(target=lambda: out.update(a=pool.map(items_a, is_active=lambda: True,
                                                              skipped=lambda i: i)))  # fmt: skip
    a.start()
    rec.wait_started(4)  # all four workers busy with A, nothing of A queued
    assert _queued(pool) == 0
    b = threading.Thread(target=lambda: out.update(b=pool.map([("b", 0)], is_active=lambda: True,
                                                              skipped=lambda i: i)))  # fmt: skip
    b.start()
    eventually(lambda: _queued(pool) > 0, "B's one task queued behind A's running ones")
    rec.release.release()  # one task of A finishes
    b.join(timeout=30)
    assert out["b"] == [("b", 0)]
    assert rec.started[:5] == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0)]
    for _ in range(40):
        rec.release.release()
    a.join(timeout=30)
    assert out["a"] == items_a
    pool.shutdown()


def test_a_caller_gone_starts_no_further_task() -> None:
    rec = Recorder()
    pool: FairPool[tuple[str, int], tuple[str, int]] = FairPool(2, rec.task, "t")
    active = threading.Event()
    active.set()
    items = [("a", i) for i in range(6)]
    out: list[list[tuple[str, int]]] = []
    t = threading.Thread(
        target=lambda: out.append(
            pool.map(items, is_active=active.is_set, skipped=lambda i: ("skipped", i[1]))
        )
    )
    t.start()
    rec.wait_started(2)
    active.clear()
    rec.release.release()
    rec.release.release()
    t.join(timeout=30)
    assert out[0][:2] == [("a", 0), ("a", 1)]
    assert out[0][2:] == [("skipped", i) for i in range(2, 6)]
    assert rec.started == [("a", 0), ("a", 1)]
    pool.shutdown()


def test_one_item_of_the_only_caller_runs_in_the_callers_thread() -> None:
    threads: list[str] = []

    def task(i: int) -> int:
        threads.append(threading.current_thread().name)
        return i

    pool: FairPool[int, int] = FairPool(2, task, "worker")
    assert pool.map([7], is_active=lambda: True, skipped=lambda i: -i) == [7]
    assert threads == [threading.current_thread().name]
    assert pool.map([7], is_active=lambda: False, skipped=lambda i: -i) == [-7]
    assert pool.map([1, 2], is_active=lambda: True, skipped=lambda i: -i) == [1, 2]
    assert all(name.startswith("worker") for name in threads[1:])
    pool.shutdown()
