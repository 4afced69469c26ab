"""The guide's embedding example (docs/examples/embedding.py, included in
docs/writing-a-driver.md) run as a driver vendor runs it: its own ``main`` in its own
process, configured through the environment as ``drakit node-plugin`` is, under the kubelet
harness and a real apiserver. It registers and publishes, serves a prepare, publishes a new
device on SIGHUP, logs a publish the apiserver refuses through its error handler, and stops
on SIGTERM with exit code 0, deregistered and with its sockets gone."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.plugin_access import PluginAccess, plugin_access
from helpers.waiting import eventually

from drakit.kubeapi.resources import RESOURCE_SLICES, Resource
from drakit.localcluster.stack import Component
from drakit.node_plugin.sockets import socket_paths
from drakit.testing import Allocated, HarnessNode, allocate, claim, pod

DRIVER = "npu.example.com"
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "embedding.py"


@pytest.fixture
def access(
    drakit_cluster: Any, drakit_api: Any, drakit_namespace: str, tmp_path: Path
) -> Iterator[PluginAccess]:
    granted = plugin_access(
        drakit_api.client, drakit_namespace, drakit_cluster.kubeconfig, tmp_path
    )
    yield granted
    granted.delete()


def published(api: Any, node: str) -> list[str]:
    listed = Resource(api, RESOURCE_SLICES).list(
        field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
    )
    return sorted(d["name"] for s in listed.items for d in s["spec"].get("devices") or ())


def test_the_embedding_example_serves_publishes_now_reports_a_refusal_and_stops_cleanly(
    drakit_api: Any,
    drakit_namespace: str,
    drakit_node: HarnessNode,
    access: PluginAccess,
    tmp_path: Path,
) -> None:
    node, folders = drakit_node.name, drakit_node.folders
    inventory = tmp_path / "npus"
    inventory.write_text("npu-0\n")
    environment = {
        **os.environ,
        "DRIVER_NAME": DRIVER,
        "NODE_NAME": node,
        "KUBECONFIG": str(access.kubeconfig),
        "KUBELET_REGISTRAR_DIRECTORY_PATH": str(folders.registrar),
        "KUBELET_PLUGINS_DIRECTORY_PATH": str(folders.plugins),
        "CDI_ROOT": str(folders.cdi),
        "NPU_INVENTORY": str(inventory),
    }
    driver = Component("npu-driver", [sys.executable, str(EXAMPLE)], tmp_path / "npu-driver.log")
    since = drakit_node.events.mark()
    driver.start(env=environment)
    try:
        drakit_node.events.wait(
            "registered", timeout=60, process=driver, since=since, driver=DRIVER
        )
        eventually(lambda: published(drakit_api, node) == ["npu-0"], "npu-0 published")

        allocations = [(claim("c", DRIVER), [Allocated(node, "npu-0")])]
        allocate(drakit_api, drakit_namespace, pod("p", node, ["c"]), allocations, driver=DRIVER)
        prepared = drakit_node.wait_prepared(drakit_namespace, "p")
        assert "NPU_VISIBLE_NPU_0=1" in drakit_node.container_env(prepared["containers"]["main"])

        inventory.write_text("npu-0\nnpu-1\n")
        os.kill(driver.pid or 0, signal.SIGHUP)
        eventually(lambda: published(drakit_api, node) == ["npu-0", "npu-1"], "npu-1 published")

        access.revoke()
        inventory.write_text("npu-0\nnpu-1\nnpu-2\n")

        def refusal_logged() -> bool:
            os.kill(driver.pid or 0, signal.SIGHUP)
            return any(
                line.startswith("drakit: publish ResourceSlices: ")
                and "forbidden" in line.lower()
                and line.endswith("(recoverable: True)")
                for line in messages(driver.log_path)
            )

        eventually(refusal_logged, "the driver's handler logging the refused publish", interval=1)
        access.restore()
        os.kill(driver.pid or 0, signal.SIGHUP)
        eventually(
            lambda: published(drakit_api, node) == ["npu-0", "npu-1", "npu-2"],
            "npu-2 published once allowed again",
        )
    finally:
        code = driver.terminate(timeout=60)
    assert code == 0, driver.log_tail()
    assert "NPU driver stopped" in messages(driver.log_path)
    drakit_node.events.wait("deregistered", timeout=60, since=since, driver=DRIVER)
    sockets = socket_paths(folders.registrar, folders.plugins / DRIVER, DRIVER, None)
    assert not sockets.registration.exists() and not sockets.dra.exists()


def messages(log: Path) -> list[str]:
    """The messages of the example's log lines (its format: time, level, message)."""
    lines = log.read_text(errors="replace").splitlines()
    return [line.split(" ", 3)[3] for line in lines if line.count(" ") >= 3]
