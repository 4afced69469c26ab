"""One directly served unary call: its servicer context and its life on the completion queue.

:class:`DirectContext` is what a handler gets as ``context`` (the part of
grpc.ServicerContext the DRA servicers use, with grpcio's meaning) and what
drives the call through grpcio's core: ask for the client's close and the
request, run the handler, send the answer.

Contract of a call's end, whatever happens:

* a call whose deadline passed before its handler started is answered
  DEADLINE_EXCEEDED without running the handler; a call cancelled before its
  handler started is not handled;
* ``abort(code, details)`` ends the call with that status; any other handler
  exception ends it with UNKNOWN and is logged;
* a request that cannot be decoded ends with INTERNAL, a call without a
  request message with UNIMPLEMENTED;
* when the core refuses a batch of the call (or raises), the call ends with
  UNAVAILABLE (sent as a status, else by cancelling the call with it), so the
  client retries instead of waiting for its deadline;
* ``add_callback`` callbacks run once the call has ended, exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import grpc

from drakit.node_plugin.service.direct_support import cygrpc
from drakit.telemetry.logs import get_logger

_log = get_logger(__name__)

_NO_FLAGS = 0


@dataclass(frozen=True)
class Method:
    """One unary-unary method: the fully qualified path and grpcio's handler for it."""

    path: str
    handler: Callable[[Any, Any], Any]
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]


class Batches(Protocol):
    """Starts a call's batches on the direct path's completion queue."""

    def start_batch(self, call: Any, operations: Sequence[Any], tag: Callable[[Any], Any]) -> bool:
        """True when the core took the batch (``tag`` then gets its completion event);
        False when it refused it or the queue is closed (``tag`` never runs)."""
        ...


@dataclass(frozen=True)
class Ready:
    """A call whose request arrived and decoded: :meth:`DirectContext.handle` runs it."""

    context: DirectContext
    request: Any

    def run(self) -> None:
        self.context.handle(self.request)


class _AbortedError(Exception):
    """Raised by :meth:`DirectContext.abort`; ends the call with ``code`` and ``details``."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _wire_code(code: grpc.StatusCode) -> int:
    number: int = code.value[0]
    return number


class DirectContext:
    """One call's servicer context and life; thread-safe (the handler runs in one thread
    while the call's end may be observed by another)."""

    def __init__(self, event: Any, method: Method, batches: Batches) -> None:
        self._call = event.call
        self._deadline: float = event.call_details.deadline
        self._method = method
        self._batches = batches
        self._lock = threading.Lock()
        self._cancelled = False
        self._closed = False  # the client's half-close or cancellation was received
        self._answering = False  # an answer was started: the call gets no other
        self._answered = False  # the status batch completed (or the call was given up)
        self._ended = False
        self._callbacks: list[Callable[[], None]] = []

    # --- grpc.ServicerContext subset -------------------------------------------------

    def is_active(self) -> bool:
        """False once the call was cancelled (by the client or its deadline) or answered."""
        with self._lock:
            return not (self._cancelled or self._ended)

    def time_remaining(self) -> float:
        """Seconds until the call's deadline (never negative)."""
        return max(self._deadline - time.time(), 0.0)

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Run ``callback`` once the call has ended; False (not registered) if it has."""
        with self._lock:
            if self._ended:
                return False
            self._callbacks.append(callback)
            return True

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        """End the call with ``code`` (not OK) and ``details``; never returns."""
        if code is grpc.StatusCode.OK:
            raise ValueError("abort() needs a status other than OK")
        raise _AbortedError(code, details)

    def peer(self) -> str:
        peer: bytes = self._call.peer()
        return peer.decode("utf-8", "replace")

    # --- the call's life on the completion queue -------------------------------------

    @property
    def path(self) -> str:
        return self._method.path

    def expired(self) -> bool:
        """True once the call's deadline has passed (whether or not the core said so yet)."""
        return self._deadline <= time.time()

    def begin(self) -> None:
        """Ask for the client's close and the request message (both arrive as events)."""
        close = (cygrpc.ReceiveCloseOnServerOperation(_NO_FLAGS),)
        if not self._batches.start_batch(self._call, close, self._on_close):
            self.fail("the server could not follow the call")
            return
        message = (cygrpc.ReceiveMessageOperation(_NO_FLAGS),)
        if not self._batches.start_batch(self._call, message, self._on_message):
            self.fail("the server could not receive the request")

    def handle(self, request: Any) -> None:
        """Run the handler on ``request`` and answer, unless the call is over already."""
        if self.expired():
            self._answer(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            return
        if not self.is_active():
            return  # cancelled before it started: nobody waits for an answer
        self._answer(*self._run(request))

    def fail(self, details: str) -> None:
        """End the call with UNAVAILABLE: the server, not the request, is at fault."""
        self._answer(grpc.StatusCode.UNAVAILABLE, details)

    def _on_close(self, event: Any) -> None:
        with self._lock:
            self._closed = True
            self._cancelled = bool(event.batch_operations[0].cancelled())
            end = self._answered
        if end:
            self._end()

    def _on_message(self, event: Any) -> Ready | None:
        """The call, ready for its handler; None when it was answered here already."""
        data = event.batch_operations[0].message()
        if data is None:
            details = f'"{self._method.path}" requires exactly one request message.'
            self._answer(grpc.StatusCode.UNIMPLEMENTED, details)
            return None
        try:
            request = self._method.decode(data)
        except Exception:  # any decode failure is the client's bad message
            self._answer(grpc.StatusCode.INTERNAL, "Exception deserializing request!")
            return None
        return Ready(self, request)

    def _run(self, request: Any) -> tuple[grpc.StatusCode, str, bytes | None]:
        try:
            response = self._method.handler(request, self)
        except _AbortedError as aborted:
            return aborted.code, aborted.details, None
        except Exception as exc:  # one bad call must not stop the server
            _log.exception("Unary handler failed", method=self._method.path)
            return grpc.StatusCode.UNKNOWN, f"Exception calling application: {exc}", None
        try:
            return grpc.StatusCode.OK, "", self._method.encode(response)
        except Exception:
            _log.exception("Cannot serialize the response", method=self._method.path)
            return grpc.StatusCode.INTERNAL, "Failed to serialize response!", None

    def _answer(self, code: grpc.StatusCode, details: str, payload: bytes | None = None) -> None:
        """Send ``code``; if the core will not take the batch, cancel the call with
        UNAVAILABLE instead (the client must not wait for its deadline) and end it here."""
        with self._lock:
            if self._answering:
                return
            self._answering = True
        encoded = details.encode("utf-8", "replace")
        operations: list[Any] = [cygrpc.SendInitialMetadataOperation(None, _NO_FLAGS)]
        if payload is not None:
            operations.append(cygrpc.SendMessageOperation(payload, _NO_FLAGS))
        operations.append(
            cygrpc.SendStatusFromServerOperation(None, _wire_code(code), encoded, _NO_FLAGS)
        )
        if self._batches.start_batch(self._call, operations, self._on_answered):
            return
        _log.warning("Cannot answer a call; cancelling it", method=self._method.path)
        self.give_up(f"the server could not answer ({code.name}: {details})")

    def give_up(self, details: str) -> None:
        """Cancel the call with UNAVAILABLE and end it now: no batch of it will complete
        any more (the core refused one, or the queue is closing)."""
        with self._lock:
            self._answering = self._answered = True
        try:
            self._call.cancel(_wire_code(grpc.StatusCode.UNAVAILABLE), details)
        except Exception:  # the call is beyond reach; its end below still runs
            _log.exception("Cannot cancel a call", method=self._method.path)
        self._end()

    def _on_answered(self, _event: Any) -> None:
        with self._lock:
            self._answered = True
            end = self._closed
        if end:
            self._end()

    def _end(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a callback's failure must not stop the poller
                _log.exception("Call-end callback failed", method=self._method.path)
