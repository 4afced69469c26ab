"""Per-key work queues: the controller pattern's way to turn events into reconciles.

The rules are client-go's:

- a key is queued at most once, however often it is added while waiting (adds coalesce);
- a key is handed to at most one worker at a time; adding it while it is being processed
  queues it again for after ``done()``, so no change is ever lost and no key runs twice at once;
- different keys run in parallel on N workers, in FIFO order; with ``tenant_of`` (e.g. the
  namespace of the object a key names) tenants take turns instead (:mod:`drakit.kubeapi.fairqueue`),
  so one tenant's backlog cannot hold up the others;
- a failed key is retried after a per-key exponential backoff (5 ms doubling up to 1000 s),
  never faster than an overall token bucket (10 per second, burst 100) allows;
  the cause of every failure is logged with the key and its retry count.

Delayed adds (``add_after``) are kept in a heap and moved into the queue by whichever worker is
waiting when they fall due, so no extra thread is needed.

Optional metrics (:mod:`drakit.telemetry.metrics`, exposed for Prometheus) carry client-go's names
(``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_retries_total``,
``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``)
with the queue's name as label ``name``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.fairqueue import FairQueue, single_tenant
from drakit.kubeapi.ratelimit import TokenBucket
from drakit.telemetry.logs import get_logger
from drakit.telemetry.metrics import Counter, Gauge, Histogram, Registry

__all__ = ["RateLimiter", "WorkQueue", "WorkQueueMetrics"]

logger = get_logger(__name__)

K = TypeVar("K", bound=Hashable)

#: A handler returns None when done, or a number of seconds after which the key is synced again.
Handler = Callable[[K], float | None]


class RateLimiter(Generic[K]):
    """Retry delays: the larger of a per-key exponential backoff and an overall token bucket.

    ``when(key)`` counts a failure and returns the delay before the next try; ``forget(key)``
    resets the key after a success. Thread-safe.
    """

    def __init__(
        self,
        *,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        qps: float = 10.0,
        burst: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._base = base_delay
        self._max = max_delay
        self._bucket = TokenBucket(qps, burst, clock=clock)
        self._failures: dict[K, int] = {}
        self._lock = threading.Lock()

    def when(self, key: K) -> float:
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        backoff = min(self._max, self._base * 2.0 ** min(failures, 64))
        return max(backoff, self._bucket.reserve())

    def forget(self, key: K) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def retries(self, key: K) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class WorkQueueMetrics:
    """The work queue metrics in one registry; share one instance between the queues of a
    process (each queue reports under its own ``name`` label)."""

    def __init__(self, registry: Registry) -> None:
        buckets = tuple(1e-8 * 10**i for i in range(10))  # client-go's: 10 ns to 10 s
        self.depth = Gauge(
            "workqueue_depth", "Current depth of the work queue.", ["name"], registry=registry
        )
        self.adds = Counter(
            "workqueue_adds_total", "Keys added to the work queue.", ["name"], registry=registry
        )
        self.retries = Counter(
            "workqueue_retries_total", "Retries after failed syncs.", ["name"], registry=registry
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long a key waits in the queue before it is processed.",
            ["name"],
            buckets=buckets,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long processing a key takes.",
            ["name"],
            buckets=buckets,
            registry=registry,
        )


class WorkQueue(Generic[K]):
    """A work queue of keys with at-most-one-worker-per-key semantics. Thread-safe."""

    def __init__(
        self,
        name: str,
        *,
        rate_limiter: RateLimiter[K] | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: WorkQueueMetrics | None = None,
        tenant_of: Callable[[K], Hashable] = single_tenant,
    ) -> None:
        self.name = name
        self._metrics = metrics
        self._queued_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self.rate_limiter: RateLimiter[K] = rate_limiter or RateLimiter()
        self._clock = clock
        self._queue: FairQueue[K] = FairQueue(tenant_of)
        self._dirty: set[K] = set()  # queued, or to be queued again when its worker is done
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []  # (due time, sequence, key)
        self._due: dict[K, float] = {}  # earliest due time of each delayed key
        self._sequence = itertools.count()
        self._cond = threading.Condition()
        self._shutting_down = False
        self._workers: list[threading.Thread] = []

    # -- adding --------------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is already waiting. Ignored after shutdown."""
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending delay for the key wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutting_down:
                return
            due = self._clock() + delay
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its backoff delay (counts a failure); returns the delay."""
        delay = self.rate_limiter.when(key)
        if self._metrics is not None:
            self._metrics.retries.labels(self.name).inc()
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff: call after it was processed successfully."""
        self.rate_limiter.forget(key)

    # -- consuming -----------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """The next key, marked as processing; None on shutdown (or after ``timeout`` seconds).

        The caller must call ``done(key)`` when it has finished with the key.
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                self._move_due_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    self._record_start_locked(key)
                    return key
                wait = self._wait_time_locked(deadline)
                if wait is not None and wait <= 0:
                    return None
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        """Mark ``key`` finished; if it was added meanwhile, it is queued again now."""
        with self._cond:
            self._processing.discard(key)
            self._record_done_locked(key)
            if key in self._dirty and not self._shutting_down:
                self._enqueue_locked(key)

    # -- workers and shutdown ------------------------------------------------------------------

    def start(self, handler: Handler[K], *, workers: int = 1) -> None:
        """Run ``handler`` for queued keys on ``workers`` threads until ``shutdown()``.

        A handler that raises is retried with backoff (``add_rate_limited``) and the cause is
        logged; one that returns a number is synced again after that many seconds.
        """
        for index in range(workers):
            thread = threading.Thread(
                target=self._work, args=(handler,), name=f"{self.name}-worker-{index}", daemon=True
            )
            self._workers.append(thread)
            thread.start()

    def shutdown(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop handing out keys (queued ones are dropped); with ``wait``, join the workers,
        which finish the key they are processing. Idempotent."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
        if wait:
            for thread in self._workers:
                if thread is not threading.current_thread():
                    thread.join(timeout)

    def run_pending(self, handler: Handler[K]) -> int:
        """Run ``handler`` in this thread for every key due now by the queue's clock, with
        the same retry and requeue rules as a worker; returns how many keys ran.

        For deterministic tests that drive the clock themselves: not with started workers.
        """
        ran = 0
        while (key := self.get(timeout=0)) is not None:
            self._process(key, handler)
            ran += 1
        return ran

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        """Keys ready to be processed (not counting delayed ones)."""
        with self._cond:
            return len(self._queue)

    def pending_delayed(self) -> int:
        with self._cond:
            return len(self._due)

    def idle(self) -> bool:
        """True when no key is queued, being processed or waiting out a delay: every key
        added so far has been handled. A test waits for it (after the event it expects a
        component to ignore has reached the queue's producer) before asserting that nothing
        was done."""
        with self._cond:
            return not (self._queue or self._processing or self._due)

    # -- internals -----------------------------------------------------------------------------

    def _add_locked(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if self._metrics is not None:
            self._metrics.adds.labels(self.name).inc()
        if key not in self._processing:
            self._enqueue_locked(key)

    def _enqueue_locked(self, key: K) -> None:
        self._queue.append(key)
        self._queued_at.setdefault(key, self._clock())
        if self._metrics is not None:
            self._metrics.depth.labels(self.name).set(len(self._queue))
        self._cond.notify()

    def _record_start_locked(self, key: K) -> None:
        now = self._clock()
        queued_at = self._queued_at.pop(key, now)
        self._started_at[key] = now
        if self._metrics is not None:
            self._metrics.depth.labels(self.name).set(len(self._queue))
            self._metrics.queue_duration.labels(self.name).observe(now - queued_at)

    def _record_done_locked(self, key: K) -> None:
        started_at = self._started_at.pop(key, None)
        if self._metrics is not None and started_at is not None:
            self._metrics.work_duration.labels(self.name).observe(self._clock() - started_at)

    def _move_due_locked(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self._add_locked(key)

    def _wait_time_locked(self, deadline: float | None) -> float | None:
        now = self._clock()
        waits = [self._delayed[0][0] - now] if self._delayed else []
        if deadline is not None:
            waits.append(deadline - now)
        return max(0.0, min(waits)) if waits else None

    def _work(self, handler: Handler[K]) -> None:
        while (key := self.get()) is not None:
            self._process(key, handler)

    def _process(self, key: K, handler: Handler[K]) -> None:
        """Run ``handler`` for ``key`` (got from the queue): retry on failure, requeue when
        asked, ``done`` in any case."""
        try:
            requeue_after = handler(key)
        except Exception as err:
            retries = self.rate_limiter.retries(key)
            delay = self.add_rate_limited(key)
            logger.warning(
                "Sync failed, will retry",
                queue=self.name,
                key=str(key),
                retries=retries + 1,
                delay_seconds=round(delay, 3),
                cause=f"{type(err).__name__}: {err}",
                # API errors are routine (a conflict, a missing object): no traceback for them.
                exc_info=not isinstance(err, ApiError),
            )
        else:
            self.forget(key)
            if requeue_after is not None:
                self.add_after(key, requeue_after)
        finally:
            self.done(key)
