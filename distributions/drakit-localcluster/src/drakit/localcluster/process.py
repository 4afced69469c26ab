"""Child processes of the local control plane: started in their own process
group, logged to a file, stopped completely.

A child gets ``PR_SET_PDEATHSIG(SIGKILL)`` so that it dies with the launcher
even when the launcher itself is killed with SIGKILL; the leftovers registry
(``leftovers.py``) covers the rest (for example a launcher that daemonised).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

_PR_SET_PDEATHSIG = 1


class StartError(RuntimeError):
    """A control-plane process exited or did not become ready in time."""


class PortInUseError(StartError):
    """The process could not bind a port that was free when it was chosen."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago.

    Another process may take it before ours binds; callers detect that with
    PortInUseError and try again with fresh ports.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    os.setsid()  # own process group: stop() signals the whole group
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not glibc: the leftovers registry still cleans up
        pass


class StartedByWith(ABC):
    """Something a ``with`` block starts on entry and stops on exit, error or not.

    Subclasses define ``start`` (which must leave nothing running when it
    raises) and ``stop`` (safe to call more than once).
    """

    @abstractmethod
    def start(self) -> None:
        """Bring the thing up; return once it is usable."""

    @abstractmethod
    def stop(self) -> object:
        """Take the thing down again; what it returns is the subclass's business."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ManagedProcess:
    """One long-running child with its log file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, env: dict[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - needed for PDEATHSIG; no threads touch it
            )

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, ready: Callable[[], bool], timeout: float, interval: float = 0.1) -> None:
        """Poll ``ready`` until it returns True.

        Raises PortInUseError when the process died because a port was taken,
        StartError (with the tail of its log) when it died otherwise or did not
        become ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                self._raise_exited()
            try:
                if ready():
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(interval)
        self.stop()
        raise StartError(
            f"{self.name} did not become ready within {timeout:.0f}s; last log lines "
            f"({self.log_path}):\n{self.log_tail()}"
        )

    def _raise_exited(self) -> None:
        code = self._proc.returncode if self._proc else None
        tail = self.log_tail()
        if "address already in use" in tail:
            raise PortInUseError(f"{self.name}: a port was taken before it could bind")
        raise StartError(
            f"{self.name} exited with code {code}; last log lines ({self.log_path}):\n{tail}"
        )

    def kill(self) -> None:
        """SIGKILL the process group at once and reap it (as a crash: no clean-up)."""
        proc = self._proc
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the process group (SIGSTOP/SIGCONT pause and resume it)."""
        if self._proc is not None and self._proc.poll() is None:
            _signal_group(self._proc.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            _signal_group(proc.pid, signal.SIGCONT)  # a paused (SIGSTOP) process must see it
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
        # Children of the child may outlive it; the group kill reaches them too.
        _signal_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def http_ok(url: str, insecure: bool = False) -> bool:
    """True when ``url`` answers 200; OSError while nothing listens (``wait_ready`` retries).

    ``insecure`` skips TLS verification: components' self-signed health endpoints.
    """
    ctx = None
    if insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
            return int(resp.status) == 200
    except urllib.error.HTTPError:
        return False
    except urllib.error.URLError as err:
        raise OSError(str(err.reason)) from err
