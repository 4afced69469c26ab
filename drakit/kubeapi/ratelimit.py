"""A token bucket: the client-side request limit (QPS/burst) and the work queue's overall limit.

``reserve()`` never blocks: it takes a token (possibly one that only exists in the future) and
says how long the caller must wait for it, which lets the work queue turn it into a delay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up. Thread-safe.

    A ``qps`` of 0 or less disables the limit.
    """

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if burst < 1:
            raise ValueError(f"token bucket burst must be at least 1, got {burst}")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take one token; returns the seconds until it may be used (0 if now)."""
        if self._qps <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def wait(self) -> None:
        """Take one token, sleeping until it is available."""
        delay = self.reserve()
        if delay > 0:
            time.sleep(delay)
