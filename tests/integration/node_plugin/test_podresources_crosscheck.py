"""The PodResources cross-check against a real gRPC PodResources server on a real Unix socket,
a real core's checkpoint files and claims and Events in the real apiserver."""

from __future__ import annotations

import json
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claims import DRIVER, NODE, call, create_claim, result
from conftest import CoreFactory
from helpers.clock import FakeClock
from podresources_server import FakeKubelet, serving_kubelet

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.events import EventRecorder
from drakit.kubeapi.resources import EVENTS, Resource
from drakit.node_plugin import wiring
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.checkpoint import FILE_NAME
from drakit.node_plugin.crosscheck import LEAK, LOST_CLAIM, UNKNOWN_DEVICE, CrossCheckConfig
from drakit.node_plugin.crosscheck_service import NODE_VIEW_PATH, CrossCheck
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.podresources import PodResourcesClient
from drakit.plugin import ClaimRef

pytestmark = pytest.mark.integration

GRACE, EVENT_AFTER = 300.0, 1800.0


@pytest.fixture
def kubelet() -> Iterator[tuple[FakeKubelet, Path]]:
    with serving_kubelet() as serving:
        yield serving


def _check(
    core: Any, socket: Path, events: Any = None
) -> tuple[CrossCheck, FakeClock, PluginMetrics]:
    clock = FakeClock()
    metrics = PluginMetrics()
    check = CrossCheck(
        CrossCheckConfig(socket, period=60, grace=GRACE, event_after=EVENT_AFTER),
        driver=DRIVER,
        node=NODE,
        checkpoint_path=core.config.plugin_data_dir / FILE_NAME,
        kubelet=PodResourcesClient(socket, DRIVER),
        registry=metrics.registry,
        events=events,
        clock=clock,
        boot_id=lambda: "boot-1",
    )
    return check, clock, metrics


def _findings(metrics: PluginMetrics, kind: str) -> float | None:
    return metrics.registry.get_sample_value(
        "drakit_node_plugin_podresources_findings", {"kind": kind}
    )


def _prepared(make_core: CoreFactory, claims: Resource, namespace: str) -> tuple[Any, ClaimRef]:
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert not core.prepare([ref], call(core.config))[ref.uid].error
    return core, ref


def test_a_claim_in_use_by_a_container_is_no_finding_and_the_node_view_links_them(
    make_core: CoreFactory, claims: Resource, namespace: str, kubelet: tuple[FakeKubelet, Path]
) -> None:
    server, socket = kubelet
    core, ref = _prepared(make_core, claims, namespace)
    server.run(namespace, "pod-a", "main", ref, "gpu-0")
    check, clock, metrics = _check(core, socket)
    check.run_once()
    clock.advance(GRACE * 10)
    done = check.run_once()
    assert done is not None and done.current == ()
    assert _findings(metrics, LEAK) == 0
    (row,) = check.node_view()["claims"]
    assert (row["name"], row["uid"], row["prepared"]) == (ref.name, ref.uid, "completed")
    assert row["containers"] == [
        {"pod": f"{namespace}/pod-a", "container": "main", "devices": [f"{NODE}/gpu-0"]}
    ]
    check.stop()


def test_a_prepared_claim_that_no_container_uses_is_a_leak_after_the_grace_period_with_an_event(
    make_core: CoreFactory,
    api: RateLimitedApiClient,
    claims: Resource,
    namespace: str,
    kubelet: tuple[FakeKubelet, Path],
) -> None:
    _, socket = kubelet
    core, ref = _prepared(make_core, claims, namespace)
    recorder = EventRecorder(api, reporting_controller=DRIVER, reporting_instance=f"{DRIVER}-n")
    check, clock, metrics = _check(core, socket, recorder)
    check.run_once()
    assert _findings(metrics, LEAK) == 0, "within the grace period a claim may wait for its pod"
    clock.advance(GRACE)
    check.run_once()
    assert _findings(metrics, LEAK) == 1
    assert check.node_view()["findings"][0]["claimUID"] == ref.uid
    clock.advance(EVENT_AFTER - GRACE)
    check.run_once()
    assert recorder.flush(timeout=30)
    events = Resource(api, EVENTS).list(namespace).items
    (event,) = [e for e in events if e["regarding"].get("uid") == ref.uid]
    assert (event["type"], event["reason"]) == ("Warning", "PreparedClaimUnused")
    assert event["regarding"]["kind"] == "ResourceClaim"
    assert f"{NODE}/gpu-0" in event["note"]
    recorder.stop(timeout=5)
    check.stop()


def test_a_claim_the_kubelet_uses_but_the_checkpoint_lost_is_reported_after_get_confirms_it(
    make_core: CoreFactory, claims: Resource, namespace: str, kubelet: tuple[FakeKubelet, Path]
) -> None:
    server, socket = kubelet
    core = make_core()
    lost = create_claim(claims, namespace, [result("gpu", "gpu-1")])  # never prepared
    server.run(namespace, "pod-b", "main", lost, "gpu-1")
    check, clock, metrics = _check(core, socket)
    check.run_once()
    clock.advance(GRACE)
    done = check.run_once()
    assert done is not None
    (finding,) = done.current
    assert (finding.kind, finding.claim, finding.pods) == (
        LOST_CLAIM,
        f"{namespace}/{lost.name}",
        (f"{namespace}/pod-b",),
    )
    assert f"Get {namespace}/pod-b" in server.calls
    assert _findings(metrics, LOST_CLAIM) == 1
    check.stop()


def test_a_pod_that_get_no_longer_finds_is_not_reported(
    make_core: CoreFactory, claims: Resource, namespace: str, kubelet: tuple[FakeKubelet, Path]
) -> None:
    server, socket = kubelet
    core = make_core()
    lost = create_claim(claims, namespace, [result("gpu", "gpu-1")])
    server.run(namespace, "pod-c", "main", lost, "gpu-1")
    server.gone.add((namespace, "pod-c"))
    check, clock, metrics = _check(core, socket)
    check.run_once()
    clock.advance(GRACE)
    done = check.run_once()
    assert done is not None and done.current == ()
    assert _findings(metrics, LOST_CLAIM) == 0
    check.stop()


def test_a_container_using_a_device_the_claim_was_not_prepared_with_is_an_unknown_device(
    make_core: CoreFactory, claims: Resource, namespace: str, kubelet: tuple[FakeKubelet, Path]
) -> None:
    server, socket = kubelet
    core, ref = _prepared(make_core, claims, namespace)
    server.run(namespace, "pod-d", "main", ref, "gpu-0", "gpu-3")
    check, clock, metrics = _check(core, socket)
    check.run_once()
    clock.advance(GRACE)
    check.run_once()
    assert _findings(metrics, UNKNOWN_DEVICE) == 1
    (finding,) = check.node_view()["findings"]
    assert finding["devices"] == [f"{NODE}/gpu-3"]
    check.stop()


def test_an_unreachable_kubelet_is_a_counted_error_naming_the_socket(
    make_core: CoreFactory, tmp_path: Path
) -> None:
    core = make_core()
    missing = Path(tempfile.gettempdir()) / "drk-no-such-kubelet.sock"
    check, _, metrics = _check(core, missing)
    check._kubelet.timeout = 2  # type: ignore[attr-defined]  # an absent socket fails at once
    assert check.run_once() is None
    assert (
        metrics.registry.get_sample_value("drakit_node_plugin_podresources_check_errors_total") == 1
    )
    assert str(missing) in check.node_view()["error"]
    check.stop()


def test_the_plugin_serves_the_node_view_beside_its_metrics(
    make_core: CoreFactory, claims: Resource, namespace: str, kubelet: tuple[FakeKubelet, Path]
) -> None:
    server, socket = kubelet
    core, ref = _prepared(make_core, claims, namespace)
    server.run(namespace, "pod-e", "main", ref, "gpu-0")
    check, _, _ = _check(core, socket)
    check.run_once()
    config = core.config.__class__(**{**core.config.__dict__, "metrics_address": "127.0.0.1:0"})
    plugin = NodePlugin(
        config,
        build=lambda _config, _metrics: wiring.Parts(
            core, wiring.serialize_lock(config), services=(check,)
        ),
    )
    plugin.start()
    try:
        endpoint = plugin._metrics_endpoint
        assert endpoint is not None
        url = f"http://127.0.0.1:{endpoint.port}{NODE_VIEW_PATH}"
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.headers["Content-Type"] == "application/json"
            view = json.load(answer)
        metrics_url = f"http://127.0.0.1:{endpoint.port}/metrics"
        with urllib.request.urlopen(metrics_url, timeout=30) as answer:
            assert b"drakit_node_plugin_prepared_claims" in answer.read()
    finally:
        plugin.stop(grace=1)
    assert view["kind"] == "NodeView"
    assert view["claims"][0]["containers"][0]["pod"] == f"{namespace}/pod-e"
