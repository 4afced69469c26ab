"""A stopped plugin leaves no gRPC worker thread behind: gRPC does not shut down the
executor it is given, and a plugin stopped inside a program that goes on (an embedding
driver, a test) would otherwise keep one idle thread per worker that ever served a call."""

from __future__ import annotations

import threading

from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.waiting import eventually
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc


def grpc_workers() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("grpc"))


def test_stopping_ends_the_worker_threads_that_served_calls_on_both_sockets(
    start_plugin: PluginFactory,
) -> None:
    before = grpc_workers()
    plugin, _ = start_plugin()
    with channel_to(plugin.sockets.registration) as channel:
        reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=5)
    with channel_to(plugin.sockets.dra) as channel:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert len(grpc_workers()) >= len(before) + 2  # one worker per server served a call

    plugin.stop(grace=1)
    eventually(lambda: grpc_workers() == before, "the servers' worker threads to end", 30)
