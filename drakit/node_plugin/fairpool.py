"""A thread pool shared fairly between concurrent callers.

A plain executor serves tasks in submission order: a caller that submits a
hundred claim GETs makes the next caller's one GET wait behind all of them.
:class:`FairPool` lets each caller keep at most its share of the workers
busy (``workers // callers``, at least one) and submits its next task only
when one of its own finishes, so a newcomer waits at most for the tasks
already running. A caller that has gone (``is_active()`` turns False) starts
no further task.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class FairPool(Generic[T, R]):
    """``workers`` threads running ``task``; thread-safe."""

    def __init__(self, workers: int, task: Callable[[T], R], thread_name_prefix: str) -> None:
        self._workers = workers
        self._task = task
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=thread_name_prefix
        )
        self._callers = 0
        self._lock = threading.Lock()

    def _share(self) -> int:
        with self._lock:
            return max(1, self._workers // max(1, self._callers))

    def map(
        self, items: Sequence[T], *, is_active: Callable[[], bool], skipped: Callable[[T], R]
    ) -> list[R]:
        """``task(item)`` for every item, in order; ``skipped(item)`` once the caller is gone.

        ``task`` must not raise (its exceptions would be re-raised here). A single item
        of the only caller runs in the caller's thread: nobody waits for it, and the hand-off
        to a worker and back (a GIL switch each way) is most of a fast task's overhead.
        """
        with self._lock:
            inline = self._callers == 0 and len(items) == 1
            self._callers += 1
        try:
            if inline:
                return [self._task(items[0]) if is_active() else skipped(items[0])]
            return self._run(items, is_active, skipped)
        finally:
            with self._lock:
                self._callers -= 1

    def _run(
        self, items: Sequence[T], is_active: Callable[[], bool], skipped: Callable[[T], R]
    ) -> list[R]:
        results: dict[int, R] = {}
        running: dict[concurrent.futures.Future[R], int] = {}
        next_index = 0
        while next_index < len(items) or running:
            while next_index < len(items) and len(running) < self._share():
                if is_active():
                    running[self._pool.submit(self._task, items[next_index])] = next_index
                else:
                    results[next_index] = skipped(items[next_index])
                next_index += 1
            if running:
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    results[running.pop(future)] = future.result()
        return [results[i] for i in range(len(items))]

    def shutdown(self) -> None:
        """Stop accepting tasks; queued ones are cancelled, running ones finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)
