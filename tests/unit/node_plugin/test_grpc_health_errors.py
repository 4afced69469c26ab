"""A health stream that fails (the backend's health report raised) ends with the error for
the kubelet, which opens a new one, and goes to the plugin's error hook."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fake_core import FakeCore
from plugin_harness import channel_to, make_config

from drakit.kubeletapi.gen.dra_health.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.app import NodePlugin
from drakit.plugin import BackgroundError, DeviceHealth


class BrokenHealthCore(FakeCore):
    def health_snapshot(self) -> list[DeviceHealth]:
        raise OSError("health sensor unreadable")


def test_a_failing_health_stream_ends_for_the_kubelet_and_goes_to_the_error_hook(
    short_tmp: Path,
) -> None:
    heard: list[BackgroundError] = []
    plugin = NodePlugin(make_config(short_tmp), core=BrokenHealthCore(), on_error=heard.append)
    plugin.start()
    try:
        stub = v1_grpc.DRAResourceHealthStub(channel_to(plugin.sockets.dra))
        stream = stub.NodeWatchResources(v1.NodeWatchResourcesRequest(), timeout=30)
        with pytest.raises(grpc.RpcError) as ended:
            next(stream)
        assert ended.value.code() == grpc.StatusCode.UNKNOWN  # type: ignore[attr-defined]
    finally:
        plugin.stop(grace=1)
    (error,) = heard
    assert (error.what, str(error.cause), error.recoverable) == (
        "stream device health to the kubelet",
        "health sensor unreadable",
        True,
    )
