"""A clock that moves only when a test says so (for code that takes ``clock=``)."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Callable like :func:`time.monotonic`; ``advance`` moves it forward."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
