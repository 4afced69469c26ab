"""The real core behind the kubelet-facing sockets: v1, v1beta1, two instances, health, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from claims import DRIVER, NODE, claims_resource, create_claim, make_config, result
from conftest import EXAMPLE_CONFIG, RecordingEvents
from helpers.waiting import eventually

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import Resource
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2 as v1beta1
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2 as health_v1
from drakit.kubeletapi.gen.dra_health.v1 import api_pb2_grpc as health_v1_grpc
from drakit.localcluster import LocalCluster
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.backend_loader import load_backend
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin import ClaimRef, HealthStatus

pytestmark = pytest.mark.integration


@pytest.fixture
def short_root() -> Iterator[Path]:
    """A short directory: Unix socket paths must stay under 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="drk-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def plugins(api: RateLimitedApiClient, short_root: Path) -> Iterator[Any]:
    started: list[NodePlugin] = []

    def start(pod_uid: str | None = None, **backend_config: Any) -> NodePlugin:
        config = make_config(short_root, pod_uid=pod_uid, health_resend_seconds=30)
        backend = load_backend(
            "example", driver_name=DRIVER, node_name=NODE, config=backend_config or EXAMPLE_CONFIG
        )
        metrics = PluginMetrics()
        core = PrepareCore(
            config, metrics, backend, claims_resource(api), events=RecordingEvents(),
            boot_id=lambda: "boot-1",
        )  # fmt: skip
        plugin = NodePlugin(config, core=core, metrics=metrics)
        plugin.start()
        started.append(plugin)
        return plugin

    yield start
    for plugin in started:
        plugin.stop(grace=1)


def v1_claim(ref: ClaimRef) -> v1.Claim:
    return v1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)


def test_v1_and_v1beta1_prepare_over_the_socket_return_the_same_prepared_devices(
    plugins: Any, claims: Resource, namespace: str
) -> None:
    plugin = plugins()
    ref = create_claim(
        claims, namespace, [result("gpu/small", "gpu-0")], subrequests={"gpu": ["small"]}
    )
    missing = ClaimRef(namespace, "7c1d0e2f-0000-4000-8000-000000000000", "gone")
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=[v1_claim(ref), v1_claim(missing)]), timeout=10
        )
        again = v1beta1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1beta1.NodePrepareResourcesRequest(
                claims=[v1beta1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)]
            ),
            timeout=10,
        )
        unprepared = v1_grpc.DRAPluginStub(channel).NodeUnprepareResources(
            v1.NodeUnprepareResourcesRequest(claims=[v1_claim(ref), v1_claim(missing)]), timeout=10
        )
    (device,) = response.claims[ref.uid].devices
    assert (list(device.request_names), device.pool_name, device.device_name) == (
        ["gpu"],
        NODE,
        "gpu-0",
    )
    assert list(device.cdi_device_ids) == [f"k8s.{DRIVER}/claim={ref.uid}-gpu-0"]
    assert "not found" in response.claims[missing.uid].error
    assert list(again.claims[ref.uid].devices[0].cdi_device_ids) == list(device.cdi_device_ids)
    assert {uid: r.error for uid, r in unprepared.claims.items()} == {ref.uid: "", missing.uid: ""}
    prepared = plugin.metrics.registry.get_sample_value("drakit_node_plugin_prepared_claims")
    assert prepared == 0


def test_two_plugin_instances_share_the_checkpoint_and_agree(
    plugins: Any, claims: Resource, namespace: str
) -> None:
    old = plugins(pod_uid="0f6b4c8e-1111-4d5e-9a7b-aaaaaaaaaaaa")
    new = plugins(pod_uid="0f6b4c8e-2222-4d5e-9a7b-bbbbbbbbbbbb")
    first = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    second = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    request = v1.NodePrepareResourcesRequest(claims=[v1_claim(first)])
    with grpc.insecure_channel(f"unix:{old.sockets.dra}") as channel:
        from_old = v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=10)
    with grpc.insecure_channel(f"unix:{new.sockets.dra}") as channel:
        stub = v1_grpc.DRAPluginStub(channel)
        from_new = stub.NodePrepareResources(request, timeout=10)
        conflict = stub.NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=[v1_claim(second)]), timeout=10
        )
    assert from_old.claims[first.uid] == from_new.claims[first.uid]
    assert "allocated exclusively" in conflict.claims[second.uid].error


def test_health_stream_reports_backend_health_and_its_changes(plugins: Any) -> None:
    plugin = plugins(gpus=2)
    backend = plugin.core.backend
    assert isinstance(backend, ExampleBackend)
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        stream = health_v1_grpc.DRAResourceHealthStub(channel).NodeWatchResources(
            health_v1.NodeWatchResourcesRequest(), timeout=30
        )
        full = next(stream)
        assert {d.device.device_name for d in full.devices} == {"gpu-0", "gpu-1"}
        backend.set_health("gpu-1", HealthStatus.UNHEALTHY)
        change = next(stream)
        stream.cancel()
    assert [(d.device.device_name, d.health) for d in change.devices] == [
        ("gpu-1", health_v1.HealthStatus.UNHEALTHY)
    ]


def test_drakit_node_plugin_with_example_backend_prepares_a_claim(
    cluster: LocalCluster, claims: Resource, namespace: str, short_root: Path
) -> None:
    backend_config = short_root / "example.yaml"
    backend_config.write_text("gpus: 2\nmodel: TEST-GPU\n")
    env = {k: v for k, v in os.environ.items() if k not in ("POD_UID",)}
    process = subprocess.Popen(
        [
            sys.executable, "-m", "drakit.cli", "node-plugin",
            "--driver-name", DRIVER, "--node-name", NODE, "--kubeconfig", cluster.kubeconfig,
            "--kubelet-registrar-dir", str(short_root / "registry"),
            "--kubelet-plugins-dir", str(short_root / "plugins"),
            "--cdi-root", str(short_root / "cdi"),
            "--backend", "example", "--backend-config", str(backend_config),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        ref = prepare_one_when_served(
            process,
            short_root / "plugins" / DRIVER / "dra.sock",
            lambda: process.stderr.read() if process.stderr else "",
            create_claim(claims, namespace, [result("gpu", "gpu-1")]),
        )
        spec = json.loads((short_root / "cdi" / f"k8s.{DRIVER}-claim_{ref.uid}.json").read_text())
        assert spec["devices"][0]["name"] == f"{ref.uid}-gpu-1"
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)  # also closes the stderr pipe
    assert process.returncode == 0


def prepare_one_when_served(
    process: subprocess.Popen[Any], socket: Path, output: Callable[[], str], ref: ClaimRef
) -> ClaimRef:
    """Wait for the plugin's DRA socket, then prepare ``ref`` through it successfully."""

    def served() -> bool:
        if socket.exists():
            return True
        assert process.poll() is None, output()
        return False

    eventually(served, lambda: f"the plugin's DRA socket {socket}; output:\n{output()}", 60)
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=[v1_claim(ref)]), timeout=30
        )
    assert response.claims[ref.uid].error == ""
    return ref


# Runs ``drakit node-plugin`` as the DaemonSet does, and writes the modules it loaded when it
# exits (after SIGTERM, atexit runs as the process ends normally).
_MODULES_AT_EXIT = """
import atexit, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "drakit"
runpy.run_module("drakit.cli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("metrics_address", [None, "127.0.0.1:0"])
def test_running_plugin_loads_prometheus_client_only_to_serve_metrics_and_no_yaml_for_json(
    cluster: LocalCluster,
    claims: Resource,
    namespace: str,
    short_root: Path,
    metrics_address: str | None,
) -> None:
    backend_config = short_root / "example.json"
    backend_config.write_text(json.dumps({"gpus": 2}))
    assert json.loads(Path(cluster.kubeconfig).read_text())["kind"] == "Config"  # JSON, no YAML
    modules = short_root / "modules.txt"
    metrics_flags = ["--metrics-address", metrics_address] if metrics_address else []
    with (short_root / "plugin.log").open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-c", _MODULES_AT_EXIT, str(modules), "node-plugin",
                "--driver-name", DRIVER, "--node-name", NODE, "--kubeconfig", cluster.kubeconfig,
                "--kubelet-registrar-dir", str(short_root / "registry"),
                "--kubelet-plugins-dir", str(short_root / "plugins"),
                "--cdi-root", str(short_root / "cdi"),
                "--backend", "example", "--backend-config", str(backend_config), *metrics_flags,
            ],
            stderr=log,
        )  # fmt: skip
    try:
        prepare_one_when_served(
            process,
            short_root / "plugins" / DRIVER / "dra.sock",
            (short_root / "plugin.log").read_text,
            create_claim(claims, namespace, [result("gpu", "gpu-0")]),
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert process.returncode == 0
    loaded = set(modules.read_text().split())
    assert "drakit.node_plugin.core" in loaded  # the probe saw the real plugin
    assert ("prometheus_client" in loaded) == (metrics_address is not None)
    assert "yaml" not in loaded
