"""The liveness probe (``python -m drakit.node_plugin.probe``) against plugins on real Unix
sockets."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from fake_core import FakeCore
from plugin_harness import DRIVER, PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.node_plugin.driver import CallContext, PrepareResult
from drakit.node_plugin.probe import problem
from drakit.plugin import ClaimRef

# DraServer's bound on concurrent DRAPlugin calls (its max_workers).
PREPARE_SLOTS = 16


class HangingCore(FakeCore):
    """Every prepare hangs until ``hold`` is set; ``entered_count`` says how many began."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.entered_count = 0
        self.count_changed = threading.Condition()

    def prepare(self, claims: Sequence[ClaimRef], call: CallContext) -> Mapping[str, PrepareResult]:
        with self.count_changed:
            self.entered_count += 1
            self.count_changed.notify_all()
        return super().prepare(claims, call)

    def wait_for_entries(self, count: int) -> bool:
        with self.count_changed:
            return self.count_changed.wait_for(lambda: self.entered_count >= count, timeout=30)


def test_probe_passes_on_a_serving_plugin_and_its_prepare_reaches_no_claim(
    start_plugin: PluginFactory,
) -> None:
    plugin, core = start_plugin()
    assert problem(plugin.sockets, DRIVER) is None
    assert core.calls == []


def test_probe_names_the_wrong_driver(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    found = problem(plugin.sockets, "other.example.com")
    assert found is not None
    assert found.startswith("registration names 'gpu.example.com', want 'other.example.com'")


def test_probe_fails_once_every_prepare_slot_hangs_but_not_for_one_hung_claim(
    start_plugin: PluginFactory,
) -> None:
    core = HangingCore()
    plugin, _ = start_plugin(core=core)
    prepare = v1_grpc.DRAPluginStub(channel_to(plugin.sockets.dra)).NodePrepareResources

    def hang(uid: str) -> object:
        claim = v1.Claim(namespace="default", uid=uid, name=uid)
        return prepare.future(v1.NodePrepareResourcesRequest(claims=[claim]), timeout=60)

    calls = [hang("uid-0")]
    try:
        assert core.wait_for_entries(1)
        assert problem(plugin.sockets, DRIVER) is None  # one slow claim is no reason to restart
        calls += [hang(f"uid-{n}") for n in range(1, PREPARE_SLOTS)]
        assert core.wait_for_entries(PREPARE_SLOTS)
        found = problem(plugin.sockets, DRIVER, timeout=1)
        assert found is not None
        assert found.startswith("DEADLINE_EXCEEDED: ")
        assert str(plugin.sockets.dra) in found
    finally:
        core.hold.set()
    for call in calls:
        call.result(30)  # type: ignore[attr-defined]
    assert problem(plugin.sockets, DRIVER) is None
