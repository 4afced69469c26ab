"""Scrape-time families that are recomputed when their source changed, not on every scrape.

A collector that counts a whole cache (every claim, every slice) costs the process CPU on each
scrape, so whoever can scrape often enough starves the work the process is there for.
:class:`CachedCollector` keeps the families it computed last and serves them again until
``changed()`` was called *and* ``min_interval`` seconds passed since they were computed: a
scrape with nothing changed costs no recount, and a burst of changes costs at most one recount
per ``min_interval``. The first scrape always computes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from drakit.telemetry.metrics import Collector, Family

__all__ = ["CachedCollector"]


class CachedCollector:
    """Serves ``source``'s families, recomputed at most once per change and per
    ``min_interval`` seconds. Thread-safe: concurrent scrapes compute once."""

    def __init__(
        self,
        source: Collector,
        *,
        min_interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_interval < 0:
            raise ValueError(f"min_interval must not be negative, got {min_interval}")
        self._source = source
        self._min_interval = min_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._families: list[Family] | None = None
        self._computed_at = 0.0
        self._changed = False

    def changed(self) -> None:
        """The source's data changed: the next scrape after ``min_interval`` recomputes."""
        self._changed = True  # a plain store: informer handlers call this on every event

    def collect(self) -> Iterable[Family]:
        with self._lock:
            if self._families is None or (
                self._changed and self._clock() - self._computed_at >= self._min_interval
            ):
                # Cleared before computing: a change during the computation is seen next time.
                self._changed = False
                self._families = list(self._source.collect())
                self._computed_at = self._clock()
            return list(self._families)
