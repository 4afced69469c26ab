"""DRAPlugin v1/v1beta1 over a real Unix socket, backed by the in-memory core."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from fake_core import POOL, FakeCore
from helpers.waiting import eventually
from plugin_harness import PluginFactory, channel_to

from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2 as v1beta1
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from drakit.telemetry.logs import JsonFormatter


def v1_claims(*uids: str) -> list[v1.Claim]:
    return [v1.Claim(namespace="default", uid=uid, name=f"claim-{uid}") for uid in uids]


def v1_stub(plugin) -> v1_grpc.DRAPluginStub:  # type: ignore[no-untyped-def]
    return v1_grpc.DRAPluginStub(channel_to(plugin.sockets.dra))


def sample(plugin, name: str, **labels: str) -> float:  # type: ignore[no-untyped-def]
    value = plugin.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_v1_prepare_returns_an_entry_with_devices_for_every_claim(
    start_plugin: PluginFactory,
) -> None:
    plugin, _ = start_plugin()
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("uid-1", "uid-2")), timeout=5
    )
    assert set(response.claims) == {"uid-1", "uid-2"}
    device = response.claims["uid-1"].devices[0]
    assert response.claims["uid-1"].error == ""
    assert (device.pool_name, list(device.request_names)) == (POOL, ["gpu"])
    assert list(device.cdi_device_ids) == ["k8s.gpu.example.com/gpu=uid-1-gpu"]
    assert not device.HasField("share_id")


def test_v1_prepare_returns_base_request_names_and_share_id(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.request_names = ("gpus/large", "nic")
    core.share_id = "7f1c2a3e-share"
    plugin, _ = start_plugin(core)
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("uid-1")), timeout=5
    )
    device = response.claims["uid-1"].devices[0]
    assert list(device.request_names) == ["gpus", "nic"]
    assert device.share_id == "7f1c2a3e-share"


def test_v1beta1_client_gets_the_same_devices_without_share_id(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.share_id = "share-1"
    plugin, _ = start_plugin(core)
    stub = v1beta1_grpc.DRAPluginStub(channel_to(plugin.sockets.dra))
    claims = [v1beta1.Claim(namespace="ns", uid="uid-9", name="c")]
    response = stub.NodePrepareResources(
        v1beta1.NodePrepareResourcesRequest(claims=claims), timeout=5
    )
    device = response.claims["uid-9"].devices[0]
    assert device.device_name.startswith("gpu-")
    assert list(device.cdi_device_ids) == ["k8s.gpu.example.com/gpu=uid-9-gpu"]
    unprepared = stub.NodeUnprepareResources(
        v1beta1.NodeUnprepareResourcesRequest(claims=claims), timeout=5
    )
    assert unprepared.claims["uid-9"].error == ""
    assert "uid-9" not in core.prepared


def test_empty_prepare_and_unprepare_requests_succeed_without_calling_the_core(
    start_plugin: PluginFactory,
) -> None:
    plugin, core = start_plugin()
    stub = v1_stub(plugin)
    assert stub.NodePrepareResources(v1.NodePrepareResourcesRequest(), timeout=5).claims == {}
    assert stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(), timeout=5).claims == {}
    assert core.calls == []


def test_repeated_prepare_returns_the_same_answer(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    request = v1.NodePrepareResourcesRequest(claims=v1_claims("uid-1"))
    first = v1_stub(plugin).NodePrepareResources(request, timeout=5)
    second = v1_stub(plugin).NodePrepareResources(request, timeout=5)
    assert first == second


def test_core_exception_becomes_an_error_for_every_claim_not_a_grpc_error(
    start_plugin: PluginFactory,
) -> None:
    core = FakeCore()
    core.raise_on_prepare = RuntimeError("backend exploded")
    plugin, _ = start_plugin(core)
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("a", "b")), timeout=5
    )
    assert {uid: r.error for uid, r in response.claims.items()} == {
        "a": "prepare failed: RuntimeError: backend exploded",
        "b": "prepare failed: RuntimeError: backend exploded",
    }


def test_unprepare_core_exception_becomes_per_claim_errors(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.raise_on_unprepare = KeyError("x")
    plugin, _ = start_plugin(core)
    response = v1_stub(plugin).NodeUnprepareResources(
        v1.NodeUnprepareResourcesRequest(claims=v1_claims("a")), timeout=5
    )
    assert response.claims["a"].error == "unprepare failed: KeyError: 'x'"


def test_one_failing_claim_does_not_fail_the_others(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.fail_uids = {"bad"}
    plugin, _ = start_plugin(core)
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("bad", "good")), timeout=5
    )
    assert response.claims["bad"].error == "claim claim-bad cannot be prepared"
    assert list(response.claims["bad"].devices) == []
    assert response.claims["good"].error == ""
    assert len(response.claims["good"].devices) == 1


def test_claim_the_core_skipped_gets_an_error_entry(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.skip_uids = {"lost"}
    plugin, _ = start_plugin(core)
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("lost", "kept")), timeout=5
    )
    assert set(response.claims) == {"lost", "kept"}
    assert "returned no result" in response.claims["lost"].error


def test_duplicate_claims_in_one_request_reach_the_core_once(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin()
    response = v1_stub(plugin).NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("dup", "dup")), timeout=5
    )
    assert list(response.claims) == ["dup"]
    assert [uids for _, _, uids in core.calls] == [("dup",)]


def test_unprepare_answers_every_claim_including_never_prepared(
    start_plugin: PluginFactory,
) -> None:
    plugin, _ = start_plugin()
    response = v1_stub(plugin).NodeUnprepareResources(
        v1.NodeUnprepareResourcesRequest(claims=v1_claims("never-1", "never-2")), timeout=5
    )
    assert {uid: r.error for uid, r in response.claims.items()} == {"never-1": "", "never-2": ""}


def test_the_callers_grpc_deadline_reaches_the_core_as_a_monotonic_deadline(
    start_plugin: PluginFactory,
) -> None:
    core = FakeCore()
    plugin, _ = start_plugin(core)
    stub = v1_stub(plugin)
    # The client fixes each deadline when it sends the call, somewhere between these readings.
    before_prepare = time.monotonic()
    stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=v1_claims("a")), timeout=40)
    before_unprepare = time.monotonic()
    stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(claims=v1_claims("a")), timeout=9)
    after = time.monotonic()
    prepare_deadline, unprepare_deadline = core.deadlines
    slack = 0.1  # gRPC carries the deadline in wall-clock time, with rounding
    assert prepare_deadline is not None
    assert before_prepare + 40 - slack < prepare_deadline <= before_unprepare + 40 + slack
    assert unprepare_deadline is not None
    assert before_unprepare + 9 - slack < unprepare_deadline <= after + 9 + slack


def test_a_call_without_a_grpc_deadline_reaches_the_core_without_one(
    start_plugin: PluginFactory,
) -> None:
    core = FakeCore()
    plugin, _ = start_plugin(core)
    v1_stub(plugin).NodePrepareResources(v1.NodePrepareResourcesRequest(claims=v1_claims("a")))
    assert core.deadlines == [None]


def test_metrics_count_claims_by_result_and_observe_durations(start_plugin: PluginFactory) -> None:
    core = FakeCore()
    core.fail_uids = {"bad"}
    plugin, _ = start_plugin(core)
    stub = v1_stub(plugin)
    stub.NodePrepareResources(
        v1.NodePrepareResourcesRequest(claims=v1_claims("bad", "ok")), timeout=5
    )
    stub.NodeUnprepareResources(v1.NodeUnprepareResourcesRequest(claims=v1_claims("ok")), timeout=5)
    claims = "drakit_node_plugin_claims_total"
    assert sample(plugin, claims, operation="prepare", result="success") == 1
    assert sample(plugin, claims, operation="prepare", result="error") == 1
    assert sample(plugin, claims, operation="unprepare", result="success") == 1
    count = "drakit_node_plugin_request_duration_seconds_count"
    assert sample(plugin, count, operation="prepare") == 1
    assert sample(plugin, count, operation="unprepare") == 1
    in_flight = "drakit_node_plugin_requests_in_flight"
    assert sample(plugin, in_flight, operation="prepare") == 0


def test_each_call_logs_structured_lines_with_one_request_id(
    start_plugin: PluginFactory, caplog: pytest.LogCaptureFixture
) -> None:
    plugin, core = start_plugin()
    with caplog.at_level(logging.DEBUG, logger="drakit.node_plugin.service.calls"):
        v1_stub(plugin).NodePrepareResources(
            v1.NodePrepareResourcesRequest(claims=v1_claims("uid-1")), timeout=5
        )
        # The closing line is written once the reply is sent, so it may trail the answer.
        eventually(
            lambda: any(r.getMessage() == "Call finished" for r in caplog.records),
            "the closing line after the reply",
            5,
            interval=0.01,
        )
    records = [r for r in caplog.records if r.name == "drakit.node_plugin.service.calls"]
    lines = [json.loads(JsonFormatter().format(r)) for r in records]
    assert [(line["level"], line["msg"]) for line in lines] == [
        ("debug", "Call started"),
        ("info", "Call finished"),
    ]
    request_ids = {line["request_id"] for line in lines}
    assert request_ids == {core.calls[0][1]}
    assert {line["method"] for line in lines} == {"NodePrepareResources"}
    assert all(line["claims"] == ["default/claim-uid-1:uid-1"] for line in lines)


def test_unknown_method_on_the_dra_socket_is_unimplemented(start_plugin: PluginFactory) -> None:
    plugin, _ = start_plugin()
    call = channel_to(plugin.sockets.dra).unary_unary(
        "/k8s.io.kubelet.pkg.apis.dra.v1alpha4.Node/X"
    )
    with pytest.raises(grpc.RpcError) as err:
        call(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_fifty_concurrent_prepare_calls_are_all_answered(start_plugin: PluginFactory) -> None:
    plugin, core = start_plugin()
    stub = v1_stub(plugin)
    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(
            pool.map(
                lambda i: stub.NodePrepareResources(
                    v1.NodePrepareResourcesRequest(claims=v1_claims(f"uid-{i}")), timeout=30
                ),
                range(50),
            )
        )
    assert [r.claims[f"uid-{i}"].error for i, r in enumerate(responses)] == [""] * 50
    assert len(core.prepared) == 50
    assert sample(plugin, "drakit_node_plugin_requests_in_flight", operation="prepare") == 0
