"""Evaluate one risky selector in a forked child with CPU, memory and wall-clock limits.

The Rust CEL engine holds the GIL while it evaluates and cannot be interrupted, and it
aborts the whole process when an allocation fails. A selector that can grow strings or
lists (``cel.bind`` doublings, ``lists.range``, ``split``, nested comprehensions) is
therefore evaluated in a child process forked for the purpose:

* the child inherits the compiled program and the device value (nothing is serialized on
  the way in), sets ``RLIMIT_AS`` to its current size plus :data:`MEMORY_HEADROOM` and
  ``RLIMIT_CPU`` to :data:`CPU_SECONDS`, evaluates, writes a small JSON answer to a pipe
  and leaves with ``os._exit`` (no cleanup handlers, no logging, no flushing of the
  parent's buffers);
* the parent waits on the pipe without holding the GIL, polling ``cancelled`` every
  :data:`POLL_SECONDS`; past the deadline, or when cancelled, it kills the child;
* a child that dies (out of memory: the engine aborts; out of CPU: SIGXCPU/SIGKILL) or is
  killed produces :class:`SandboxLimitError`, which callers report as Kubernetes' "cost limit
  exceeded".

Fork safety: the child only runs the engine on objects the parent already built and
writes to a pipe; it takes no lock that another parent thread could hold at fork time
(compiled programs are immutable; the selector cache is not touched).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import resource
import select
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

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


class SandboxError(RuntimeError):
    """The guarded evaluation did not produce an answer."""


class SandboxLimitError(SandboxError):
    """The child ran out of CPU time, memory or wall-clock time."""


class SandboxCancelledError(SandboxError):
    """The caller asked to stop (``cancelled()`` returned True) while the child ran."""


class SandboxDeadlineError(SandboxCancelledError):
    """The caller's deadline passed while the child ran."""


def run_guarded(
    evaluate: Callable[[], tuple[bool, str]],
    *,
    deadline: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[bool, str]:
    """Run ``evaluate`` in a forked child; return its ``(ok, text)`` answer.

    ``evaluate`` must not raise: it returns ``(True, "true"|"false")`` or ``(False, message)``.
    ``deadline`` is a ``time.monotonic()`` value. Raises :class:`SandboxLimitError` or
    :class:`SandboxCancelledError`.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        os.close(read_end)
        _child(evaluate, write_end)
    os.close(write_end)
    try:
        answer = _collect(read_end, pid, deadline, cancelled)
    finally:
        os.close(read_end)
    return answer


_answer_pipe: int | None = None  # set in a guarded child only


def finish_early(ok: bool, text: str) -> None:
    """In a guarded child: send this answer and exit now. Elsewhere: return (no effect)."""
    if _answer_pipe is None:
        return
    try:
        _send(_answer_pipe, ok, text)
    finally:
        os._exit(0)


def _send(write_end: int, ok: bool, text: str) -> None:
    view = memoryview(json.dumps([ok, text[:_MAX_ANSWER]]).encode())
    while view:
        view = view[os.write(write_end, view) :]


def _child(evaluate: Callable[[], tuple[bool, str]], write_end: int) -> None:
    global _answer_pipe  # noqa: PLW0603 - this process is the child; nothing else runs here
    code = 0
    try:
        _answer_pipe = write_end
        _limit_self()
        ok, text = evaluate()
        _send(write_end, ok, text)
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
    read_end: int, pid: int, deadline: float | None, cancelled: Callable[[], bool] | None
) -> tuple[bool, str]:
    own_end = time.monotonic() + WALL_SECONDS
    end = own_end if deadline is None else min(deadline, own_end)
    chunks: list[bytes] = []
    try:
        while True:
            if cancelled is not None and cancelled():
                raise SandboxCancelledError("evaluation stopped: asked by caller to stop")
            remaining = end - time.monotonic()
            if remaining <= 0:
                if end < own_end:
                    raise SandboxDeadlineError("filter operation aborted: time limit exceeded")
                raise SandboxLimitError(f"evaluation took longer than {WALL_SECONDS:g} s")
            ready, _, _ = select.select([read_end], [], [], min(POLL_SECONDS, remaining))
            if not ready:
                continue
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:  # time is up, cancelled, or the caller is interrupted: no orphans
        _kill(pid)
        raise
    status = os.waitpid(pid, 0)[1]
    data = b"".join(chunks)
    if not data or os.waitstatus_to_exitcode(status) != 0:
        raise SandboxLimitError(_death_reason(status))
    ok, text = json.loads(data)
    return bool(ok), str(text)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_OUT_OF_MEMORY: Final = f"evaluation ran out of memory (more than {MEMORY_HEADROOM >> 20} MiB)"


def _death_reason(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return f"evaluation used more than {CPU_SECONDS} s of CPU time"
        return _OUT_OF_MEMORY
    if os.waitstatus_to_exitcode(status) == _EXIT_OUT_OF_MEMORY:
        return _OUT_OF_MEMORY
    return f"evaluation failed (exit status {os.waitstatus_to_exitcode(status)})"
