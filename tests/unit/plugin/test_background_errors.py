"""BackgroundError and the default error handler of KubeletPlugin."""

from __future__ import annotations

import logging

import pytest

from drakit.plugin import BackgroundError, log_background_error
from drakit.plugin.running import _guarded


def test_a_background_error_says_what_failed_and_keeps_its_cause() -> None:
    cause = ConnectionRefusedError("apiserver down")
    error = BackgroundError("publish ResourceSlices", cause)
    assert str(error) == "publish ResourceSlices: apiserver down"
    assert (error.what, error.cause, error.__cause__) == ("publish ResourceSlices", cause, cause)
    assert error.recoverable is True


@pytest.mark.parametrize(("recoverable", "level"), [(True, "WARNING"), (False, "ERROR")])
def test_the_default_handler_logs_one_line_a_warning_or_an_error(
    caplog: pytest.LogCaptureFixture, recoverable: bool, level: str
) -> None:
    caplog.set_level(logging.INFO, logger="drakit.plugin")
    cause = TimeoutError("no answer")
    error = BackgroundError("watch ResourceSlices", cause, recoverable=recoverable)
    log_background_error(error)
    (record,) = caplog.records
    assert (record.levelname, record.getMessage()) == (level, "Background failure")
    assert record.__dict__["what"] == "watch ResourceSlices"
    assert record.__dict__["error"] == "TimeoutError: no answer"
    assert record.__dict__["recoverable"] is recoverable


def test_a_handler_that_raises_is_logged_and_does_not_reach_the_thread_that_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(_error: BackgroundError) -> None:
        raise RuntimeError("handler bug")

    report = _guarded(broken)
    report(BackgroundError("publish ResourceSlices", OSError("x")))  # does not raise
    assert any(r.getMessage() == "The error handler failed" for r in caplog.records)
