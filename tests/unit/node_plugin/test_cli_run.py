"""``drakit node-plugin`` as a real process: registers, serves metrics, cleans up on signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually
from plugin_harness import DRIVER, channel_to

from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc

HERE = Path(__file__).parent


class PluginProcess:
    """A ``drakit node-plugin`` subprocess with an in-memory core; collects its JSON logs."""

    def __init__(self, root: Path, *extra: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        for key in ("POD_UID", "KUBECONFIG", "DRIVER_NAME", "NODE_NAME"):
            env.pop(key, None)
        self.root = root
        self.process = subprocess.Popen(
            [
                sys.executable, str(HERE / "fake_plugin_cli.py"), "node-plugin",
                "--driver-name", DRIVER, "--node-name", "node-a",
                "--kubelet-registrar-dir", str(root / "registry"),
                "--kubelet-plugins-dir", str(root / "plugins"),
                "--cdi-root", str(root / "cdi"),
                *extra,
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.logs: list[dict[str, Any]] = []
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            entry = json.loads(line)
            self.logs.append(entry)
            if entry["msg"] == "Node plugin started":
                self._started.set()

    def wait_started(self) -> dict[str, Any]:
        def started() -> bool:
            if self._started.is_set():
                return True
            assert self.process.poll() is None, f"plugin exited: {self.logs}"
            return False

        eventually(started, "the plugin to log 'Node plugin started'", 60)
        return next(e for e in self.logs if e["msg"] == "Node plugin started")

    def stop(self, sig: int) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def plugin_process(short_tmp: Path):  # type: ignore[no-untyped-def]
    processes: list[PluginProcess] = []

    def start(*extra: str) -> PluginProcess:
        process = PluginProcess(short_tmp, *extra)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_plugin_and_removes_both_sockets(plugin_process, sig: int) -> None:  # type: ignore[no-untyped-def]
    process = plugin_process()
    started = process.wait_started()
    registration, dra = Path(started["registration_socket"]), Path(started["dra_socket"])
    with channel_to(registration) as channel:
        info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=1)
    assert info.endpoint == str(dra)
    assert process.stop(sig) == 0
    assert not registration.exists()
    assert not dra.exists()
    assert any(
        e["msg"] == "Shutting down" and e["signal"] == signal.Signals(sig).name
        for e in process.logs
    )


def test_metrics_are_served_on_the_metrics_address(plugin_process) -> None:  # type: ignore[no-untyped-def]
    process = plugin_process("--metrics-address", "127.0.0.1:0", "--pod-uid", "pod-1234")
    started = process.wait_started()
    assert Path(started["registration_socket"]).name == f"{DRIVER}-pod-1234-reg.sock"
    port = next(e["port"] for e in process.logs if e["msg"] == "Serving metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert "drakit_node_plugin_registered 0.0" in text
    assert 'drakit_node_plugin_claims_total{operation="prepare",result="success"} 0.0' in text
    assert process.stop(signal.SIGTERM) == 0


def _thread_affinities(pid: int) -> dict[str, list[str]]:
    """Thread name -> the ``Cpus_allowed_list`` of each thread of that name (threads that
    end meanwhile are skipped)."""
    lists: dict[str, list[str]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
        name = fields["Name"].strip()
        lists.setdefault(name, []).append(fields["Cpus_allowed_list"].strip())
    return lists


def _cpu_list(cpus: set[int]) -> str:
    return f"{min(cpus)}-{max(cpus)}" if len(cpus) > 1 else str(min(cpus))


needs_two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a home CPU needs a choice of two CPUs"
)


@needs_two_cpus
def test_plugin_threads_move_to_one_home_cpu_by_default(plugin_process) -> None:  # type: ignore[no-untyped-def]
    process = plugin_process()
    process.wait_started()
    eventually(
        lambda: any(e["msg"] == "Threads moved to their home CPU" for e in process.logs),
        "a home CPU chosen",
        30,
    )
    home = next(e["cpu"] for e in process.logs if e["msg"] == "Threads moved to their home CPU")
    affinities = _thread_affinities(process.process.pid)
    keeper = affinities.pop("cpu-home")
    assert keeper == [_cpu_list(os.sched_getaffinity(0))]  # reads the CPUs the plugin may use
    assert sum(len(lists) for lists in affinities.values()) > 5  # main, grpc's, metrics...
    assert {cpus for lists in affinities.values() for cpus in lists} == {str(home)}
    assert process.stop(signal.SIGTERM) == 0


@needs_two_cpus
def test_cpu_home_off_leaves_the_threads_where_the_kernel_puts_them(plugin_process) -> None:  # type: ignore[no-untyped-def]
    process = plugin_process("--cpu-home", "off")
    process.wait_started()
    # Logged where the keeper thread would have been started: only it ever moves threads,
    # so once this line is out and no keeper runs, no thread will be moved.
    eventually(
        lambda: any(e["msg"].startswith("CPU home off") for e in process.logs),
        "a word on the CPU home",
        30,
    )
    affinities = _thread_affinities(process.process.pid)
    assert "cpu-home" not in affinities
    assert {cpus for lists in affinities.values() for cpus in lists} == {
        _cpu_list(os.sched_getaffinity(0))
    }
    assert not any(e["msg"] == "Threads moved to their home CPU" for e in process.logs)
    assert process.stop(signal.SIGTERM) == 0
