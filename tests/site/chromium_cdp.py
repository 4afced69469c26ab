"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No WebDriver and no websocket library: Chromium reads commands from file descriptor 3 and
writes answers and events to descriptor 4, each message one JSON document ended by a NUL
byte. :class:`Browser` opens one page and offers what the site test needs: navigate and wait
for the load event, evaluate an expression, take a screenshot, and the page's JavaScript
exceptions and console errors.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

Obj = dict[str, Any]
#: How long one command may take; a page of this site loads in well under a second.
COMMAND_TIMEOUT = 60.0


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium`` package), if any."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, or went away."""


class Browser:
    """One headless Chromium with one page, for the duration of a ``with`` block."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="drakit-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            binary, "--headless=new", "--remote-debugging-pipe", "--no-first-run",
            "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
            "--disable-background-networking", "--disable-sync", "--mute-audio",
            f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}",
            # As root (CI) Chromium refuses to start with its sandbox; the pages are ours.
            *(["--no-sandbox"] if os.geteuid() == 0 else []),
            "about:blank",
        ]  # fmt: skip

        def wire_pipes() -> None:  # in the child: the pipe ends become descriptors 3 and 4
            high_r, high_w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, pass_fds=(3, 4),
            # Chromium wants the pipe on descriptors 3 and 4 exactly: only a function run in
            # the child can put them there. It calls nothing but os.dup/dup2 (fork-safe).
            preexec_fn=wire_pipes,  # noqa: PLW1509
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[Obj] = []
        self.session = ""

    # ----------------------------------------------------------------- protocol

    def _send(self, method: str, params: Obj | None = None, session: str = "") -> Obj:
        """Sends one command and returns its result, keeping the events that arrive meanwhile."""
        self._next_id += 1
        message: Obj = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: Obj = answer.get("result", {})
                return result
            self._events.append(answer)

    def _read(self, deadline: float) -> Obj:
        """The next message from Chromium."""
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError(f"no answer from Chromium within {COMMAND_TIMEOUT:.0f} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium exited (code {self._process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        decoded: Obj = json.loads(message)
        return decoded

    def command(self, method: str, params: Obj | None = None) -> Obj:
        """A command to the page's session."""
        return self._send(method, params, self.session)

    def wait_for(self, matches: Callable[[Obj], bool]) -> Obj:
        """The first event (kept or new) that ``matches``."""
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while True:
            for i, event in enumerate(self._events):
                if matches(event):
                    return self._events.pop(i)
            self._events.append(self._read(deadline))

    # ----------------------------------------------------------------- page

    def __enter__(self) -> Self:
        target = self._send("Target.createTarget", {"url": "about:blank"})
        attached = self._send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.command(f"{domain}.enable")
        return self

    def open(self, url: str) -> None:
        """Navigates to ``url`` and returns once its load event has fired."""
        self._events.clear()
        self.command("Page.navigate", {"url": url})
        self.wait_for(
            lambda e: (
                e.get("method") == "Page.loadEventFired" and e.get("sessionId") == self.session
            )
        )

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (promises awaited)."""
        answer = self.command(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:60]}...: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def page_errors(self) -> list[str]:
        """JavaScript exceptions and console or log errors of the page since it was opened."""
        errors = []
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                thrown = details.get("exception", {}).get("description", "")
                errors.append(f"{details.get('text')} {thrown}".strip())
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")
        return errors

    def screenshot(self, path: Path) -> None:
        """The whole page, as a PNG file."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.command(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": min(height, 6000), "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self.command("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        self.command("Emulation.clearDeviceMetricsOverride")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self._send("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()
