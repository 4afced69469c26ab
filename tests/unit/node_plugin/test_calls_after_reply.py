"""DriverCalls writes a call's closing log line after the reply; metrics count before it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import pytest
from fake_core import FakeCore

from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.service.calls import DriverCalls
from drakit.plugin import ClaimRef

CLAIM = ClaimRef("default", "uid-1", "claim-uid-1")


def call_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "drakit.node_plugin.service.calls"]


@pytest.fixture
def calls() -> Iterator[tuple[DriverCalls, PluginMetrics]]:
    metrics = PluginMetrics()
    driver_calls = DriverCalls(FakeCore(), contextlib.nullcontext(), metrics)
    yield driver_calls, metrics
    driver_calls.close()


def claims_counted(metrics: PluginMetrics, operation: str) -> float | None:
    return metrics.registry.get_sample_value(
        "drakit_node_plugin_claims_total", {"operation": operation, "result": "success"}
    )


@pytest.mark.parametrize("operation", ["prepare", "unprepare"])
def test_closing_line_waits_for_the_after_reply_hook_and_metrics_do_not(
    calls: tuple[DriverCalls, PluginMetrics], caplog: pytest.LogCaptureFixture, operation: str
) -> None:
    driver_calls, metrics = calls
    deferred: list[Callable[[], None]] = []

    def after_reply(report: Callable[[], None]) -> bool:
        deferred.append(report)
        return True

    with caplog.at_level(logging.INFO, logger="drakit.node_plugin.service.calls"):
        getattr(driver_calls, operation)([CLAIM], "v1", after_reply=after_reply)
        assert call_lines(caplog) == []
        assert claims_counted(metrics, operation) == 1
        deferred.pop()()
        assert call_lines(caplog) == ["Call finished"]


def test_closing_line_is_written_at_once_when_the_reply_hook_refuses(
    calls: tuple[DriverCalls, PluginMetrics], caplog: pytest.LogCaptureFixture
) -> None:
    driver_calls, _ = calls
    with caplog.at_level(logging.INFO, logger="drakit.node_plugin.service.calls"):
        driver_calls.prepare([CLAIM], "v1", after_reply=lambda _report: False)
        assert call_lines(caplog) == ["Call finished"]
