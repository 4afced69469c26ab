"""A log line for every call still running after a while, naming what it works on.

The servicer logs one line per call, after the reply ("Call finished": method,
claims, duration). A call that hangs would then say nothing until it ends, so
:class:`SlowCalls` watches the calls in flight: one still running
:data:`SLOW_AFTER_SECONDS` after it started gets a warning ("Call still running")
with its request id, method and claims, once. The kubelet gives up on a call after
45 s; the line comes well before that, while the call can still be inspected.

Registering and ending a call costs a dict insert and delete under a lock; the
watching thread starts with the first call and wakes once a second while calls are
in flight, and not at all while none are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drakit.telemetry.logs import StructuredLogger

SLOW_AFTER_SECONDS = 10.0
_CHECK_EVERY_SECONDS = 1.0


@dataclass
class _Call:
    started: float
    log: StructuredLogger
    fields: Mapping[str, Any] = field(default_factory=dict)


class SlowCalls:
    """Calls in flight by request id; thread-safe. ``close`` ends the watching thread."""

    def __init__(
        self,
        slow_after: float = SLOW_AFTER_SECONDS,
        *,
        check_every: float = _CHECK_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slow_after = slow_after
        self._check_every = check_every
        self._clock = clock
        self._calls: dict[str, _Call] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._idle = False  # the watcher sleeps until a call starts
        self._closed = False

    def started(self, request_id: str, log: StructuredLogger, **fields: Any) -> None:
        """Watch a call; ``fields`` go on its "still running" line."""
        with self._lock:
            self._calls[request_id] = _Call(self._clock(), log, fields)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._watch, name="slow-calls", daemon=True)
                self._thread.start()
            elif self._idle:
                # Only an idle watcher is woken: one that is already counting the second
                # sees this call then, and the call does not pay for a thread switch.
                self._idle = False
                self._wake.notify()

    def finished(self, request_id: str) -> None:
        """Stop watching a call; idempotent."""
        with self._lock:
            self._calls.pop(request_id, None)

    def report_slow(self) -> int:
        """Log every watched call past ``slow_after``, each once; returns how many."""
        now = self._clock()
        with self._lock:
            slow = [
                (request_id, call)
                for request_id, call in self._calls.items()
                if now - call.started >= self.slow_after
            ]
            for request_id, _ in slow:
                del self._calls[request_id]  # reported: its closing line says the rest
        for _, call in slow:
            call.log.warning(
                "Call still running",
                running_seconds=round(now - call.started, 1),
                **call.fields,
            )
        return len(slow)

    def close(self) -> None:
        """End the watching thread; idempotent."""
        with self._lock:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _watch(self) -> None:
        while True:
            with self._lock:
                while not self._calls and not self._closed:
                    self._idle = True
                    self._wake.wait()  # nothing in flight: sleep until a call starts
                if self._closed:
                    return
                self._wake.wait(self._check_every)
            self.report_slow()
