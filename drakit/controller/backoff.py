"""Backoff of unschedulable pods, kube-scheduler's way.

A pod that failed to schedule waits ``initial * 2**(failures - 1)`` seconds, at most
``maximum``, before its next attempt (kube-scheduler's defaults: 1 s and 10 s, its
``podInitialBackoffSeconds`` and ``podMaxBackoffSeconds``). An event that may help (capacity
freed, a claim changed) still wakes the pod, but its attempt waits for the rest of the
backoff: a pod whose attempts are slow cannot be re-run on every capacity change. A
successful attempt, or the pod leaving, forgets its failures.

Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_INITIAL_BACKOFF", "DEFAULT_MAX_BACKOFF", "PodBackoff"]

DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0


@dataclass
class _Failures:
    count: int
    retry_at: float


class PodBackoff:
    """Failures per pod key and when each pod may be attempted again."""

    def __init__(
        self,
        *,
        initial: float = DEFAULT_INITIAL_BACKOFF,
        maximum: float = DEFAULT_MAX_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 < initial <= maximum, got {initial}, {maximum}")
        self._initial = initial
        self._maximum = maximum
        self._clock = clock
        self._pods: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    def failed(self, pod_key: str) -> float:
        """Count a failed attempt of ``pod_key``; returns its backoff in seconds."""
        with self._lock:
            failures = self._pods.get(pod_key)
            count = failures.count + 1 if failures else 1
            delay = min(self._maximum, self._initial * 2.0 ** min(count - 1, 62))
            self._pods[pod_key] = _Failures(count, self._clock() + delay)
            return delay

    def remaining(self, pod_key: str) -> float:
        """Seconds before ``pod_key`` may be attempted again (0: now)."""
        with self._lock:
            failures = self._pods.get(pod_key)
            return max(0.0, failures.retry_at - self._clock()) if failures else 0.0

    def forget(self, pod_key: str) -> None:
        """The pod was scheduled or is gone: its next failure starts from ``initial``."""
        with self._lock:
            self._pods.pop(pod_key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods)
