"""NodePlugin.started_up: the point the run loop hands start-up's freed memory back."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from fake_core import FakeCore
from plugin_harness import make_config

from drakit.node_plugin import wiring
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.driver import PluginConfig
from drakit.node_plugin.metrics import PluginMetrics


class _ReadyLater:
    """A service that reports readiness like the publisher (``wait_ready``)."""

    def __init__(self) -> None:
        self.ready = threading.Event()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self.ready.wait(timeout)


class _NoReadiness:
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def test_plugin_is_started_up_once_every_service_that_reports_readiness_is_ready(
    short_tmp: Path,
) -> None:
    publisher_like = _ReadyLater()

    def build(_config: PluginConfig, _metrics: PluginMetrics) -> wiring.Parts:
        return wiring.Parts(
            FakeCore(), contextlib.nullcontext(), services=(_NoReadiness(), publisher_like)
        )

    plugin = NodePlugin(make_config(short_tmp), build=build)
    assert plugin.started_up() is False  # not started
    plugin.start()
    try:
        assert plugin.started_up() is False  # the publisher-like service is not ready yet
        publisher_like.ready.set()
        assert plugin.started_up() is True
    finally:
        plugin.stop(grace=0)
