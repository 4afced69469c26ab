"""An HTTP server whose cost a client cannot drive up: fixed threads, bounded connections,
time limits on every connection. The metrics endpoints serve ``/metrics`` with it.

prometheus_client's own server spends a thread per connection and waits on each without a
timeout, so anyone who can reach the port can exhaust the process with idle connections.
Here:

- one *listener* thread accepts connections and holds them in a selector until their first
  bytes arrive: an idle connection costs a socket, never a thread;
- at most ``max_connections`` connections exist at once. A new one past the bound closes the
  oldest connection that has sent nothing yet (a scraper sends its request at once, so idle
  connections cannot crowd it out); if every connection is busy, the new one is closed;
- a connection that sends nothing for ``read_timeout`` seconds is closed;
- ``workers`` threads (a fixed number) serve the connections that sent something, one
  request each (HTTP/1.0: no keep-alive), with ``read_timeout`` on every read; a connection
  still open ``deadline`` seconds after it was accepted is shut down, so a client that
  trickles its request or reads the answer slowly holds a worker only that long.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from socketserver import BaseRequestHandler
from typing import Any

__all__ = ["BoundedHTTPServer", "Limits"]

#: A socketserver-style handler class: ``handler(connection, client_address, server)``
#: serves one connection when constructed.
HandlerClass = Callable[[socket.socket, Any, Any], BaseRequestHandler]

logger = logging.getLogger(__name__)

_TICK = 0.5  # longest wait of the listener between checks of its time limits


class Limits:
    """How much one server may spend: threads, connections and seconds per connection."""

    def __init__(
        self,
        *,
        workers: int = 2,
        max_connections: int = 64,
        read_timeout: float = 5.0,
        deadline: float = 30.0,
    ) -> None:
        if workers < 1 or max_connections < 1:
            raise ValueError("workers and max_connections must be at least 1")
        if read_timeout <= 0 or deadline <= 0:
            raise ValueError("read_timeout and deadline must be positive")
        self.workers = workers
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.deadline = deadline


class BoundedHTTPServer:
    """Serves ``handler_class`` on ``host:port`` within ``limits``; ``close`` stops it.

    Raises OSError from the constructor when the address cannot be bound. ``server_name``
    and ``server_port`` are the address it listens on.
    """

    def __init__(
        self, host: str, port: int, handler_class: HandlerClass, limits: Limits | None = None
    ) -> None:
        self.limits = limits or Limits()
        self._handler_class = handler_class
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listening = socket.create_server((host, port), family=family, backlog=128)
        self._listening.setblocking(False)
        bound = self._listening.getsockname()
        self.server_name, self.server_port = str(bound[0]), int(bound[1])
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listening, selectors.EVENT_READ)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        self._idle: OrderedDict[socket.socket, float] = OrderedDict()  # accepted, nothing sent
        self._busy: dict[socket.socket, float] = {}  # handed to the workers: accepted at
        self._lock = threading.Lock()  # guards _busy (workers remove their connection)
        self._ready: queue.Queue[socket.socket | None] = queue.Queue()
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._listen, name="metrics-http", daemon=True)]
        self._threads += [
            threading.Thread(target=self._work, name=f"metrics-http-{i}", daemon=True)
            for i in range(self.limits.workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def connections(self) -> int:
        """Connections open now (idle and busy)."""
        with self._lock:
            return len(self._idle) + len(self._busy)

    def close(self) -> None:
        """Stop accepting, close every connection and join the threads. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")
        listener, *workers = self._threads
        listener.join(timeout=5)  # first: it hands over no connection after this
        with self._lock:
            for conn in self._busy:
                _shut(conn)  # a worker serving a slow client returns at once
        for _ in workers:
            self._ready.put(None)
        for thread in workers:
            thread.join(timeout=5)
        for sock in (self._listening, self._wake_reader, self._wake_writer):
            sock.close()
        self._selector.close()

    # -- listener ------------------------------------------------------------------------------

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                self._listen_once()
            except Exception:
                # The listener is the only way in: it must survive anything one round throws.
                logger.exception("Metrics listener round failed")
        for conn in list(self._idle):
            self._drop_idle(conn)

    def _listen_once(self) -> None:
        for key, _ in self._selector.select(self._next_wait()):
            if key.fileobj is self._listening:
                self._accept()
            elif key.fileobj is not self._wake_reader:
                self._hand_over(key.fileobj)  # type: ignore[arg-type]
        self._enforce_time_limits()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. out of file descriptors: the next select tries again
            if not self._make_room():
                conn.close()
                continue
            conn.setblocking(False)
            with self._lock:
                self._idle[conn] = time.monotonic()
            self._selector.register(conn, selectors.EVENT_READ)

    def _make_room(self) -> bool:
        """True when one more connection fits, after closing the oldest idle one if needed."""
        with self._lock:
            if len(self._idle) + len(self._busy) < self.limits.max_connections:
                return True
            oldest = next(iter(self._idle), None)
        if oldest is None:
            return False  # every connection is being served: refuse the new one
        self._drop_idle(oldest)
        return True

    def _hand_over(self, conn: socket.socket) -> None:
        with self._lock:
            accepted = self._idle.pop(conn, None)
            if accepted is None:
                return  # closed earlier in this round to make room
            self._busy[conn] = accepted
        self._selector.unregister(conn)
        self._ready.put(conn)

    def _drop_idle(self, conn: socket.socket) -> None:
        with self._lock:
            if self._idle.pop(conn, None) is None:
                return
        self._selector.unregister(conn)
        conn.close()

    def _enforce_time_limits(self) -> None:
        now = time.monotonic()
        with self._lock:
            silent = [c for c, at in self._idle.items() if now - at >= self.limits.read_timeout]
            overdue = [c for c, at in self._busy.items() if now - at >= self.limits.deadline]
        for conn in silent:
            self._drop_idle(conn)
        for conn in overdue:
            _shut(conn)  # its worker's read or write fails, and the worker closes it

    def _next_wait(self) -> float:
        """Seconds until the next time limit falls due (at most ``_TICK``)."""
        with self._lock:
            oldest_idle = next(iter(self._idle.values()), None)
        if oldest_idle is None:
            return _TICK
        due = oldest_idle + self.limits.read_timeout - time.monotonic()
        return max(0.0, min(_TICK, due))

    # -- workers -------------------------------------------------------------------------------

    def _work(self) -> None:
        while (conn := self._ready.get()) is not None:
            try:
                conn.setblocking(True)
                conn.settimeout(self.limits.read_timeout)
                self._handler_class(conn, conn.getpeername(), self)
            except OSError:
                pass  # the client went away, timed out or was shut down: nothing to answer
            except Exception:
                # A failing handler must not cost the server one of its few workers.
                logger.exception("Metrics request failed")
            finally:
                with self._lock:
                    self._busy.pop(conn, None)
                _shut(conn)
                conn.close()


def _shut(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
