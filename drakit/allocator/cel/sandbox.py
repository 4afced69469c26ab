"""Evaluate one risky selector in a child process with CPU, memory and wall-clock limits.

The Rust CEL engine holds the GIL while it evaluates and cannot be interrupted, and it
aborts the whole process when an allocation fails. A selector that can grow strings or
lists (``cel.bind`` doublings, ``lists.range``, ``split``, nested comprehensions) is
therefore evaluated in a child process started for the purpose:

* children come from a single-threaded host process (:mod:`drakit.allocator.cel.forkhost`),
  started once with the CEL engine imported, which forks each one. The caller (the
  controller, with its informer, worker and gRPC threads) never forks itself: a fork of a
  multi-threaded process copies locks other threads hold, and Python 3.12 deprecates it;
* the task (a picklable callable: the selector's text and the device's variables) is sent
  to the child, which sets ``RLIMIT_AS`` to its current size plus :data:`MEMORY_HEADROOM`
  and ``RLIMIT_CPU`` to :data:`CPU_SECONDS`, evaluates, sends a small JSON answer on a pipe
  and leaves with ``os._exit`` (no cleanup handlers, no logging, no flushing);
* the parent waits on the pipe without holding the GIL, polling ``cancelled`` every
  :data:`POLL_SECONDS`; past the deadline, or when cancelled, it kills the child;
* a child that dies (out of memory: the engine aborts; out of CPU: SIGXCPU/SIGKILL) or is
  killed produces :class:`SandboxLimitError`, which callers report as Kubernetes' "cost limit
  exceeded".
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import os
import resource
import select
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from drakit.allocator.cel.forkhost import ForkHost, receive_message, send_message

__all__ = [
    "CPU_SECONDS",
    "MEMORY_HEADROOM",
    "SandboxCancelledError",
    "SandboxDeadlineError",
    "SandboxError",
    "SandboxLimitError",
    "finish_early",
    "run_guarded",
]

MEMORY_HEADROOM: Final = 256 << 20  # bytes of address space the child may add
CPU_SECONDS: Final = 2  # CPU seconds one evaluation may use
WALL_SECONDS: Final = 10.0  # wall-clock bound when the caller has no deadline
POLL_SECONDS: Final = 0.1
_MAX_ANSWER: Final = 64 * 1024
_EXIT_OUT_OF_MEMORY: Final = 3
_HOST: Final = ForkHost()


class SandboxError(RuntimeError):
    """The guarded evaluation did not produce an answer."""


class SandboxLimitError(SandboxError):
    """The child ran out of CPU time, memory or wall-clock time."""


class SandboxCancelledError(SandboxError):
    """The caller asked to stop (``cancelled()`` returned True) while the child ran."""


class SandboxDeadlineError(SandboxCancelledError):
    """The caller's deadline passed while the child ran."""


def run_guarded(
    task: Callable[[], tuple[bool, str]],
    *,
    deadline: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[bool, str]:
    """Run ``task`` in a child process; return its ``(ok, text)`` answer.

    ``task`` must be picklable (a module-level function, or a ``functools.partial`` of one
    with picklable arguments) and must not raise: it returns ``(True, "true"|"false")`` or
    ``(False, message)``. ``deadline`` is a ``time.monotonic()`` value. Raises
    :class:`SandboxLimitError` or :class:`SandboxCancelledError`.
    """
    conn = _HOST.start_child(functools.partial(_child, task))
    try:
        return _collect(conn, deadline, cancelled)
    finally:
        conn.close()


_answer_pipe: socket.socket | None = None  # set in a guarded child only


def finish_early(ok: bool, text: str) -> None:
    """In a guarded child: send this answer and exit now. Elsewhere: return (no effect)."""
    if _answer_pipe is None:
        return
    try:
        _send(_answer_pipe, ok, text)
    finally:
        os._exit(0)


def _send(conn: socket.socket, ok: bool, text: str) -> None:
    send_message(conn, json.dumps([ok, text[:_MAX_ANSWER]]).encode())


def _child(task: Callable[[], tuple[bool, str]], conn: socket.socket) -> None:
    global _answer_pipe  # noqa: PLW0603 - this process is the child; nothing else runs here
    code = 0
    try:
        _answer_pipe = conn
        _limit_self()
        ok, text = task()
        _send(conn, ok, text)
    except MemoryError:
        code = _EXIT_OUT_OF_MEMORY
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _limit_self() -> None:
    # The engine prints a backtrace when an allocation fails, and faulthandler (if the
    # parent enabled it) a Python one on SIGABRT: neither is for the user's terminal.
    faulthandler.disable()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    pages = int(Path("/proc/self/statm").read_bytes().split()[0])
    limit = pages * resource.getpagesize() + MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 1))


def _collect(
    conn: socket.socket, deadline: float | None, cancelled: Callable[[], bool] | None
) -> tuple[bool, str]:
    own_end = time.monotonic() + WALL_SECONDS
    end = own_end if deadline is None else min(deadline, own_end)
    first = _message(conn)  # the child's pid: sent at once, so that it can be killed
    pid = int(first["pid"]) if isinstance(first, dict) and "pid" in first else None
    if pid is None:
        raise SandboxLimitError("evaluation failed (the sandbox host did not start a child)")
    try:
        while True:
            if cancelled is not None and cancelled():
                raise SandboxCancelledError("evaluation stopped: asked by caller to stop")
            remaining = end - time.monotonic()
            if remaining <= 0:
                if end < own_end:
                    raise SandboxDeadlineError("filter operation aborted: time limit exceeded")
                raise SandboxLimitError(f"evaluation took longer than {WALL_SECONDS:g} s")
            ready, _, _ = select.select([conn], [], [], min(POLL_SECONDS, remaining))
            if ready:
                return _answer(_message(conn))
    except BaseException:  # time is up, cancelled, or the caller is interrupted: no orphans
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise


def _message(conn: socket.socket) -> Any:
    data = receive_message(conn)
    return None if data is None else json.loads(data)


def _answer(message: Any) -> tuple[bool, str]:
    """The child's answer, or the reason it gave none (the host's exit status report)."""
    if isinstance(message, list):
        ok, text = message
        return bool(ok), str(text)
    if isinstance(message, dict) and "status" in message:
        raise SandboxLimitError(_death_reason(int(message["status"])))
    raise SandboxLimitError("evaluation failed (the sandbox host ended)")


_OUT_OF_MEMORY: Final = f"evaluation ran out of memory (more than {MEMORY_HEADROOM >> 20} MiB)"


def _death_reason(code: int) -> str:
    """Why a child with exit code ``code`` (negative: killed by that signal) gave no answer."""
    if code < 0:
        if -code in (signal.SIGXCPU, signal.SIGKILL):
            return f"evaluation used more than {CPU_SECONDS} s of CPU time"
        return _OUT_OF_MEMORY
    if code == _EXIT_OUT_OF_MEMORY:
        return _OUT_OF_MEMORY
    return f"evaluation failed (exit status {code})"
