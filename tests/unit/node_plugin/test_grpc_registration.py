"""Registration handshake, gRPC health, and socket life cycle on real Unix sockets."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import grpc
import pytest
from fake_core import FakeCore
from grpc_health.v1 import health_pb2, health_pb2_grpc
from plugin_harness import DRIVER, PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2 as health_v1
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2_grpc as health_v1_grpc
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from drakit.node_plugin.sockets import SocketPathError

# What a 1.37 kubelet understands, per service kind (its own preference list).
KUBELET_DRA_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")


def kubelet_handshake(registration_socket: Path) -> tuple[reg.PluginInfo, str]:
    """Do what the kubelet's plugin manager does: GetInfo within 1 s, pick a version.

    The kubelet walks the plugin's list in the plugin's order and takes the
    first service it supports.
    """
    with channel_to(registration_socket) as channel:
        info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=1)
    chosen = next(v for v in info.supported_versions if v in KUBELET_DRA_VERSIONS)
    return info, chosen


def notify(registration_socket: Path, registered: bool, error: str = "") -> None:
    with channel_to(registration_socket) as channel:
        reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=registered, error=error), timeout=5
        )


def health_status(plugin, service: str) -> int:  # type: ignore[no-untyped-def]
    with channel_to(plugin.sockets.dra) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def test_kubelet_handshake_gets_v1_and_the_dra_endpoint_serves_it(
    start_plugin: PluginFactory,
) -> None:
    plugin, _ = start_plugin()
    info, chosen = kubelet_handshake(plugin.sockets.registration)
    assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, str(plugin.sockets.dra))
    assert list(info.supported_versions) == [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
    ]
    assert chosen == "v1.DRAPlugin"
    with channel_to(Path(info.endpoint)) as channel:
        response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="n", uid="u", name="c")]),
            timeout=5,
        )
    assert response.claims["u"].error == ""


def test_sockets_have_the_go_helper_default_names(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    assert plugin.sockets.registration.name == f"{DRIVER}-reg.sock"
    assert plugin.sockets.dra == plugin.config.plugins_dir / DRIVER / "dra.sock"


def test_without_health_support_only_dra_versions_are_advertised_and_health_is_unimplemented(
    start_plugin: PluginFactory,
) -> None:
    plugin, _ = start_plugin(FakeCore(health=False))
    info, _ = kubelet_handshake(plugin.sockets.registration)
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    with channel_to(plugin.sockets.dra) as channel:
        stream = health_v1_grpc.DRAResourceHealthStub(channel).NodeWatchResources(
            health_v1.NodeWatchResourcesRequest(), timeout=5
        )
        with pytest.raises(grpc.RpcError) as err:
            next(stream)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_successful_registration_sets_metric_and_health(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    service = "pluginregistration.Registration"
    assert health_status(plugin, service) == health_pb2.HealthCheckResponse.UNKNOWN
    notify(plugin.sockets.registration, True)
    assert plugin.metrics.registry.get_sample_value("drakit_node_plugin_registered") == 1
    assert health_status(plugin, service) == health_pb2.HealthCheckResponse.SERVING


def test_rejected_registration_is_logged_with_its_error_and_reflected_in_metrics_and_health(
    start_plugin: PluginFactory, caplog: pytest.LogCaptureFixture
) -> None:
    plugin, _ = start_plugin()
    notify(plugin.sockets.registration, True)
    notify(plugin.sockets.registration, False, "no supported DRA service versions")
    registry = plugin.metrics.registry
    assert registry.get_sample_value("drakit_node_plugin_registered") == 0
    assert (
        registry.get_sample_value(
            "drakit_node_plugin_registration_status_total", {"result": "failed"}
        )
        == 1
    )
    assert (
        health_status(plugin, "pluginregistration.Registration")
        == health_pb2.HealthCheckResponse.NOT_SERVING
    )
    rejected = [
        r for r in caplog.records if r.getMessage() == "Kubelet rejected the plugin registration"
    ]
    assert rejected[0].error == "no supported DRA service versions"  # type: ignore[attr-defined]
    # The plugin keeps serving: the kubelet retries registration.
    assert health_status(plugin, "") == health_pb2.HealthCheckResponse.SERVING


def test_grpc_health_reports_every_dra_service_serving(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    for service in ("", "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", "v1alpha1.DRAResourceHealth"):
        assert health_status(plugin, service) == health_pb2.HealthCheckResponse.SERVING


def _leave_stale_socket(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the file stays behind, nobody listens: a crashed plugin's leftover


def test_stale_sockets_are_removed_before_binding(
    start_plugin: PluginFactory, short_tmp: Path
) -> None:
    registration = short_tmp / "registry" / f"{DRIVER}-reg.sock"
    dra = short_tmp / "plugins" / DRIVER / "dra.sock"
    _leave_stale_socket(registration)
    _leave_stale_socket(dra)
    start_plugin()
    info, _ = kubelet_handshake(registration)
    assert info.endpoint == str(dra)


def test_a_regular_file_at_the_socket_path_is_not_deleted(
    start_plugin: PluginFactory, short_tmp: Path
) -> None:
    registration = short_tmp / "registry" / f"{DRIVER}-reg.sock"
    registration.parent.mkdir(parents=True)
    registration.write_text("precious")
    with pytest.raises(SocketPathError, match="not a Unix socket"):
        start_plugin()
    assert registration.read_text() == "precious"
    # The DRA socket that was already up is gone again.
    assert not (short_tmp / "plugins" / DRIVER / "dra.sock").exists()


def test_stop_removes_both_sockets(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin()
    plugin.stop(grace=1)
    assert not plugin.sockets.registration.exists()
    assert not plugin.sockets.dra.exists()
    assert core.stopped


def test_stop_lets_an_in_flight_prepare_finish(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.hold = threading.Event()
    plugin, _ = start_plugin(core)
    results: list[v1.NodePrepareResourcesResponse] = []
    channel = channel_to(plugin.sockets.dra)
    request = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="n", uid="u", name="c")])
    caller = threading.Thread(
        target=lambda: results.append(
            v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=30)
        )
    )
    caller.start()
    assert core.entered.wait(timeout=10)
    stopper = threading.Thread(target=plugin.stop, kwargs={"grace": 20})
    stopper.start()
    core.hold.set()
    caller.join(timeout=30)
    stopper.join(timeout=30)
    assert results[0].claims["u"].error == ""
    assert not plugin.sockets.dra.exists()


def test_stopping_an_old_instance_keeps_the_sockets_of_its_successor(
    start_plugin: PluginFactory,
) -> None:
    old, _ = start_plugin()
    new, _ = start_plugin()  # same fixed socket names: replaces the old files
    old.stop(grace=1)
    info, _ = kubelet_handshake(new.sockets.registration)
    assert info.endpoint == str(new.sockets.dra)
    assert new.sockets.dra.exists()
