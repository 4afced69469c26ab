"""Events of a ``kubelet-harness`` run, read from the JSON-lines file it appends to.

The harness prints one JSON object per line (``ready``, ``registered``,
``prepared``, ``unprepared``, ...; see hack/kubelet-harness/README.md). The
demo sends them to a file so they never mix with what it prints; this reads
the file as it grows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from drakit.localcluster.process import ManagedProcess, StartError

HarnessEvent = dict[str, Any]


class HarnessEvents:
    """The events in ``path`` so far; :meth:`wait` for the one you need."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._events: list[HarnessEvent] = []
        self._offset = 0
        self._partial = ""

    def _read(self) -> None:
        try:
            with self.path.open() as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except FileNotFoundError:
            return
        *lines, self._partial = (self._partial + chunk).split("\n")
        for line in lines:
            if line.strip():
                try:
                    self._events.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # not an event (never expected): ignore rather than stop the demo

    def mark(self) -> int:
        """The number of events so far; pass it as ``since`` to wait only for newer ones."""
        self._read()
        return len(self._events)

    def since(self, index: int) -> list[HarnessEvent]:
        """The events from ``index`` on (read now), oldest first."""
        self._read()
        return self._events[index:]

    def wait(
        self,
        event: str,
        *,
        timeout: float,
        process: ManagedProcess | None = None,
        since: int = 0,
        **fields: Any,
    ) -> HarnessEvent:
        """The first event named ``event`` (index >= ``since``) whose fields match.

        ``pod`` is "namespace/name". Raises StartError after ``timeout``
        seconds, or when ``process`` (the component being waited on) exits;
        a ``prepare-failed`` event for the same pod is quoted in the message.
        """
        wanted = {"event": event, **fields}
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            for ev in self._events[since:]:
                if all(ev.get(k) == v for k, v in wanted.items()):
                    return ev
            if process is not None and not process.running():
                raise StartError(
                    f"{process.name} exited; last log lines ({process.log_path}):\n"
                    f"{process.log_tail(10)}"
                )
            if time.monotonic() > deadline:
                raise StartError(
                    f"the kubelet reported no {event!r} within {timeout:g}s{self._why(fields)}"
                )
            time.sleep(0.1)

    def _why(self, fields: dict[str, Any]) -> str:
        pod = fields.get("pod")
        failed = [e for e in self._events if e.get("pod") == pod and "error" in e] if pod else []
        return f" (last error: {failed[-1]['error']})" if failed else ""
