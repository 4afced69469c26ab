"""Unary methods served straight from a completion queue, without hand-offs.

grpcio's synchronous server routes every call through one poller thread: it
hands the new call to a pool thread, which asks for the request message and
sleeps until the poller wakes it with the message. Each hand-off is a thread
wake-up, and on a small node they cost a unary call about 0.15 ms of its
latency: more than grpc-go spends on the whole call.

:class:`DirectUnary` serves chosen unary-unary methods of a :class:`grpc.Server`
from a completion queue of their own, polled by a small set of threads. The
thread that receives a request message runs the handler itself and sends the
answer: no hand-off between receiving and answering. Pollers are added while
every poller is busy (up to ``max_threads``, the concurrency bound), so an
idle plugin keeps two threads and a handler blocked on the API server never
stops the others from receiving.

Everything else on the server (streams, reflection, gRPC health, methods not
given here) stays with grpcio's own machinery on the same socket: the C core
routes a registered method's calls to the queue that asked for them.

This reaches one private attribute of grpcio (the core server behind a
``grpc.Server``) and its ``cygrpc`` layer, which grpcio's own server is built
on. :meth:`DirectUnary.attach` returns None when they are not there (a grpcio
whose internals changed); callers then register the methods with grpcio as
usual, and lose only the latency.

Semantics kept from grpcio's server, which the handlers rely on:

* the context has ``is_active``, ``time_remaining``, ``add_callback``,
  ``abort`` and ``peer`` with grpcio's meaning; ``add_callback`` callbacks run
  once the call has ended (answer sent, or cancelled);
* ``abort(code, details)`` ends the call with that status; any other
  exception ends it with UNKNOWN and is logged, the server keeps serving;
* a request that cannot be decoded ends with INTERNAL, a call without a
  request message with UNIMPLEMENTED; a call cancelled before its handler
  starts is not handled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from grpc._cython import cygrpc  # type: ignore[attr-defined]  # grpcio's core layer

from telemetry.logs import get_logger

_log = get_logger(__name__)

# Pollers kept when nothing runs: one receives while the other starts a handler.
_IDLE_POLLERS = 2
_NO_FLAGS = 0


@dataclass(frozen=True)
class _Method:
    """One unary-unary method: the fully qualified path and grpcio's handler for it."""

    path: str
    handler: Callable[[Any, Any], Any]
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]


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
    """One call's servicer context: the part of grpc.ServicerContext handlers use.

    Thread-safe: the handler runs in one poller thread while the call's end may be
    observed by another.
    """

    def __init__(self, event: Any, method: _Method) -> None:
        self._call = event.call
        self._deadline: float = event.call_details.deadline
        self._method = method
        self._lock = threading.Lock()
        self._cancelled = False
        self._closed = False  # the client's half-close or cancellation was received
        self._answered = False  # the status batch completed
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

    def begin(self) -> None:
        """Ask for the client's close and the request message (both arrive as events)."""
        self._call.start_server_batch(
            (cygrpc.ReceiveCloseOnServerOperation(_NO_FLAGS),), self._on_close
        )
        self._call.start_server_batch(
            (cygrpc.ReceiveMessageOperation(_NO_FLAGS),), self._on_message
        )

    def _on_close(self, event: Any) -> None:
        with self._lock:
            self._closed = True
            self._cancelled = bool(event.batch_operations[0].cancelled())
            end = self._answered
        if end:
            self._end()

    def _on_message(self, event: Any) -> None:
        """Runs the handler in this (poller) thread and sends its answer."""
        data = event.batch_operations[0].message()
        if data is None:
            details = f'"{self._method.path}" requires exactly one request message.'
            self._answer(grpc.StatusCode.UNIMPLEMENTED, details)
            return
        try:
            request = self._method.decode(data)
        except Exception:  # any decode failure is the client's bad message
            self._answer(grpc.StatusCode.INTERNAL, "Exception deserializing request!")
            return
        if not self.is_active():
            return  # cancelled before it started: nobody waits for an answer
        self._answer(*self._run(request))

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
        operations: list[Any] = [cygrpc.SendInitialMetadataOperation(None, _NO_FLAGS)]
        if payload is not None:
            operations.append(cygrpc.SendMessageOperation(payload, _NO_FLAGS))
        operations.append(
            cygrpc.SendStatusFromServerOperation(
                None, _wire_code(code), details.encode("utf-8", "replace"), _NO_FLAGS
            )
        )
        self._call.start_server_batch(tuple(operations), self._on_answered)

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


class _ServiceRecorder:
    """Stands in for a grpc.Server to capture what a generated ``add_*_to_server`` adds."""

    def __init__(self) -> None:
        self.services: list[tuple[str, Mapping[str, grpc.RpcMethodHandler[Any, Any]]]] = []

    def add_generic_rpc_handlers(self, _handlers: Iterable[object]) -> None:
        """The generated code adds both; the registered form carries the same handlers."""

    def add_registered_method_handlers(
        self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        self.services.append((service, handlers))


class DirectUnary:
    """The unary-unary methods of some services of one grpc.Server, served directly.

    Use: :meth:`attach` and :meth:`add_servicer` before the server starts, :meth:`start`
    after it started, :meth:`stop` after it stopped.
    """

    def __init__(self, core_server: Any, max_threads: int) -> None:
        self._server = core_server
        self._queue = cygrpc.CompletionQueue()
        core_server.register_completion_queue(self._queue)
        self._max_threads = max(max_threads, _IDLE_POLLERS)
        self._methods: dict[str, _Method] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._polling = 0
        self._serving = False

    @classmethod
    def attach(cls, server: grpc.Server, max_threads: int) -> DirectUnary | None:
        """A DirectUnary for ``server`` (not started yet), or None when this grpcio's
        server internals are not the ones it was written for."""
        core_server = getattr(server, "_cy_server", None)
        needed = ("register_completion_queue", "register_method", "request_registered_call")
        if core_server is None or not all(hasattr(core_server, name) for name in needed):
            return None
        return cls(core_server, max_threads)

    def add_servicer(self, add_to_server: Callable[[Any, Any], None], servicer: object) -> None:
        """Serve ``servicer``'s unary-unary methods; ``add_to_server`` is the generated
        ``add_<Service>Servicer_to_server``. Streaming methods are refused (ValueError):
        give those to grpcio."""
        recorder = _ServiceRecorder()
        add_to_server(servicer, recorder)
        for service, handlers in recorder.services:
            for name, handler in handlers.items():
                self._add(f"/{service}/{name}", handler)

    def _add(self, path: str, handler: grpc.RpcMethodHandler[Any, Any]) -> None:
        if handler.request_streaming or handler.response_streaming or not handler.unary_unary:
            raise ValueError(f"{path}: only unary-unary methods can be served directly")
        if handler.request_deserializer is None or handler.response_serializer is None:
            raise ValueError(f"{path}: needs a request decoder and a response encoder")
        self._server.register_method(path)
        self._methods[path] = _Method(
            path, handler.unary_unary, handler.request_deserializer, handler.response_serializer
        )

    def start(self) -> None:
        """Ask for each method's first call and start the pollers (after the server started)."""
        with self._lock:
            self._serving = True
        for method in self._methods.values():
            self._request(method)
        for _ in range(_IDLE_POLLERS):
            self._spawn()

    def stop(self) -> None:
        """End the pollers; call after the server stopped (its calls have all ended)."""
        with self._lock:
            self._serving = False
            threads = list(self._threads)
        self._queue.shutdown()
        for thread in threads:
            thread.join()

    @property
    def thread_count(self) -> int:
        with self._lock:
            return len(self._threads)

    def _request(self, method: _Method) -> None:
        self._server.request_registered_call(self._queue, self._queue, method.path, method)

    def _spawn(self) -> None:
        with self._lock:
            name = f"grpc-direct-{len(self._threads)}"
            thread = threading.Thread(target=self._poll, name=name, daemon=True)
            self._threads.append(thread)
            self._polling += 1
        thread.start()

    def _poll(self) -> None:
        while True:
            event = self._queue.poll()
            with self._lock:
                self._polling -= 1
                grow = self._serving and self._polling == 0
                grow = grow and len(self._threads) < self._max_threads
            if event.completion_type == cygrpc.CompletionType.queue_shutdown:
                return
            if grow:
                self._spawn()
            if event.completion_type != cygrpc.CompletionType.queue_timeout:
                self._dispatch(event)
            with self._lock:
                self._polling += 1

    def _dispatch(self, event: Any) -> None:
        tag = event.tag
        if isinstance(tag, _Method):
            if not event.success:
                return  # the server is shutting down: no further calls
            self._request(tag)  # first: the next call must find a request waiting
            DirectContext(event, tag).begin()
        else:
            tag(event)
