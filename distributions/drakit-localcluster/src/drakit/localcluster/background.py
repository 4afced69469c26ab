"""``up`` / ``run`` / ``down`` for long-running local launchers (cluster, node).

``up DIR`` starts ``run DIR`` as a detached process and returns once it has
written ``DIR/ready`` (or failed, writing ``DIR/error``); ``down DIR`` sends
SIGTERM to the process named in ``DIR/launcher.pid`` and waits for it, so the
launcher's own clean-up runs. ``run_until_signalled`` is the body of ``run``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

PID_FILE = "launcher.pid"
READY_FILE = "ready"
ERROR_FILE = "error"
RUN_HELP = "start in the foreground and stop on Ctrl-C or SIGTERM"

Action = Callable[[argparse.Namespace], int]


def add_launcher_actions(
    command: argparse.ArgumentParser,
    *,
    up_help: str,
    down_help: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    up: Action,
    run: Action,
    down: Action,
) -> None:
    """Give a launcher command its ``up``, ``run`` and ``down`` actions.

    ``add_arguments`` adds what ``up`` and ``run`` both take (``up`` passes it on to the
    ``run`` it starts), the ``dir`` positional first; ``down`` takes only ``dir``.
    """
    actions = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_text, func in (("up", up_help, up), ("run", RUN_HELP, run)):
        action = actions.add_parser(name, help=help_text, description=help_text)
        add_arguments(action)
        action.set_defaults(func=func)
    stop = actions.add_parser("down", help=down_help)
    stop.add_argument("dir", type=Path)
    stop.set_defaults(func=down)


def start_detached(folder: Path, argv: list[str], what: str, on_ready: Callable[[], None]) -> int:
    """Start ``argv`` detached; return 0 once ``folder/ready`` exists, 1 if it fails first."""
    folder.mkdir(parents=True, exist_ok=True)
    if running_pid(folder) is not None:
        print(f"drakit {what}: already running in {folder}", file=sys.stderr)
        return 1
    for stale in (READY_FILE, ERROR_FILE):
        (folder / stale).unlink(missing_ok=True)
    with (folder / "launcher.log").open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (folder / PID_FILE).write_text(str(proc.pid))
    while proc.poll() is None:
        if (folder / READY_FILE).exists():
            on_ready()
            return 0
        time.sleep(0.2)
    error = folder / ERROR_FILE
    reason = error.read_text() if error.exists() else f"see {folder / 'launcher.log'}"
    print(f"drakit {what}: failed to start: {reason}", file=sys.stderr)
    return 1


def running_pid(folder: Path) -> int | None:
    """The pid in ``folder/launcher.pid`` if that process still runs."""
    try:
        pid = int((folder / PID_FILE).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def stop_detached(folder: Path, what: str, timeout: float = 60) -> int:
    """SIGTERM the launcher in ``folder`` and wait for its clean-up (SIGKILL after ``timeout``)."""
    pid = running_pid(folder)
    if pid is None:
        print(f"drakit {what}: nothing running in {folder}")
        (folder / PID_FILE).unlink(missing_ok=True)
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running_pid(folder) is not None:
        time.sleep(0.2)
    if running_pid(folder) is not None:
        os.kill(pid, signal.SIGKILL)
    (folder / PID_FILE).unlink(missing_ok=True)
    print(f"stopped the {what} in {folder}")
    return 0


def run_until_signalled(
    folder: Path,
    what: str,
    start: Callable[[], str],
    stop: Callable[[], None],
    errors: tuple[type[BaseException], ...],
) -> int:
    """Run ``start`` (it returns ``folder/ready``'s text), wait for SIGTERM or Ctrl-C, ``stop``."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (READY_FILE, ERROR_FILE):
        (folder / stale).unlink(missing_ok=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        ready_text = start()
    except errors as err:
        (folder / ERROR_FILE).write_text(str(err))
        print(f"drakit {what}: {err}", file=sys.stderr)
        return 1
    try:
        (folder / READY_FILE).write_text(ready_text)
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop()
        (folder / READY_FILE).unlink(missing_ok=True)
    return 0
