"""Run ``kubelet-harness`` (hack/kubelet-harness) as a subprocess and read its events.

The harness runs the kubelet's real DRA manager and plugin manager for one
node and prints one JSON object per line on stdout (``ready``, ``registered``,
``prepared``, ``prepare-failed``, ``unprepared``, ...; see
hack/kubelet-harness/README.md). :class:`KubeletHarness` collects those lines
in a background thread so a test can wait for the one it needs, and keeps
stderr (klog) to explain a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from drakit.localcluster.process import StartedByWith

HarnessEvent = dict[str, Any]

STDERR_TAIL_LINES = 60
STOP_GRACE_SECONDS = 10.0


class HarnessError(AssertionError):
    """The harness exited, or an expected event did not arrive in time."""


def build_harness_binary(repo_root: Path, kube_version: str | None = None) -> Path:
    """Build (or reuse) the harness with ``hack/build-binaries.sh`` and return its path.

    Raises FileNotFoundError when Go is not installed (the script exits 3),
    so a caller can skip instead of fail; any other build failure raises
    HarnessError with the build output.
    """
    script = repo_root / "hack" / "build-binaries.sh"
    env = dict(os.environ)
    if kube_version is not None:  # that version's DRA manager (default: $DRAKIT_KUBE_VERSION)
        env["DRAKIT_KUBE_VERSION"] = kube_version
    proc = subprocess.run(
        [str(script), "kubelet-harness"], capture_output=True, text=True, check=False, env=env
    )
    if proc.returncode == 3:
        raise FileNotFoundError(f"Go is needed to build the kubelet harness: {proc.stderr.strip()}")
    if proc.returncode != 0:
        raise HarnessError(f"{script} kubelet-harness failed:\n{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1]) / "kubelet-harness"


class KubeletHarness(StartedByWith):
    """One running harness process; a context manager that starts and stops it.

    ``with KubeletHarness(...) as h`` starts the process and returns once it
    printed ``ready`` (it watches its pods and registrar folder). Leaving the
    block sends SIGTERM, then SIGKILL after a grace period. Events are kept
    for the lifetime of the object, so :meth:`wait_for` also finds events
    that arrived before it was called.
    """

    def __init__(
        self,
        binary: str | os.PathLike[str],
        kubeconfig: str | os.PathLike[str],
        node_name: str,
        registrar_dir: str | os.PathLike[str],
        state_dir: str | os.PathLike[str],
        *,
        feature_gates: str = "",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.node_name = node_name
        self._argv = [
            os.fspath(binary),
            f"--kubeconfig={os.fspath(kubeconfig)}",
            f"--node-name={node_name}",
            f"--registrar-dir={os.fspath(registrar_dir)}",
            f"--state-dir={os.fspath(state_dir)}",
            f"--feature-gates={feature_gates}",
            "--output=-",
            *extra_args,
        ]
        self._proc: subprocess.Popen[str] | None = None
        self._events: list[HarnessEvent] = []
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._changed = threading.Condition()
        self._stdout_closed = False
        self._readers: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------

    def start(self, ready_timeout: float = 60.0) -> None:
        """Start the process and wait for its ``ready`` event. Must not be running."""
        if self._proc is not None:
            raise RuntimeError(f"kubelet harness for node {self.node_name} is already running")
        self._events.clear()
        self._stdout_closed = False
        self._proc = subprocess.Popen(
            self._argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_events, args=(self._proc.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._proc.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            self.wait_for("ready", timeout=ready_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> int | None:
        """Stop the process (SIGTERM, then SIGKILL) and return its exit code. Idempotent."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=STOP_GRACE_SECONDS)
        # The readers have seen EOF: close the pipes so the process object leaves no open
        # files behind. A reader still alive (a grandchild keeps the pipe open) owns its
        # stream; closing it under the reader would raise in that thread.
        for reader, stream in zip(self._readers, (proc.stdout, proc.stderr), strict=True):
            if stream is not None and not reader.is_alive():
                stream.close()
        self._proc = None
        return proc.returncode

    # -- events ----------------------------------------------------------

    @property
    def events(self) -> list[HarnessEvent]:
        """A copy of every event received so far, oldest first."""
        with self._changed:
            return list(self._events)

    def mark(self) -> int:
        """The number of events so far; pass it as ``since`` to wait only for newer ones."""
        with self._changed:
            return len(self._events)

    def wait_for(
        self,
        event: str,
        pod: str | None = None,
        timeout: float = 60.0,
        since: int = 0,
        where: Callable[[HarnessEvent], bool] | None = None,
        **fields: Any,
    ) -> HarnessEvent:
        """Return the first event named ``event`` (at index >= ``since``) that matches.

        ``pod`` is "namespace/name"; every keyword in ``fields`` must equal the
        event's field of that name (e.g. ``driver="gpu.example.com"``), and
        ``where``, if given, must return True for it.
        Raises HarnessError, with the events seen and the end of stderr, if
        the process exits or ``timeout`` seconds pass first.
        """
        wanted = {"event": event, **fields}
        if pod is not None:
            wanted["pod"] = pod

        def match() -> HarnessEvent | None:
            for ev in self._events[since:]:
                if all(ev.get(k) == v for k, v in wanted.items()) and (where is None or where(ev)):
                    return ev
            return None

        with self._changed:
            found = self._changed.wait_for(
                lambda: match() is not None or self._stdout_closed, timeout=timeout
            )
            result = match()
        if result is not None:
            return result
        why = "exited" if found else f"sent no such event within {timeout:g}s"
        raise HarnessError(
            f"kubelet harness for node {self.node_name} {why}; wanted {wanted}\n{self.describe()}"
        )

    def describe(self) -> str:
        """The events seen and the end of stderr, for a failure message."""
        with self._changed:
            events = "\n".join(json.dumps(ev) for ev in self._events) or "(none)"
            stderr = "".join(self._stderr) or "(empty)"
        code = self._proc.poll() if self._proc is not None else None
        return (
            f"exit code: {code}\nevents:\n{events}\n"
            f"stderr (last {STDERR_TAIL_LINES} lines):\n{stderr}"
        )

    def _read_events(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                ev = {"event": "unparsable-output", "line": line.rstrip("\n")}
            with self._changed:
                self._events.append(ev)
                self._changed.notify_all()
        with self._changed:
            self._stdout_closed = True
            self._changed.notify_all()

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self._stderr.append(line)
