"""The kubelet's own plugin manager and DRA manager (hack/kubelet-harness) register the plugin.

This is the registration handshake done by real kubelet v1.37.2 code rather
than by our imitation of it: GetInfo, version pick, connecting to the DRA
socket, NotifyRegistrationStatus, and deregistration when the socket goes.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually
from plugin_harness import DRIVER, PluginFactory

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.integration


class Harness:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout as stream:  # closed at EOF, when the harness has gone
            for line in stream:
                self.events.put(json.loads(line))

    def next_event(self, kind: str) -> dict[str, Any]:
        """The next ``kind`` event for :data:`DRIVER`; events of other kinds are passed over."""

        def taken() -> dict[str, Any] | None:
            while True:
                try:
                    event = self.events.get_nowait()
                except queue.Empty:
                    assert self.process.poll() is None, "kubelet-harness exited"
                    return None
                if event["event"] == kind and event.get("driver") == DRIVER:
                    return event

        found: dict[str, Any] = eventually(taken, f"a {kind} event from kubelet-harness", 60)
        return found


@pytest.fixture
def kubelet(cluster: Any, short_tmp: Path) -> Iterator[Harness]:
    if shutil.which("go") is None:
        pytest.skip("Go is needed to build kubelet-harness")
    bin_dir = subprocess.run(
        [str(ROOT / "hack" / "build-binaries.sh"), "kubelet-harness"],
        capture_output=True, text=True, check=True, timeout=1800,
    ).stdout.strip()  # fmt: skip
    (short_tmp / "registry").mkdir(exist_ok=True)
    (short_tmp / "state").mkdir()
    process = subprocess.Popen(
        [
            f"{bin_dir}/kubelet-harness",
            "--kubeconfig", cluster.kubeconfig,
            "--node-name", "node-a",
            "--registrar-dir", str(short_tmp / "registry"),
            "--state-dir", str(short_tmp / "state"),
            "--feature-gates", cluster.feature_gates,
        ],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    harness = Harness(process)
    try:
        yield harness
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_real_kubelet_registers_the_plugin_on_v1_and_deregisters_it_on_stop(
    kubelet: Harness, start_plugin: PluginFactory
) -> None:
    plugin, _ = start_plugin()
    registered = kubelet.next_event("registered")
    assert registered["endpoint"] == str(plugin.sockets.dra)
    assert registered["versions"][0] == "v1.DRAPlugin"
    registry = plugin.metrics.registry
    eventually(
        lambda: registry.get_sample_value("drakit_node_plugin_registered") == 1,
        "the kubelet's NotifyRegistrationStatus(true)",
        30,
        interval=0.05,
    )
    plugin.stop(grace=5)
    assert kubelet.next_event("deregistered")["endpoint"] == str(plugin.sockets.dra)
