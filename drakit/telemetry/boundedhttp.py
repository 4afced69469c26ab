"""An HTTP/1.1 server (optionally TLS) whose cost a client cannot drive up: bounded
connections, per client address and in total, one deadline per request, fixed threads that
never wait on a client, and bounded buffers. ``/metrics`` and ``drakit webhook`` serve with it.

A thread per connection that reads as the client sends (``http.server``, prometheus_client's
server) lets anyone who reaches the port hold every thread by sending slowly. Here:

- one *listener* thread does all the I/O, non-blocking: accepting, the TLS handshake, reading
  the request head and the whole body, and writing the answer. A client's bytes are read as
  they come (never ``read(n)`` waiting for n), so a slow client costs a socket and its
  buffer, never a thread;
- a new connection past ``max_per_address`` connections from its address (an IPv6 /64
  counts as one address), or past ``max_connections`` in all, first closes the oldest
  *idle* connection (nothing of a request received yet) of that address, or of any address;
  if there is none it is closed at once, before any TLS;
- one **deadline per request**: a request must arrive in full (TLS handshake, head and body)
  within ``deadline`` seconds of the connection's accept, or, on a kept-alive connection,
  of its first byte; and no silence longer than ``read_timeout``. Past either, the client
  gets 408 (or nothing, during the handshake) and the connection is closed. An answer not
  taken by the client within ``deadline`` seconds is dropped with its connection;
- heads of at most ``max_head`` bytes (else 431) and bodies with a Content-Length of at most
  ``max_body`` bytes (else 413; no chunked bodies: 411). Bodies over ``small_body`` bytes
  count against ``body_budget`` bytes from their head until their answer: a request that
  does not fit waits, unread, for its turn (first come, first served) within its deadline
  (then 503);
- ``workers`` threads run the handler for requests with small bodies, ``large_workers`` for
  the rest, smallest first: a small request never queues behind a large one, at most
  ``large_workers`` large bodies are being handled (decoded) at once, and each large worker
  rests after a request as long as needed to keep large ones to ``large_share`` of its
  time (decoding one holds the interpreter, so the listener too). A handler gets the
  request read in full (:class:`~drakit.telemetry.httpwire.Exchange`) and writes its answer
  into a buffer: it never touches the connection;
- connections are kept alive (HTTP/1.1) for ``keepalive`` seconds between requests, when
  both sides allow it; ``keepalive=0`` closes after every answer.

Worst-case memory: about ``max_connections * (max_head + small_body + TLS state)`` plus
``body_budget`` plus what the handlers allocate.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import queue
import selectors
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from socketserver import BaseRequestHandler
from typing import Any

from drakit.telemetry.httpwire import (
    BadRequestError,
    Exchange,
    RequestHead,
    keeps_alive,
    parse_head,
    refusal,
)
from drakit.telemetry.logs import get_logger

__all__ = ["BoundedHTTPServer", "Limits", "address_key"]

#: A socketserver-style handler class: ``handler(request, client_address, server)`` serves
#: one request (an :class:`Exchange`) when constructed. It must serve that one only: an
#: ``http.server`` handler of HTTP/1.1 overrides ``handle`` to call ``handle_one_request``
#: once, or its loop reads a body it left unread as a next request.
HandlerClass = Callable[[Any, Any, Any], BaseRequestHandler]

logger = get_logger(__name__)

_TICK = 0.1  # time limits are checked this often: each is kept within this much
_HEAD_READ = 16 * 1024  # bytes asked of the socket at a time while reading a head
_BODY_READ = 256 * 1024  # ... while reading a body
_WRITE = 256 * 1024
_AGAIN = (BlockingIOError, InterruptedError, ssl.SSLWantReadError)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """How much one server may spend: threads, connections, bytes and seconds."""

    workers: int = 2
    large_workers: int = 1
    max_connections: int = 64
    max_per_address: int = 16
    read_timeout: float = 5.0
    deadline: float = 30.0
    keepalive: float = 0.0
    max_head: int = 16 * 1024
    max_body: int = 0
    small_body: int = 64 * 1024
    body_budget: int = 16 * 1024 * 1024
    large_share: float = 0.5

    def __post_init__(self) -> None:
        counts = (self.workers, self.large_workers, self.max_connections, self.max_per_address)
        if min(counts) < 1 or self.max_head < 64:
            raise ValueError("workers, connections and max_head must be positive")
        if self.read_timeout <= 0 or self.deadline <= 0 or self.keepalive < 0:
            raise ValueError("read_timeout and deadline must be positive, keepalive not negative")
        if min(self.max_body, self.small_body, self.body_budget) < 0:
            raise ValueError("body sizes must not be negative")
        if not 0 < self.large_share <= 1:
            raise ValueError("large_share must be in (0, 1]")


def address_key(host: str) -> str:
    """The client address connections are counted by: the IPv4 address (also when mapped
    into IPv6), or the /64 network of an IPv6 address (one host usually has a whole /64)."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return host  # a Unix socket or something else without an IP: counted as itself
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


# What a connection is doing (the listener's view).
_HANDSHAKE, _HEAD, _BODY, _WAITING, _SERVING, _WRITING, _CLOSED = range(7)


def _idle(conn: _Conn) -> bool:
    """Nothing of a request (or of the TLS handshake) received yet: may be closed for room."""
    return not conn.heard and conn.phase in (_HANDSHAKE, _HEAD)


class _Conn:
    """One client connection; only the listener thread changes it."""

    def __init__(self, sock: socket.socket, key: str, peer: Any, now: float, tls: bool) -> None:
        self.sock = sock
        self.key = key
        self.peer = peer
        self.phase = _HANDSHAKE if tls else _HEAD
        self.events = 0  # selector events registered
        self.opened = now  # accept, or the end of the last answer on a kept-alive connection
        self.started: float | None = now  # the current request's clock; None: not begun
        self.last_io = now
        self.heard = False  # a byte of the current request (or of the handshake) arrived
        self.kept = False  # waiting for a next request after an answer
        self.buf = bytearray()  # the head being read, and what followed it
        self.scanned = 0  # bytes of buf searched for the end of the head
        self.head = b""
        self.request: RequestHead | None = None
        self.body: bytearray | None = None
        self.filled = 0
        self.reserved = 0  # bytes of body_budget held
        self.out: memoryview | None = None
        self.sent = 0
        self.close_after = False


class BoundedHTTPServer:
    """Serves ``handler_class`` on ``host:port`` within ``limits``; ``close`` stops it.

    ``tls`` returns the TLS context for each new connection (read at accept, so a new
    certificate is served from the next connection on), or None to refuse connections for
    now; without ``tls`` the server speaks plain HTTP. Raises OSError from the constructor
    when the address cannot be bound. ``server_name`` and ``server_port`` are the address
    it listens on.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handler_class: HandlerClass,
        limits: Limits | None = None,
        *,
        tls: Callable[[], ssl.SSLContext | None] | None = None,
        name: str = "metrics-http",
    ) -> None:
        self.limits = limits or Limits()
        self._handler_class = handler_class
        self._tls = tls
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listening = socket.create_server((host, port), family=family, backlog=128)
        self._listening.setblocking(False)
        bound = self._listening.getsockname()
        self.server_name, self.server_port = str(bound[0]), int(bound[1])
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listening, selectors.EVENT_READ)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        self._conns: dict[socket.socket, _Conn] = {}
        self._per_address: Counter[str] = Counter()
        self._budget_used = 0
        self._waiting: deque[_Conn] = deque()  # heads read, bodies waiting for the budget
        self._order = itertools.count()
        self._small: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._large: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._answers: queue.SimpleQueue[tuple[_Conn, bytes, bool]] = queue.SimpleQueue()
        self._closed = threading.Event()
        self._next_check = 0.0
        #: Connections closed at accept because of the bounds (for tests and logs).
        self.refused = 0
        self._threads = [threading.Thread(target=self._listen, name=name, daemon=True)]
        # No large workers when no body can be large (the metrics endpoint takes no body).
        large = self.limits.large_workers if self.limits.max_body > self.limits.small_body else 0
        for jobs, count, kind in ((self._small, self.limits.workers, "w"),
                                  (self._large, large, "l")):  # fmt: skip
            self._threads += [
                threading.Thread(
                    target=self._work, args=(jobs,), name=f"{name}-{kind}{i}", daemon=True
                )
                for i in range(count)
            ]
        for thread in self._threads:
            thread.start()

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._conns)

    @property
    def busy(self) -> int:
        """Connections open now that are not idle (a request or handshake has begun)."""
        return sum(not _idle(c) for c in list(self._conns.values()))

    @property
    def held_body_bytes(self) -> int:
        """Bytes of ``body_budget`` held now by large bodies."""
        return self._budget_used

    def close(self) -> None:
        """Stop accepting, close every connection and join the threads. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake()
        listener, *workers = self._threads
        listener.join(timeout=5)
        for jobs in (self._small, self._large):
            for _ in workers:
                jobs.put((-1, -1, None))  # first in the queue: workers stop before any job
        for thread in workers:
            thread.join(timeout=5)
        for sock in (self._listening, self._wake_reader, self._wake_writer):
            sock.close()
        self._selector.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")

    # -- listener: the loop ---------------------------------------------------------------

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                self._listen_once()
            except Exception:
                # The listener is the only way in: it must survive anything one round throws.
                logger.exception("HTTP listener round failed")
        for conn in list(self._conns.values()):
            self._close(conn)

    def _listen_once(self) -> None:
        for key, _ in self._selector.select(self._next_wait()):
            if key.fileobj is self._listening:
                self._accept()
            elif key.fileobj is self._wake_reader:
                with contextlib.suppress(OSError):
                    self._wake_reader.recv(4096)
            else:
                self._step(key.data)
        self._take_answers()
        if time.monotonic() >= self._next_check:
            self._enforce_time_limits()

    def _step(self, conn: _Conn) -> None:
        """Move ``conn`` on as far as its socket allows; a failure closes it, only it."""
        try:
            if conn.phase == _HANDSHAKE:
                self._handshake(conn)
            elif conn.phase in (_HEAD, _BODY):
                self._read(conn)
            elif conn.phase == _WRITING:
                self._write(conn)
        except Exception:
            logger.exception("HTTP connection failed", peer=str(conn.peer))
            self._close(conn)

    def _want(self, conn: _Conn, events: int) -> None:
        """Watch ``conn`` for ``events`` (0: not at all)."""
        if events == conn.events:
            return
        if not events:
            self._selector.unregister(conn.sock)
        elif not conn.events:
            self._selector.register(conn.sock, events, conn)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

    # -- listener: connections ------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self._listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. out of file descriptors: the next select tries again
            key = address_key(str(peer[0]))
            context = self._tls() if self._tls is not None else None
            if (self._tls is not None and context is None) or not self._make_room(key):
                self.refused += 1
                sock.close()
                continue
            sock.setblocking(False)
            if context is not None:
                try:
                    sock = context.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except (OSError, ValueError):
                    sock.close()
                    continue
            conn = _Conn(sock, key, peer, time.monotonic(), tls=context is not None)
            self._conns[sock] = conn
            self._per_address[key] += 1
            self._want(conn, selectors.EVENT_READ)

    def _make_room(self, key: str) -> bool:
        """True when a new connection from ``key`` fits, after closing an idle one if needed."""
        if self._per_address[key] >= self.limits.max_per_address:
            victim = self._oldest_idle(key)
            if victim is None:
                return False
            self._close(victim)
        if len(self._conns) >= self.limits.max_connections:
            victim = self._oldest_idle(None)
            if victim is None:
                return False
            self._close(victim)
        return True

    def _oldest_idle(self, key: str | None) -> _Conn | None:
        idle = [c for c in self._conns.values() if _idle(c) and key in (None, c.key)]
        return min(idle, key=lambda c: c.opened, default=None)

    def _close(self, conn: _Conn) -> None:
        if conn.phase == _CLOSED:
            return
        phase, conn.phase = conn.phase, _CLOSED
        if conn.events:
            self._selector.unregister(conn.sock)
            conn.events = 0
        self._conns.pop(conn.sock, None)
        self._per_address[conn.key] -= 1
        if self._per_address[conn.key] <= 0:
            del self._per_address[conn.key]
        with contextlib.suppress(OSError):
            if phase == _WRITING and conn.close_after:
                conn.sock.shutdown(socket.SHUT_WR)  # the answer is out: end it cleanly
        with contextlib.suppress(OSError):
            conn.sock.close()
        conn.buf = bytearray()
        conn.body = None
        self._release(conn)

    # -- listener: reading ----------------------------------------------------------------

    def _handshake(self, conn: _Conn) -> None:
        self._heard(conn)
        sock: ssl.SSLSocket = conn.sock  # type: ignore[assignment]
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError):  # ssl.SSLError is an OSError: not TLS, bad client hello
            self._close(conn)
            return
        # Nothing of a request yet: the connection is idle again (it may be closed to make
        # room), and its deadline still runs from the accept.
        conn.phase, conn.heard = _HEAD, False
        self._want(conn, selectors.EVENT_READ)
        self._read(conn)  # the client may have sent its request along with the handshake

    def _heard(self, conn: _Conn) -> None:
        now = time.monotonic()
        conn.last_io = now
        if not conn.heard:
            conn.heard = True
            if conn.started is None:
                conn.started = now  # a kept-alive connection's request begins now

    def _read(self, conn: _Conn) -> None:
        """Read what the socket has, without waiting, until the request is complete."""
        while conn.phase in (_HEAD, _BODY):
            try:
                if conn.phase == _HEAD:
                    room = self.limits.max_head + 4 - len(conn.buf)
                    data = conn.sock.recv(max(1, min(_HEAD_READ, room)))
                    n = len(data)
                else:
                    assert conn.body is not None
                    view = memoryview(conn.body)[conn.filled :]
                    n = conn.sock.recv_into(view, min(_BODY_READ, len(view)))
            except _AGAIN:
                self._want(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._want(conn, selectors.EVENT_WRITE)
                return
            except OSError:
                self._close(conn)
                return
            if not n:
                self._close(conn)  # the client went away: nothing to answer
                return
            self._heard(conn)
            if conn.phase == _HEAD:
                conn.buf += data
                self._head_progress(conn)
            else:
                conn.filled += n
                if conn.body is not None and conn.filled == len(conn.body):
                    self._dispatch(conn)

    def _head_progress(self, conn: _Conn) -> None:
        """Parse the head once it is complete; refuse one that is too long or malformed."""
        end = conn.buf.find(b"\r\n\r\n", max(0, conn.scanned - 3))
        conn.scanned = len(conn.buf)
        limit = self.limits.max_head
        if (end < 0 and len(conn.buf) > limit) or end + 4 > limit:
            self._refuse(conn, 431, f"request head larger than {limit} bytes")
            return
        if end < 0:
            return
        head, rest = bytes(conn.buf[: end + 4]), bytes(conn.buf[end + 4 :])
        conn.buf, conn.scanned = bytearray(), 0
        try:
            request = parse_head(head, self.limits.max_body)
        except BadRequestError as exc:
            self._refuse(conn, exc.status, exc.reason)
            return
        conn.head, conn.request = head, request
        if request.length > self.limits.small_body and not self._reserve(conn, request.length):
            conn.phase = _WAITING
            conn.buf = bytearray(rest)
            self._want(conn, 0)  # not read until it fits: the client's sends stall
            self._waiting.append(conn)
            return
        self._start_body(conn, rest)

    def _start_body(self, conn: _Conn, rest: bytes) -> None:
        assert conn.request is not None
        length = conn.request.length
        conn.body = bytearray(length)
        taken = rest[:length]
        conn.body[: len(taken)] = taken
        conn.filled = len(taken)
        conn.buf = bytearray(rest[length:])  # a pipelined next request, kept for later
        conn.phase = _BODY
        if conn.filled == length:
            self._dispatch(conn)

    def _reserve(self, conn: _Conn, size: int) -> bool:
        # A body larger than the whole budget still gets its turn when nothing else holds it.
        if self._budget_used and self._budget_used + size > self.limits.body_budget:
            return False
        self._budget_used += size
        conn.reserved = size
        return True

    def _release(self, conn: _Conn) -> None:
        if not conn.reserved:
            return
        self._budget_used -= conn.reserved
        conn.reserved = 0
        while self._waiting:
            waiter = self._waiting[0]
            if waiter.phase != _WAITING:
                self._waiting.popleft()  # closed meanwhile
                continue
            assert waiter.request is not None
            if not self._reserve(waiter, waiter.request.length):
                return
            self._waiting.popleft()
            self._start_body(waiter, bytes(waiter.buf))
            # Read at once: TLS may hold bytes of the body already, which no event announces.
            self._step(waiter)

    def _dispatch(self, conn: _Conn) -> None:
        """The request is complete: hand it to a worker, smallest body first."""
        assert conn.body is not None and conn.request is not None
        conn.phase = _SERVING
        self._want(conn, 0)
        body, conn.body = bytes(conn.body), None
        jobs = self._large if len(body) > self.limits.small_body else self._small
        jobs.put((len(body), next(self._order), (conn, conn.head, body, conn.request)))

    # -- workers --------------------------------------------------------------------------

    def _work(self, jobs: queue.PriorityQueue[tuple[int, int, Any]]) -> None:
        # Decoding a large body holds the interpreter (one C call) for up to a few tenths of
        # a second, and the listener waits meanwhile: a large worker rests after each request,
        # so that large requests take at most large_share of the time.
        rest = 1 / self.limits.large_share - 1 if jobs is self._large else 0.0
        while (job := jobs.get()[2]) is not None:
            started = time.monotonic()
            conn, head, body, request = job
            answer = self._serve(head, body, conn.peer)
            keep = bool(self.limits.keepalive) and request.keep_alive and keeps_alive(answer)
            self._answers.put((conn, answer, not keep))
            self._wake()
            if rest and self._closed.wait((time.monotonic() - started) * rest):
                return

    def _serve(self, head: bytes, body: bytes, peer: Any) -> bytes:
        exchange = Exchange(head, body, peer)
        try:
            self._handler_class(exchange, peer, self)
        except Exception:
            # A failing handler must not cost the server a worker, nor the client an answer.
            logger.exception("HTTP request failed", peer=str(peer))
            return refusal(500, "internal error")
        return exchange.answer()

    # -- listener: answering --------------------------------------------------------------

    def _take_answers(self) -> None:
        while True:
            try:
                conn, answer, close = self._answers.get_nowait()
            except queue.Empty:
                return
            self._release(conn)
            if conn.phase != _SERVING:
                continue  # closed while it was served (the server is stopping)
            if not answer:
                self._close(conn)
                continue
            self._answer(conn, answer, close)

    def _refuse(self, conn: _Conn, status: int, reason: str) -> None:
        self._answer(conn, refusal(status, reason), close=True)

    def _answer(self, conn: _Conn, answer: bytes, close: bool) -> None:
        conn.phase = _WRITING
        conn.out, conn.sent, conn.close_after = memoryview(answer), 0, close
        conn.started = time.monotonic()  # the deadline for the client to take its answer
        self._release(conn)
        self._step(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        while conn.sent < len(conn.out):
            try:
                n = conn.sock.send(conn.out[conn.sent : conn.sent + _WRITE])
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                self._want(conn, selectors.EVENT_WRITE)
                return
            except ssl.SSLWantReadError:
                self._want(conn, selectors.EVENT_READ)
                return
            except OSError:
                self._close(conn)
                return
            conn.sent += n
            conn.last_io = time.monotonic()
        if conn.close_after:
            self._close(conn)
        else:
            self._keep(conn)

    def _keep(self, conn: _Conn) -> None:
        """The answer is out: wait for the connection's next request."""
        now = time.monotonic()
        conn.phase, conn.out, conn.request, conn.head = _HEAD, None, None, b""
        conn.opened, conn.started, conn.last_io = now, None, now
        conn.heard, conn.kept = False, True
        self._want(conn, selectors.EVENT_READ)
        if conn.buf:  # a pipelined request arrived with the last one
            self._heard(conn)
            self._head_progress(conn)
        self._step(conn)  # TLS may hold decrypted bytes the selector cannot see

    # -- listener: time limits ------------------------------------------------------------

    def _due(self, conn: _Conn) -> tuple[float, int] | None:
        """(when, status) of ``conn``'s next time limit (status 0: close without answer)."""
        limits = self.limits
        if conn.phase in (_SERVING, _CLOSED):
            return None
        if conn.phase == _WRITING:
            assert conn.started is not None
            return conn.started + limits.deadline, 0
        if not conn.heard:
            if conn.kept:
                return conn.opened + limits.keepalive, 0
            return min(conn.opened + limits.deadline, conn.last_io + limits.read_timeout), 0
        assert conn.started is not None
        if conn.phase == _WAITING:
            return conn.started + limits.deadline, 503
        status = 0 if conn.phase == _HANDSHAKE else 408
        return min(conn.started + limits.deadline, conn.last_io + limits.read_timeout), status

    def _enforce_time_limits(self) -> None:
        now = time.monotonic()
        # Once a tick at most: every connection is looked at, and a busy listener goes round
        # its loop thousands of times a second.
        self._next_check = now + _TICK
        for conn in list(self._conns.values()):
            due = self._due(conn)
            if due is None or due[0] > now or conn.phase == _CLOSED:
                continue
            if due[1] == 408:
                self._refuse(conn, 408, "request not received in time")
            elif due[1] == 503:
                self._refuse(conn, 503, "too many large requests at once; try again")
            else:
                self._close(conn)

    def _next_wait(self) -> float:
        """Seconds until the next check of the time limits (none without connections)."""
        if not self._conns:
            return 1.0  # a new connection wakes the selector
        return max(0.0, self._next_check - time.monotonic())
