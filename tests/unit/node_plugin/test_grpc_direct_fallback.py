"""When the plugin serves DRAPlugin through grpcio's own server instead of the direct path:
a grpcio outside the tested range, a grpcio without ``cygrpc``, ``DRAKIT_GRPC_DIRECT=0``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import pytest
from fake_core import FakeCore
from helpers.childpython import python_output
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.driver import CallContext, PrepareResult
from drakit.node_plugin.service.direct_support import TESTED_GRPCIO, untested_reason
from drakit.plugin import ClaimRef

DIRECT_LOGGER = "drakit.node_plugin.service.direct"


@pytest.fixture(autouse=True)
def direct_path_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test chooses the path itself: CI's fallback run (DRAKIT_GRPC_DIRECT=0) must
    not choose for them."""
    monkeypatch.delenv("DRAKIT_GRPC_DIRECT", raising=False)


class ThreadRecordingCore(FakeCore):
    """Remembers the thread each prepare and unprepare ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        self.threads.append(threading.current_thread().name)
        return super().prepare(claims, call)

    def unprepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, str]:
        self.threads.append(threading.current_thread().name)
        return super().unprepare(claims, call)


def serve_one_claim(plugin: Any) -> None:
    stub = v1_grpc.DRAPluginStub(channel_to(plugin.sockets.dra))
    claims = [v1.Claim(namespace="default", uid="uid-1", name="claim-1")]
    prepared = stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=claims), timeout=10)
    assert prepared.claims["uid-1"].error == ""
    stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(claims=claims), timeout=10)


def direct_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == DIRECT_LOGGER and r.levelno >= logging.WARNING]


def test_untested_grpcio_falls_back_to_grpcio_with_one_warning(
    start_plugin: PluginFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(grpc, "__version__", "1.86.0")
    core = ThreadRecordingCore()
    with caplog.at_level(logging.INFO, logger=DIRECT_LOGGER):
        plugin, _ = start_plugin(core=core)
        serve_one_claim(plugin)
    [warning] = direct_warnings(caplog)
    assert "grpcio 1.86.0 is outside the range" in warning.reason  # type: ignore[attr-defined]
    assert len(core.threads) == 2
    assert not any(name.startswith("grpc-direct-") for name in core.threads), core.threads


def test_drakit_grpc_direct_0_serves_dra_calls_through_grpcio_without_a_warning(
    start_plugin: PluginFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("DRAKIT_GRPC_DIRECT", "0")
    core = ThreadRecordingCore()
    with caplog.at_level(logging.INFO, logger=DIRECT_LOGGER):
        plugin, _ = start_plugin(core=core)
        serve_one_claim(plugin)
    assert direct_warnings(caplog) == []
    assert len(core.threads) == 2
    assert not any(name.startswith("grpc-direct-") for name in core.threads), core.threads


@pytest.mark.parametrize(
    ("version", "tested"),
    [
        ("1.85.1", True),
        ("1.85.7", True),
        ("1.85.0", False),
        ("1.86.0", False),
        ("1.86.0rc1", False),
        ("1.9.0", False),
        ("unknown", False),
    ],
)
def test_direct_path_runs_only_on_the_tested_grpcio_range(version: str, tested: bool) -> None:
    assert TESTED_GRPCIO == ((1, 85, 1), (1, 86))
    assert (untested_reason(version) is None) is tested


def test_the_pinned_grpcio_is_in_the_tested_range() -> None:
    assert untested_reason() is None


# A grpcio whose private layer moved: importing the plugin's servers must still work, and
# the direct path must step aside. (grpcio's own modules, imported first, still reach it.)
WITHOUT_CYGRPC = """
import sys
import grpc, grpc._cython, grpc._server, grpc_health.v1.health, grpc_reflection.v1alpha.reflection
sys.modules["grpc._cython.cygrpc"] = None
del grpc._cython.cygrpc
from concurrent import futures
from drakit.node_plugin.service.server import DraServer
from drakit.node_plugin.service.direct import DirectUnary
print(DirectUnary.attach(grpc.server(futures.ThreadPoolExecutor(max_workers=1)), 2))
"""


def test_a_grpcio_without_cygrpc_falls_back_instead_of_breaking_the_import() -> None:
    assert python_output(WITHOUT_CYGRPC).splitlines() == ["None"]
