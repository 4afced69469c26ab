"""Rolling update: per-pod socket names and two live instances sharing the work."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fake_core import FakeCore
from plugin_harness import DRIVER, PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2 as reg
from drakit.kubeletapi.gen.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from drakit.node_plugin.serialize import SerializeLock, SerializeTimeoutError
from drakit.node_plugin.sockets import (
    SocketPathError,
    dra_socket_name,
    registration_socket_name,
    socket_paths,
)

UID_A = "0f6b4c8e-1111-4d5e-9a7b-aaaaaaaaaaaa"
UID_B = "0f6b4c8e-2222-4d5e-9a7b-bbbbbbbbbbbb"


def b64sha(text: str, size: int) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:size]).decode().rstrip("=")
    )


def test_pod_uid_gives_per_instance_socket_names() -> None:
    assert registration_socket_name(Path("/r"), DRIVER, UID_A) == f"{DRIVER}-{UID_A}-reg.sock"
    assert dra_socket_name(Path("/p/gpu"), UID_A) == f"dra-{UID_A}.sock"


def test_long_directories_fall_back_to_hashed_names_like_the_go_helper() -> None:
    registry = Path("/" + "r" * 49)  # the full-UID name no longer fits in 107 bytes
    name = registration_socket_name(registry, DRIVER, UID_A)
    assert name == f"{DRIVER}-{b64sha(UID_A, 8)}-reg.sock"
    deeper = Path("/" + "r" * 70)  # only the shortest, driver-free name fits
    assert (
        registration_socket_name(deeper, DRIVER, UID_A)
        == f"dra-{b64sha(DRIVER + chr(0) + UID_A, 16)}-reg.sock"
    )
    plugins = Path("/" + "p" * 70)
    assert dra_socket_name(plugins, UID_A) == f"dra-{b64sha(UID_A, 8)}.sock"
    for directory, socket_name in ((registry, name), (plugins, dra_socket_name(plugins, UID_A))):
        assert len(str(directory / socket_name)) <= 107


def test_a_socket_path_that_cannot_fit_is_an_error_naming_the_path() -> None:
    too_deep = Path("/" + "x" * 100)
    with pytest.raises(SocketPathError, match="over the 107-byte Unix socket limit"):
        socket_paths(too_deep, too_deep / DRIVER, DRIVER, None)


def test_two_instances_register_separately_and_both_answer(start_plugin: PluginFactory) -> None:
    first, core_a = start_plugin(FakeCore(), pod_uid=UID_A)
    second, core_b = start_plugin(FakeCore(), pod_uid=UID_B)
    assert first.sockets.registration != second.sockets.registration
    assert first.sockets.dra != second.sockets.dra
    claims = [v1.Claim(namespace="n", uid="claim-1", name="c")]
    for plugin in (first, second):
        with channel_to(plugin.sockets.registration) as channel:
            info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=1)
        assert info.endpoint == str(plugin.sockets.dra)
        with channel_to(Path(info.endpoint)) as channel:
            response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
                v1.NodePrepareResourcesRequest(claims=claims), timeout=5
            )
        assert response.claims["claim-1"].error == ""
    assert len(core_a.calls) == len(core_b.calls) == 1


def test_one_instance_waits_for_the_other_to_leave_the_serialize_lock(
    start_plugin: PluginFactory,
) -> None:
    holder = FakeCore()
    holder.hold = threading.Event()
    first, _ = start_plugin(holder, pod_uid=UID_A)
    second, _ = start_plugin(FakeCore(), pod_uid=UID_B, serialize_timeout_seconds=0.2)
    request = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="n", uid="u1", name="c")])
    done = threading.Thread(
        target=lambda: v1_grpc.DRAPluginStub(channel_to(first.sockets.dra)).NodePrepareResources(
            request, timeout=30
        )
    )
    done.start()
    assert holder.entered.wait(timeout=10)
    blocked = v1_grpc.DRAPluginStub(channel_to(second.sockets.dra)).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="n", uid="u2", name="c")]),
        timeout=10,
    )
    assert "held by another call or plugin instance" in blocked.claims["u2"].error
    holder.hold.set()
    done.join(timeout=30)
    after = v1_grpc.DRAPluginStub(channel_to(second.sockets.dra)).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="n", uid="u2", name="c")]),
        timeout=10,
    )
    assert after.claims["u2"].error == ""


def test_serialize_lock_excludes_another_process(tmp_path: Path) -> None:
    lock_file = tmp_path / "serialize.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX);"
            " print('locked', flush=True); sys.stdin.read()",
            str(lock_file),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(SerializeTimeoutError), SerializeLock(lock_file, timeout=0.1):
            pass
    finally:
        holder.communicate(input="", timeout=10)
    with SerializeLock(lock_file, timeout=5):
        pass


def test_serialize_lock_is_reusable_and_excludes_threads(tmp_path: Path) -> None:
    lock = SerializeLock(tmp_path / "serialize.lock", timeout=5)
    inside = 0
    overlaps = 0

    def work() -> None:
        nonlocal inside, overlaps
        for _ in range(50):
            with lock:
                inside += 1
                overlaps += inside > 1
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == 0
