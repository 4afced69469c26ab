"""A loopback TCP proxy that misbehaves on command: the soak's network faults.

``ChaosProxy(upstream_host, upstream_port)`` listens on ``127.0.0.1:<port>`` (``port`` is
chosen by the kernel unless given) and forwards every connection to the upstream, bytes
untouched (TLS passes through end to end). A component whose kubeconfig points at the
proxy can then be cut off from the apiserver without touching either process.

Modes (:meth:`ChaosProxy.set_mode`, thread-safe, effective at once):

``pass``
    forward everything (the initial mode).
``drop_new``
    new connections are reset at once (the client sees ECONNRESET, as for a refused
    connection); established ones keep working.
``reset_all``
    every established connection is reset (RST, via ``SO_LINGER`` 0, on both sides), and
    so is every new one while the mode lasts.
``delay``
    every chunk of data, both ways, and every new upstream connection waits ``delay``
    seconds (watches stall, requests time out client-side after being applied).
``blackhole``
    connections are accepted but nothing is forwarded: data read is held until the mode
    ends (then delivered, late), new connections are not connected upstream until then.

:meth:`ChaosProxy.cut_all` resets every established connection once, whatever the mode.
Counters (:meth:`ChaosProxy.stats`) say how many connections were accepted, reset or
dropped, how many chunks a blackhole held back each way, and how many faults were set.
Only loopback addresses are accepted, for both ends.

Threads: one accepting thread, and per connection one thread per direction; the two
threads of a connection own its sockets and close them (so a file descriptor is never
closed under a thread still using it). Sockets poll with a short timeout to notice a reset
or a mode change promptly.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

MODES = ("pass", "drop_new", "reset_all", "delay", "blackhole")
#: How often blocked socket calls wake up to look at resets and mode changes (a fallback:
#: a reset shuts the sockets' reading side, which wakes a blocked read at once).
POLL_SECONDS = 1.0
CHUNK = 64 * 1024
UPSTREAM_CONNECT_TIMEOUT = 5.0
#: A delay longer than this is a mistake (a watch would just look dead).
MAX_DELAY_SECONDS = 300.0


def _loopback(host: str) -> str:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"chaos proxy: host {host!r} is not an IP address") from None
    if not address.is_loopback:
        raise ValueError(f"chaos proxy: host {host} is not a loopback address")
    return host


def _rst_on_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@dataclass(eq=False)  # identity: connections live in a set
class _Connection:
    client: socket.socket
    upstream: socket.socket | None = None
    stopped: bool = False  # the pumps must end (after a reset, or one side's EOF)
    open_pumps: int = 2


class ChaosProxy:
    """One listening socket in front of one upstream; see the module docstring for modes."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.upstream = (_loopback(upstream_host), int(upstream_port))
        self._listen_at = (_loopback(listen_host), int(listen_port))
        self._lock = threading.Condition()
        self._mode = "pass"
        self._delay = 0.0
        self._connections: set[_Connection] = set()
        self._counts: Counter[str] = Counter()
        self._faults: Counter[str] = Counter()
        self._stopping = False
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.port = 0

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> ChaosProxy:
        """Bind and start accepting; ``self.port`` is the port to connect to."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(self._listen_at)
        listener.listen(128)
        listener.settimeout(POLL_SECONDS)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop, "accept")
        return self

    def stop(self) -> None:
        """Stop accepting, reset every connection and wait for the threads. Idempotent."""
        with self._lock:
            self._stopping = True
            for conn in self._connections:
                self._mark_reset(conn)
            self._lock.notify_all()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        for thread in list(self._threads):
            thread.join(timeout=10)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- control ---------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        with self._lock:
            return self._mode

    def set_mode(self, mode: str, *, delay: float = 0.0) -> None:
        """Switch to ``mode`` (one of :data:`MODES`; ``"cut"`` is :meth:`cut_all`).

        ``delay`` (seconds, for ``delay`` only) must be in (0, MAX_DELAY_SECONDS].
        Raises ValueError naming the bad argument.
        """
        if mode == "cut":
            self.cut_all()
            return
        if mode not in MODES:
            raise ValueError(f"chaos proxy: mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "delay" and not 0.0 < delay <= MAX_DELAY_SECONDS:
            raise ValueError(f"chaos proxy: delay {delay!r} must be in (0, {MAX_DELAY_SECONDS}]")
        with self._lock:
            self._mode = mode
            self._delay = delay if mode == "delay" else 0.0
            if mode != "pass":
                self._faults[mode] += 1
            if mode == "reset_all":
                for conn in self._connections:
                    self._mark_reset(conn)
            self._lock.notify_all()

    def cut_all(self) -> int:
        """Reset every established connection now; returns how many."""
        with self._lock:
            self._faults["cut"] += 1
            live = [c for c in self._connections if not c.stopped]
            for conn in live:
                self._mark_reset(conn)
            self._lock.notify_all()
            return len(live)

    def stats(self) -> dict[str, Any]:
        """Counters: accepted, active, reset, dropped connections, bytes each way, chunks a
        blackhole held back each way (``held_up``, ``held_down``: proof that data reached the
        proxy and was kept from its peer), faults set."""
        keys = ("accepted", "reset", "dropped", "up", "down", "held_up", "held_down")
        with self._lock:
            return {
                **{k: self._counts[k] for k in keys},
                "active": len(self._connections),
                "faults": dict(self._faults),
            }

    # -- accepting -------------------------------------------------------------------------

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=f"chaosproxy-{name}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            with self._lock:
                if self._stopping:
                    return
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn = self._admit(client)
            if conn is not None:
                self._spawn(self._connect, "connect", conn)

    def _admit(self, client: socket.socket) -> _Connection | None:
        """Track a new connection, or reset it at once when the mode refuses new ones."""
        with self._lock:
            self._counts["accepted"] += 1
            if self._mode not in ("drop_new", "reset_all") and not self._stopping:
                conn = _Connection(client)
                self._connections.add(conn)
                return conn
            self._counts["dropped"] += 1
        _rst_on_close(client)
        client.close()
        return None

    def _connect(self, conn: _Connection) -> None:
        """Wait out a blackhole or delay, then connect upstream and start both pumps."""
        if not self._hold(conn):
            self._finish(conn, pumps=2)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=UPSTREAM_CONNECT_TIMEOUT)
        except OSError:
            self._finish(conn, pumps=2)
            return
        conn.client.settimeout(POLL_SECONDS)
        upstream.settimeout(POLL_SECONDS)
        with self._lock:
            conn.upstream = upstream
            if conn.stopped:  # reset while connecting: the new socket is reset too
                _rst_on_close(upstream)
        self._spawn(self._pump, "up", conn, conn.client, upstream, "up")
        self._spawn(self._pump, "down", conn, upstream, conn.client, "down")

    # -- forwarding ------------------------------------------------------------------------

    def _pump(
        self, conn: _Connection, src: socket.socket, dst: socket.socket, direction: str
    ) -> None:
        """Copy ``src`` to ``dst`` under the current mode until EOF, an error or a reset."""
        while not conn.stopped:
            try:
                data = src.recv(CHUNK)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                if not conn.stopped:  # a real EOF, not our own shutdown for a reset
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)  # pass it on
                break
            if not self._hold(conn, direction) or not self._send(conn, dst, data):
                break
            with self._lock:
                self._counts[direction] += len(data)
        self._finish(conn, pumps=1)

    def _hold(self, conn: _Connection, direction: str = "") -> bool:
        """Wait while the mode blackholes, then out the delay; False once ``conn`` is reset.
        A chunk of data held back (``direction`` given) is counted as ``held_<direction>``.

        Mode changes and resets notify the lock's waiters, so neither wait polls.
        """
        with self._lock:
            if direction and self._mode == "blackhole":
                self._counts[f"held_{direction}"] += 1
            while self._mode == "blackhole" and not conn.stopped:
                self._lock.wait(POLL_SECONDS)
            deadline = time.monotonic() + self._delay
            while not conn.stopped and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)
            return not conn.stopped

    def _send(self, conn: _Connection, dst: socket.socket, data: bytes) -> bool:
        view = memoryview(data)
        while view and not conn.stopped:
            try:
                sent = dst.send(view)
            except TimeoutError:
                continue
            except OSError:
                return False
            view = view[sent:]
        return not view

    def _mark_reset(self, conn: _Connection) -> None:
        """Under the lock: make the pumps stop and their close send RST on both sides."""
        if conn.stopped:
            return
        self._counts["reset"] += 1
        for sock in (conn.client, conn.upstream):
            if sock is not None:
                _rst_on_close(sock)
        self._stop_pumps(conn)

    def _stop_pumps(self, conn: _Connection) -> None:
        """Under the lock: mark ``conn`` stopped and wake its pumps and waits at once.

        Shutting the reading side down wakes a pump blocked in ``recv`` (Linux sends nothing
        for it); the pump sees ``stopped`` and does not pass an EOF on.
        """
        conn.stopped = True
        for sock in (conn.client, conn.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)
        self._lock.notify_all()

    def _finish(self, conn: _Connection, *, pumps: int) -> None:
        """One pump (or the connector, for both) is done; the last one closes the sockets."""
        with self._lock:
            conn.open_pumps -= pumps
            if conn.open_pumps > 0:
                # The other direction may be blocked on a peer that will never speak again;
                # a connection with one side gone is over (as a kernel proxy would see it).
                self._stop_pumps(conn)
                return
            self._connections.discard(conn)
        for sock in (conn.client, conn.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
