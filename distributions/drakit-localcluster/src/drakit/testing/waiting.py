"""Waiting for a condition without asserting how long it took: :func:`eventually`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["eventually"]


def eventually(
    check: Callable[[], Any],
    what: str | Callable[[], str] = "",
    timeout: float = 60.0,
    *,
    interval: float = 0.1,
) -> Any:
    """Call ``check`` until it returns something truthy, and return that.

    Fails the test naming ``what`` (text, or a function giving it at that moment: the last
    state seen, a log's end) once ``timeout`` seconds have passed. The timeout only keeps a
    broken test from hanging: nothing asserts how long it took. An exception from ``check``
    is not caught: it fails the test at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout:g}s waiting for {described or check}")
        time.sleep(interval)
