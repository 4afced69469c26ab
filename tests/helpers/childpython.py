"""Running a few lines of Python in a fresh interpreter (what a process imports, gc state)."""

from __future__ import annotations

import subprocess
import sys

__all__ = ["python_output"]


def python_output(code: str) -> str:
    """The stdout of ``code`` run by a new interpreter; CalledProcessError when it fails.

    A child keeps the probe honest: the test process has long imported everything, and
    process-wide state (``gc.freeze``) must not leak into it.
    """
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
