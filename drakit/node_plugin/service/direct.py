"""Unary methods served straight from a completion queue, without hand-offs.

grpcio's synchronous server routes every call through one poller thread: it
hands the new call to a pool thread, which asks for the request message and
sleeps until the poller wakes it with the message. Each hand-off is a thread
wake-up, and on a small node they cost a unary call about 0.15 ms of its
latency: more than grpc-go spends on the whole call.

:class:`DirectUnary` serves chosen unary-unary methods of a :class:`grpc.Server`
from a completion queue of their own, polled by a small set of threads. The
thread that receives a request message runs the handler itself and sends the
answer: no hand-off between receiving and answering.

Bounds, and why nothing can hang behind a handler:

* at most ``max_threads`` handlers run at once. A request that arrives while
  all of them are busy waits in a backlog, which the next thread to finish a
  handler takes up (first come, first served);
* a thread about to run a handler first makes sure another thread is polling
  (starting one if needed), so at most ``max_threads + 1`` threads exist and
  one of them always drains the queue: cancellations and deadlines reach
  ``is_active`` even while every handler is blocked, and a backlogged call
  whose deadline passed is answered DEADLINE_EXCEEDED without running;
* an error of grpcio's core on one call (a refused batch, an exception) ends
  that call with UNAVAILABLE and leaves the thread serving;
* :meth:`DirectUnary.stop` returns within its timeout even when a handler
  never returns; that handler's late answer is dropped, not sent to a closed
  queue (which would abort the process).

Everything else on the server (streams, reflection, gRPC health, methods not
given here) stays with grpcio's own machinery on the same socket: the C core
routes a registered method's calls to the queue that asked for them.

This reaches one private attribute of grpcio (the core server behind a
``grpc.Server``) and its ``cygrpc`` layer. :meth:`DirectUnary.attach` returns
None (and logs why) on a grpcio outside the tested versions
(:mod:`drakit.node_plugin.service.direct_support`), when those internals are missing,
or when ``DRAKIT_GRPC_DIRECT=0``; callers then register the methods with
grpcio as usual and lose only the latency. The call-level semantics the
handlers rely on are those of :mod:`drakit.node_plugin.service.direct_call`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc

from drakit.node_plugin.service.direct_call import DirectContext, Method, Ready
from drakit.node_plugin.service.direct_support import (
    DIRECT_ENV,
    cygrpc,
    direct_disabled,
    untested_reason,
)
from drakit.telemetry.logs import get_logger

_log = get_logger(__name__)

# Pollers kept when nothing runs: one receives while the other starts a handler.
_IDLE_POLLERS = 2
_GRPC_CALL_OK = 0
# How long stop() waits for running handlers and pollers by default.
DEFAULT_STOP_SECONDS = 5.0


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
        self._max_handlers = max(max_threads, 1)
        self._methods: dict[str, Method] = {}
        self._lock = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._thread_numbers = itertools.count()
        self._polling = 0
        self._running = 0  # handlers running now
        self._backlog: deque[Ready] = deque()
        self._serving = False
        # Taken around every batch and call request: once the queue is closed, nothing may
        # be started on it (the core aborts the process when that happens).
        self._queue_lock = threading.Lock()
        self._queue_closed = False

    @classmethod
    def attach(cls, server: grpc.Server, max_threads: int) -> DirectUnary | None:
        """A DirectUnary for ``server`` (not started yet), or None (logged once, as a
        warning unless ``DRAKIT_GRPC_DIRECT`` asked for it) when grpcio must serve."""
        if direct_disabled():
            _log.info(f"{DIRECT_ENV}=0: DRAPlugin calls go through grpcio's pool")
            return None
        reason = untested_reason()
        core_server = getattr(server, "_cy_server", None)
        needed = ("register_completion_queue", "register_method", "request_registered_call")
        if reason is None and not all(hasattr(core_server, name) for name in needed):
            reason = "grpc.Server has no core server with the methods the direct path uses"
        if reason is not None:
            _log.warning("DRAPlugin calls go through grpcio's pool", reason=reason)
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
        self._methods[path] = Method(
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

    def stop(self, timeout: float = DEFAULT_STOP_SECONDS) -> bool:
        """End the pollers; call after the server stopped (its calls were cancelled).

        Waits up to ``timeout`` seconds in all for running handlers and then the
        pollers; True when every thread ended. A handler still running after that
        keeps its thread (a daemon) and its answer is dropped."""
        end = time.monotonic() + timeout
        with self._lock:
            self._serving = False
            while self._running and self._lock.wait(max(0.0, end - time.monotonic())):
                pass
            waiting, threads = list(self._backlog), list(self._threads)
            self._backlog.clear()
        for ready in waiting:
            ready.context.fail("the server is stopping")
        with self._queue_lock:
            if self._queue_closed:
                return True
            self._queue_closed = True
        self._queue.shutdown()
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        alive = [thread.name for thread in threads if thread.is_alive()]
        if alive:
            _log.warning("Direct gRPC threads still in a handler after stop", threads=alive)
        return not alive

    @property
    def thread_count(self) -> int:
        with self._lock:
            return len(self._threads)

    # --- starting work on the queue (never after it closed) ---------------------------

    def start_batch(self, call: Any, operations: Sequence[Any], tag: Callable[[Any], Any]) -> bool:
        """:class:`~drakit.node_plugin.service.direct_call.Batches`: start a call's batch."""
        with self._queue_lock:
            if self._queue_closed:
                return False
            code = call.start_server_batch(tuple(operations), tag)
        if code != _GRPC_CALL_OK:
            _log.warning("grpc core refused a batch", grpc_call_error=code)
            return False
        return True

    def _request(self, method: Method) -> None:
        """Ask the core for the next call of ``method`` (before serving the current one)."""
        with self._queue_lock:
            if self._queue_closed:
                return
            code = self._server.request_registered_call(
                self._queue, self._queue, method.path, method
            )
        if code not in (None, _GRPC_CALL_OK):
            raise RuntimeError(f"grpc core refused to wait for {method.path}: error {code}")

    # --- threads -----------------------------------------------------------------------

    def _spawn(self) -> None:
        with self._lock:
            name = f"grpc-direct-{next(self._thread_numbers)}"
            thread = threading.Thread(target=self._poll, name=name, daemon=True)
            self._threads.append(thread)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the others keep serving
            _log.exception("Cannot start a direct gRPC thread")
            with self._lock:
                self._threads.remove(thread)

    def _poll(self) -> None:
        try:
            while self._poll_once():
                pass
        except Exception:  # the queue itself is broken (events are guarded one by one)
            _log.exception("Direct gRPC poller failed")
        finally:  # a thread that is gone must not count against the bound
            with self._lock:
                self._threads.remove(threading.current_thread())

    def _poll_once(self) -> bool:
        """Wait for one event and act on it; False once the queue has shut down."""
        with self._lock:
            self._polling += 1
        try:
            event = self._queue.poll()
        finally:
            with self._lock:
                self._polling -= 1
        if event.completion_type == cygrpc.CompletionType.queue_shutdown:
            return False
        if event.completion_type == cygrpc.CompletionType.queue_timeout:
            return True
        try:
            ready = self._dispatch(event)
        except Exception:  # one call's trouble must not cost the server a thread
            _log.exception("Direct gRPC event failed")
            return True
        if ready is not None:
            self._handle(ready)
        return True

    def _dispatch(self, event: Any) -> Ready | None:
        """Act on ``event``; a call whose request arrived comes back for its handler."""
        tag = event.tag
        if isinstance(tag, Method):
            self._accept(event, tag)
            return None
        ready: Ready | None = tag(event)
        return ready

    def _accept(self, event: Any, method: Method) -> None:
        if not event.success:
            return  # the server is shutting down: no further calls
        context = DirectContext(event, method, self)
        try:
            self._request(method)  # first: the next call must find a request waiting
        except Exception:
            # Calls of this method now wait until their deadline; the liveness probe,
            # which calls prepare, sees that and restarts the plugin.
            _log.exception("Cannot wait for further calls", method=method.path)
        try:
            context.begin()
        except Exception:
            _log.exception("Cannot start receiving a call", method=method.path)
            context.give_up("the server could not receive the call")

    # --- handlers ------------------------------------------------------------------------

    def _handle(self, ready: Ready) -> None:
        """Run ``ready`` and then any backlog here, or backlog it when every slot is busy."""
        expired: list[Ready] = []
        spawn = False
        with self._lock:
            saturated = self._running >= self._max_handlers
            if saturated:
                expired = self._backlog_add(ready)
            else:
                self._running += 1
                # This thread is about to block in a handler: another must go on draining
                # the queue. At most max_handlers + 1 threads: one is never in a handler.
                spawn = self._serving and self._polling == 0
                spawn = spawn and len(self._threads) <= self._max_handlers
        for late in expired:
            late.run()  # answers DEADLINE_EXCEEDED, runs no handler
        if saturated:
            return
        if spawn:
            self._spawn()
        self._run_with_backlog(ready)

    def _run_with_backlog(self, ready: Ready) -> None:
        """Run ``ready``, then the backlog's calls until it is empty; frees the slot."""
        next_ready: Ready | None = ready
        while next_ready is not None:
            self._run(next_ready)
            with self._lock:
                next_ready = self._backlog.popleft() if self._backlog else None
                if next_ready is None:
                    self._running -= 1
                    self._lock.notify_all()

    def _backlog_add(self, ready: Ready) -> list[Ready]:
        """Queue ``ready`` (lock held); returns the queued calls whose deadline passed,
        taken out to be answered, and drops those cancelled."""
        expired = [r for r in self._backlog if r.context.expired()]
        kept = [r for r in self._backlog if r.context.is_active() and not r.context.expired()]
        self._backlog.clear()
        self._backlog.extend(kept)
        self._backlog.append(ready)
        return expired

    @staticmethod
    def _run(ready: Ready) -> None:
        try:
            ready.run()
        except Exception:  # the core failed this call's answer: the thread goes on
            _log.exception("Direct gRPC call failed", method=ready.context.path)
            ready.context.give_up("the server failed the call")
