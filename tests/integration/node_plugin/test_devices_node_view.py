"""``drakit devices --node`` shows the node's own view beside the API's: from a real plugin
cross-check (real core, real PodResources server on a Unix socket, /debug/node-view served
over HTTP on 127.0.0.1), and through the API server's pod proxy from the plugin DaemonSet's
pods (which pods are trusted: test_devices_node_view_trust.py)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from claims import DRIVER, NODE, call, create_claim, result
from conftest import CoreFactory
from node_view_pods import create_daemonset, create_pod, owner_of
from podresources_server import serving_kubelet

from drakit.cli import main
from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin import wiring
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.checkpoint import FILE_NAME
from drakit.node_plugin.crosscheck import CrossCheckConfig
from drakit.node_plugin.crosscheck_service import CrossCheck
from drakit.node_plugin.metrics import PluginMetrics
from drakit.node_plugin.podresources import PodResourcesClient

pytestmark = pytest.mark.integration


@pytest.fixture
def served_view(
    make_core: CoreFactory, claims: Resource, namespace: str
) -> Iterator[tuple[str, str]]:
    """A plugin whose cross-check saw ``pod-a``/``main`` use the claim it prepared; yields
    (its metrics URL, the claim's name)."""
    core = make_core()
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    assert not core.prepare([ref], call(core.config))[ref.uid].error
    with serving_kubelet() as (server, socket):
        server.run(namespace, "pod-a", "main", ref, "gpu-0")
        metrics = PluginMetrics()
        check = CrossCheck(
            CrossCheckConfig(socket, period=3600, grace=0, event_after=0),
            driver=DRIVER,
            node=NODE,
            checkpoint_path=core.config.plugin_data_dir / FILE_NAME,
            kubelet=PodResourcesClient(socket, DRIVER),
            registry=metrics.registry,
            boot_id=lambda: "boot-1",
        )
        config = dataclasses.replace(core.config, metrics_address="127.0.0.1:0")
        plugin = NodePlugin(
            config,
            metrics=metrics,
            build=lambda _c, _m: wiring.Parts(
                core, wiring.serialize_lock(config), services=(check,)
            ),
        )
        plugin.start()  # starts the check: its first round runs at once
        try:
            assert check.run_once() is not None
            endpoint = plugin._metrics_endpoint
            assert endpoint is not None
            yield f"http://127.0.0.1:{endpoint.port}", ref.name
        finally:
            plugin.stop(grace=1)


def test_devices_node_shows_claim_pod_container_and_device_as_the_node_sees_them(
    cluster: LocalCluster,
    namespace: str,
    served_view: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, claim = served_view
    args = ["devices", "--kubeconfig", cluster.kubeconfig, "--node", NODE, "--node-view-url", url]
    assert main(args) == 0
    out = capsys.readouterr().out
    view = out[out.index("Node view of") :]
    assert f"Node view of {NODE} from driver {DRIVER}" in view
    rows = [line.split() for line in view.splitlines()[1:3]]
    assert rows == [
        ["CLAIM", "POD", "CONTAINER", "DEVICES", "PREPARED"],
        [f"{namespace}/{claim}", f"{namespace}/pod-a", "main", f"{NODE}/gpu-0", "completed"],
    ]
    assert "finding:" not in view


def test_devices_node_says_when_no_plugin_on_the_node_serves_a_view(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    node = f"nv-{uuid.uuid4().hex[:8]}"
    assert main(["devices", "--kubeconfig", cluster.kubeconfig, "--node", node]) == 0
    out = capsys.readouterr().out
    assert f"note: node view: no node plugin pod in namespace drakit-system on {node} serves" in out


def test_devices_node_reports_a_plugin_pod_the_pod_proxy_refuses(
    cluster: LocalCluster,
    api: RateLimitedApiClient,
    other_namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = f"nv-{uuid.uuid4().hex[:8]}"
    ds = create_daemonset(api, other_namespace)
    create_pod(api, other_namespace, node, name="plugin", owner=owner_of(ds))
    args = ["--plugin-namespace", other_namespace]
    assert main(["devices", "--kubeconfig", cluster.kubeconfig, "--node", node, *args]) == 0
    out = capsys.readouterr().out
    # The API server never proxies to loopback: the refusal is a note naming the pod, and
    # the command still succeeds (the API's view is complete without it).
    assert f"note: node view: pod {other_namespace}/plugin: " in out
    assert "address not allowed" in out


def test_node_view_url_without_node_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--node-view-url", "http://127.0.0.1:1"]) == 2
    assert "--node-view-url: needs --node" in capsys.readouterr().err


def test_a_node_view_url_that_is_not_http_is_a_note(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["devices", "--kubeconfig", cluster.kubeconfig, "--node", NODE]
    assert main([*args, "--node-view-url", f"file://{tmp_path}"]) == 0
    assert "is not an http(s) URL" in capsys.readouterr().out
