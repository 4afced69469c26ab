"""NodeWatchResources streams (v1 and v1alpha1) on a real Unix socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fake_core import POOL, FakeCore
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.dra_health.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra_health.v1alpha1 import api_pb2 as v1alpha1
from drakit.kubeletapi.gen.dra_health.v1alpha1 import api_pb2_grpc as v1alpha1_grpc
from drakit.node_plugin.health_feed import HealthFeed
from drakit.node_plugin.service.health import resend_interval
from drakit.plugin import DeviceHealth, HealthStatus


def summary(response: Any) -> dict[str, tuple[int, str]]:
    return {d.device.device_name: (d.health, d.message) for d in response.devices}


def watch_v1(plugin) -> Iterator[v1.NodeWatchResourcesResponse]:  # type: ignore[no-untyped-def]
    stub = v1_grpc.DRAResourceHealthStub(channel_to(plugin.sockets.dra))
    return stub.NodeWatchResources(v1.NodeWatchResourcesRequest(), timeout=30)


def test_stream_sends_full_report_then_each_change(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin(health_resend_seconds=30)
    stream = watch_v1(plugin)
    first = next(stream)
    assert summary(first) == {"gpu-0": (v1.HEALTHY, ""), "gpu-1": (v1.HEALTHY, "")}
    assert {d.device.pool_name for d in first.devices} == {POOL}
    core.set_health("gpu-1", HealthStatus.UNHEALTHY, "ECC errors")
    assert summary(next(stream)) == {"gpu-1": (v1.UNHEALTHY, "ECC errors")}
    stream.cancel()


def test_stream_resends_the_full_report_when_nothing_changes(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin(health_resend_seconds=0.2)
    stream = watch_v1(plugin)
    first = next(stream)
    core.health["gpu-0"] = DeviceHealth(POOL, "gpu-0", HealthStatus.UNKNOWN, 0, message="quiet")
    resent = next(stream)  # no publish happened: this is the periodic full report
    assert set(summary(resent)) == set(summary(first)) == {"gpu-0", "gpu-1"}
    assert summary(resent)["gpu-0"] == (v1.UNKNOWN, "quiet")
    stream.cancel()


def test_v1alpha1_stream_carries_the_same_report(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin()
    stub = v1alpha1_grpc.DRAResourceHealthStub(channel_to(plugin.sockets.dra))
    stream = stub.NodeWatchResources(v1alpha1.NodeWatchResourcesRequest(), timeout=30)
    assert summary(next(stream)) == {"gpu-0": (1, ""), "gpu-1": (1, "")}
    core.set_health("gpu-0", HealthStatus.UNHEALTHY)
    assert summary(next(stream)) == {"gpu-0": (v1alpha1.UNHEALTHY, "")}
    stream.cancel()


def test_stopping_the_plugin_ends_open_streams(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin(FakeCore(), health_resend_seconds=30)
    stream = watch_v1(plugin)
    next(stream)
    plugin.stop(grace=5)
    assert list(stream) == []


def test_resend_interval_stays_within_half_the_shortest_device_timeout() -> None:
    devices = [
        DeviceHealth("p", "a", HealthStatus.HEALTHY, 0, health_check_timeout_seconds=10),
        DeviceHealth("p", "b", HealthStatus.HEALTHY, 0, health_check_timeout_seconds=0),
    ]
    assert resend_interval(devices, ceiling=20) == 5
    assert resend_interval(devices[1:], ceiling=20) == 20


def test_slow_subscriber_gets_the_latest_state_per_device_once() -> None:
    feed = HealthFeed()
    subscription = feed.subscribe()
    feed.publish([DeviceHealth("p", "a", HealthStatus.UNHEALTHY, 1)])
    feed.publish([DeviceHealth("p", "a", HealthStatus.HEALTHY, 2)])
    assert subscription.next_change(timeout=1) == [DeviceHealth("p", "a", HealthStatus.HEALTHY, 2)]
    feed.close()
    assert subscription.closed
    assert subscription.next_change(timeout=1) is None
