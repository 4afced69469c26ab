"""Waiting for a condition without asserting how long it took."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["eventually"]


def eventually(
    check: Callable[[], Any],
    what: str | Callable[[], str] = "",
    timeout: float = 120.0,
    *,
    interval: float = 0.1,
) -> Any:
    """Poll ``check`` until it returns something truthy, and return that.

    Fails the test naming ``what`` (or ``check``) once ``timeout`` seconds have passed;
    ``what`` may be a function, called then, to say what was seen instead (a log's tail, the
    last answer). The timeout only keeps a broken test from hanging; nothing asserts how long
    it took. A ``check`` may itself fail the test at once (``assert process.poll() is None``)
    when waiting longer is pointless.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout:g}s waiting for {said or check}")
        time.sleep(interval)
