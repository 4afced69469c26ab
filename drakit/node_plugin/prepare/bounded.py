"""Backend unprepares with a bounded wait: a stuck backend cannot hold the node.

The backend's ``unprepare`` is the driver's code (a device reset, a kernel module call) and
may hang. It runs under the serialize lock, so a hung unprepare used to hold every other
prepare and unprepare of the driver on the node, and a node drain with it.

Here each claim's backend unprepare runs on a thread of its own, and its call waits for it
at most ``timeout`` seconds (``--unprepare-timeout``), all the claims of one call together.
When the wait ends first, the claim's answer is an error naming the timeout, it stays
prepared in the checkpoint, and the backend call goes on in the background. The kubelet
retries the unprepare; the next call waits for that same backend call (the backend is never
given one claim twice at a time) and, once it has finished, completes the unprepare with its
outcome. A claim whose backend call is still running is waited for after the call's other
claims, so one stuck claim cannot starve the others of its call.

While a backend unprepare outlives its wait, the backend may be called for other claims at
the same time: that is the price of serving them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from drakit.node_plugin.driver import DEFAULT_UNPREPARE_TIMEOUT_SECONDS

__all__ = ["UnprepareAttempts"]


@dataclass
class _Attempt:
    """One backend unprepare of one claim, on its own thread."""

    started: float  # time.monotonic()
    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""


class UnprepareAttempts:
    """The backend unprepares of claims, by claim UID; thread-safe."""

    def __init__(self, timeout: float = DEFAULT_UNPREPARE_TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._attempts: dict[str, _Attempt] = {}

    def run(self, uid: str, work: Callable[[], str], wait: float) -> str | None:
        """The outcome of claim ``uid``'s backend unprepare: "" done, its error text, or None
        when it is still running after ``wait`` seconds (it goes on; a later call collects it).

        ``work`` is the backend call (returns "" or the error, never raises); it is started
        only when no earlier attempt of the claim is running or finished well uncollected.
        """
        with self._lock:
            attempt = self._attempts.get(uid)
            if attempt is None or (attempt.done.is_set() and attempt.error):
                # A failed attempt nobody collected is tried again (its error was logged).
                attempt = self._start(uid, work)
        if not attempt.done.wait(max(0.0, wait)):
            return None
        with self._lock:
            if self._attempts.get(uid) is attempt:
                del self._attempts[uid]
        return attempt.error

    def running(self, uid: str) -> bool:
        """True while a backend unprepare of ``uid`` is running."""
        with self._lock:
            attempt = self._attempts.get(uid)
            return attempt is not None and not attempt.done.is_set()

    def pending(self, uid: str) -> bool:
        """True while ``uid`` has a backend unprepare running, or finished and not yet
        collected by an unprepare call: the claim is on its way out."""
        with self._lock:
            return uid in self._attempts

    def drop_finished(self, uid: str) -> None:
        """Forget a finished attempt of ``uid`` nobody will collect (the claim's entry is gone:
        the other plugin instance of a rolling update unprepared it); a running one stays."""
        with self._lock:
            attempt = self._attempts.get(uid)
            if attempt is not None and attempt.done.is_set():
                del self._attempts[uid]

    def running_for(self, uid: str) -> float:
        """Seconds the backend unprepare of ``uid`` has run (0: none)."""
        with self._lock:
            attempt = self._attempts.get(uid)
        return time.monotonic() - attempt.started if attempt is not None else 0.0

    def _start(self, uid: str, work: Callable[[], str]) -> _Attempt:
        """A new attempt of ``uid`` on its own daemon thread (``_lock`` held)."""
        attempt = _Attempt(started=time.monotonic())

        def body() -> None:
            try:
                attempt.error = work()
            finally:
                attempt.done.set()

        self._attempts[uid] = attempt
        threading.Thread(target=body, name=f"unprepare-{uid[:8]}", daemon=True).start()
        return attempt
