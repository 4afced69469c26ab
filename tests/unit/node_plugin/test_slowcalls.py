"""A call still running after a while gets one warning naming its claims; others none."""

from __future__ import annotations

import logging
import threading

import pytest
from fake_core import FakeCore
from helpers.waiting import eventually
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.service.slowcalls import SlowCalls
from drakit.telemetry.logs import get_logger

LOG = get_logger("drakit.node_plugin.service.calls").bind(
    request_id="r1", method="NodePrepareResources"
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def still_running(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "Call still running"]


def test_a_call_past_the_limit_is_reported_once_with_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    calls = SlowCalls(10.0, clock=clock)
    calls.started("r1", LOG, claims=["ns/a:u1"])
    with caplog.at_level(logging.WARNING):
        clock.now += 9.9
        assert calls.report_slow() == 0
        clock.now += 0.2
        assert calls.report_slow() == 1
        clock.now += 30
        assert calls.report_slow() == 0  # once
    (record,) = still_running(caplog)
    assert record.claims == ["ns/a:u1"]  # type: ignore[attr-defined]
    assert record.request_id == "r1"  # type: ignore[attr-defined]
    assert record.running_seconds == 10.1  # type: ignore[attr-defined]
    calls.close()


def test_a_call_that_finished_in_time_is_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    calls = SlowCalls(10.0, clock=clock)
    calls.started("r1", LOG, claims=["ns/a:u1"])
    clock.now += 5
    calls.finished("r1")
    clock.now += 60
    with caplog.at_level(logging.WARNING):
        assert calls.report_slow() == 0
    assert still_running(caplog) == []
    calls.close()


def test_the_watching_thread_reports_a_hanging_call_on_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = SlowCalls(0.2, check_every=0.05)
    with caplog.at_level(logging.WARNING):
        calls.started("r1", LOG, claims=["ns/a:u1"])
        eventually(lambda: still_running(caplog), "a line for the hanging call", 10, interval=0.02)
    watcher = calls._thread
    calls.close()
    assert watcher is not None and not watcher.is_alive()


def test_a_plugin_call_that_hangs_is_logged_while_it_hangs(
    start_plugin: PluginFactory, caplog: pytest.LogCaptureFixture
) -> None:
    core = FakeCore()
    core.hold = threading.Event()
    plugin, _ = start_plugin(core)
    assert plugin._calls is not None  # the servicer's watcher, made quick below
    plugin._calls._slow.slow_after = 0.2
    with channel_to(plugin.sockets.dra) as channel, caplog.at_level(logging.WARNING):
        stub = v1_grpc.DRAPluginStub(channel)
        claim = v1.Claim(namespace="default", uid="uid-1", name="claim-1")
        call = stub.NodePrepareResources.future(
            v1.NodePrepareResourcesRequest(claims=[claim]), timeout=30
        )
        eventually(lambda: still_running(caplog), "a line for the hanging call", 10, interval=0.02)
        core.hold.set()
        assert call.result().claims["uid-1"].error == ""
    (record,) = still_running(caplog)
    assert record.claims == ["default/claim-1:uid-1"]  # type: ignore[attr-defined]
