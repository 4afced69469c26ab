"""grpcurl (pinned in hack/tools/grpcurl) talks to the DRA socket through reflection.

These are the commands docs/node-plugin.md shows; if they break here they break for users.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from plugin_harness import PluginFactory

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def grpcurl() -> Path:
    if shutil.which("go") is None:
        pytest.skip("Go is needed to build grpcurl (hack/build-binaries.sh grpcurl)")
    result = subprocess.run(
        [str(ROOT / "hack" / "build-binaries.sh"), "grpcurl"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return Path(result.stdout.strip()) / "grpcurl"


def run(grpcurl: Path, *args: str) -> str:
    result = subprocess.run(
        [str(grpcurl), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_grpcurl_lists_the_services_on_the_dra_socket(
    grpcurl: Path, start_plugin: PluginFactory
) -> None:
    plugin, _ = start_plugin()
    services = run(grpcurl, "-plaintext", "-unix", str(plugin.sockets.dra), "list").split()
    assert set(services) >= {
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
        "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
        "grpc.health.v1.Health",
    }


def test_grpcurl_calls_node_prepare_resources_with_json(
    grpcurl: Path, start_plugin: PluginFactory
) -> None:
    plugin, _ = start_plugin()
    request = json.dumps(
        {"claims": [{"namespace": "default", "uid": "uid-1", "name": "gpu-claim"}]}
    )
    out = run(
        grpcurl,
        "-plaintext",
        "-unix",
        "-d",
        request,
        str(plugin.sockets.dra),
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
    )
    device = json.loads(out)["claims"]["uid-1"]["devices"][0]
    assert device["cdi_device_ids"] == ["k8s.gpu.example.com/gpu=uid-1-gpu"]
    assert device["request_names"] == ["gpu"]


def test_grpcurl_gets_plugin_info_from_the_registration_socket(
    grpcurl: Path, start_plugin: PluginFactory
) -> None:
    plugin, _ = start_plugin()
    out = run(
        grpcurl,
        "-plaintext",
        "-unix",
        str(plugin.sockets.registration),
        "pluginregistration.Registration/GetInfo",
    )
    info = json.loads(out)
    assert info["type"] == "DRAPlugin"
    assert info["supported_versions"][0] == "v1.DRAPlugin"
