"""A single-threaded helper process that forks sandbox children for a threaded caller.

A fork of a multi-threaded process copies locks that other threads hold (held forever in
the child), and Python 3.12 deprecates it. The caller (the controller, with its informer,
worker and gRPC threads) therefore never forks: it starts this host once, with
``subprocess`` (fork+exec, safe from any thread), and the host, which runs no threads,
forks one child per request. Unlike multiprocessing's forkserver, a child does not import
the caller's main script again.

Protocol, on Unix socket pairs (messages are a 4-byte length and the bytes):

* the caller sends the host one end of a new socket pair (``SCM_RIGHTS``) per child;
* the child sends its pid (JSON ``{"pid": n}``), receives one message, a pickled callable
  ``entry(conn)``, and calls it (``entry`` answers on ``conn`` and leaves with
  ``os._exit``);
* once the child has ended, the host sends ``{"status": exit code}`` (negative: the signal
  that ended it) on the same socket, if the caller still listens.

The host preloads the CEL engine, so children start with it imported; it ends when the
caller closes its control socket (or dies).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["ForkHost", "receive_message", "send_message", "serve"]

_HEADER: Final = struct.Struct("!I")
_PRELOAD: Final = "drakit.allocator.cel.engine"


def send_message(conn: socket.socket, data: bytes) -> None:
    """Send one framed message."""
    conn.sendall(_HEADER.pack(len(data)) + data)


def receive_message(conn: socket.socket) -> bytes | None:
    """Receive one framed message (blocking); None when the peer closed first."""
    header = _receive_exactly(conn, _HEADER.size)
    if header is None:
        return None
    return _receive_exactly(conn, _HEADER.unpack(header)[0])


def _receive_exactly(conn: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ForkHost:
    """The caller's side: starts the host on first use (again if it died, or in a forked
    copy of the caller) and asks it for children. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0

    def start_child(self, entry: Callable[[socket.socket], Any]) -> socket.socket:
        """A new child running ``entry`` (picklable); return the caller's end of its socket.
        The first message on it is the child's pid."""
        ours, theirs = socket.socketpair()
        try:
            with self._lock:
                self._ask_for_child(theirs)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        send_message(ours, pickle.dumps(entry))
        return ours

    def _ask_for_child(self, conn: socket.socket) -> None:
        for attempt in (1, 2):
            control = self._running()
            try:
                socket.send_fds(control, [b"c"], [conn.fileno()])
                return
            except OSError:
                self._stop()  # the host died: start another once
                if attempt == 2:
                    raise

    def _running(self) -> socket.socket:
        alive = self._process is not None and self._process.poll() is None
        if self._control is not None and alive and self._owner == os.getpid():
            return self._control
        self._stop()
        ours, theirs = socket.socketpair()
        path = os.pathsep.join(p for p in sys.path if p)
        command = f"import sys; sys.path[:0] = {path!r}.split({os.pathsep!r}); " + (
            "from drakit.allocator.cel.forkhost import serve; serve(int(sys.argv[1]))"
        )
        with theirs:
            self._process = subprocess.Popen(  # our own interpreter and module
                [sys.executable, "-c", command, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
            )
        self._control, self._owner = ours, os.getpid()
        atexit.register(self.close)
        return ours

    def close(self) -> None:
        """Stop the host (it also stops by itself when this process ends)."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()
            atexit.unregister(self.close)
        if self._process is not None and self._owner == os.getpid():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(1)  # it ends on the closed control socket
        self._control = self._process = None


# --------------------------------------------------------------------------- the host


def serve(control_fd: int) -> None:
    """The host's main loop (in its own process): fork a child per request; report each
    child's exit status; return when the caller closes the control socket."""
    with contextlib.suppress(ImportError):
        __import__(_PRELOAD)
    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([control.fileno(), wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            _reap(children)
        if control.fileno() in ready:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
            if not fds:
                return  # the caller is gone
            conn = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                for fd in (control.fileno(), wake_r, wake_w):
                    os.close(fd)
                _child(conn)
            children[pid] = conn


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(OSError):  # the caller may have stopped listening
            message = {"status": os.waitstatus_to_exitcode(status)}
            send_message(conn, json.dumps(message).encode())
        conn.close()


def _child(conn: socket.socket) -> None:
    """A forked child: report the pid, run the caller's entry; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        send_message(conn, json.dumps({"pid": os.getpid()}).encode())
        payload = receive_message(conn)
        if payload is not None:
            pickle.loads(payload)(conn)  # from the caller that started us
            code = 0
    finally:
        os._exit(code)
