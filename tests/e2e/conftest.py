"""Fixtures for the end-to-end suite: the whole drakit stack on one control plane.

``e2e`` (session): a control plane of its own with the real kube-scheduler and
no kube-controller-manager (drakit's controller generates the claims,
``--claim-generation=all``, and schedules pods that name ``drakit``), the
DeviceClass, and two simulated nodes, each with a kubelet harness and a node
plugin (example backend) in folders of its own under ``/tmp/dk-<id>/``. Its
control plane is not the shared ``cluster_with_scheduler``: a controller that
generates claims for every pod would change what other tests observe.

``api`` (per test): the resources of a fresh namespace.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_rig import (
    NODE_NAMES,
    Api,
    E2EStack,
    NodeRig,
    create_namespace,
    delete_namespace,
    eventually,
)
from harness.kubelet import KubeletHarness

from drakit.kubeapi.client import RateLimitedApiClient, load_client
from drakit.kubeapi.resources import RESOURCE_SLICES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster, stack
from drakit.localcluster.stack import DRIVER, Component, NodeFolders


def _node_has_slices(client: RateLimitedApiClient, node: str) -> bool:
    slices = Resource(client, RESOURCE_SLICES).list(
        field_selector=f"spec.driver={DRIVER},spec.nodeName={node}"
    )
    return bool(slices.items)


def _start_node(
    stack_root: Path,
    cluster: LocalCluster,
    client: RateLimitedApiClient,
    binary: Path,
    name: str,
) -> NodeRig:
    stack.create_ready_node(client, name)
    folders = NodeFolders(stack_root / name).create()
    harness = KubeletHarness(
        binary,
        cluster.kubeconfig,
        name,
        folders.registrar,
        folders.kubelet_state,
        feature_gates=cluster.feature_gates,
    )
    harness.start()  # before the plugin: the DRA manager wipes the node's slices at start
    rig = NodeRig(name, folders, harness, cluster.kubeconfig, stack_root / "logs")
    rig.start_plugin()
    eventually(lambda: _node_has_slices(client, name), f"ResourceSlices of node {name}")
    return rig


@pytest.fixture(scope="session")
def e2e(
    kubelet_harness_binary: Path, kube_version: str, request: pytest.FixtureRequest
) -> Iterator[E2EStack]:
    root = stack.short_temp_root("dk-")
    log_dir = root / "logs"
    nodes: dict[str, NodeRig] = {}
    controller: Component | None = None
    config = ClusterConfig(
        with_scheduler=True, with_controller_manager=False, kube_version=kube_version
    )
    with LocalCluster(config) as cluster:
        try:
            client = load_client(cluster.kubeconfig, qps=200, burst=400)
            stack.ensure_device_class(client)
            port = stack.allocate_port()
            controller = Component(
                "drakit controller",
                stack.controller_command(kubeconfig=cluster.kubeconfig, metrics_port=port),
                log_dir / "controller.log",
            )
            controller.start()
            for name in NODE_NAMES:
                nodes[name] = _start_node(root, cluster, client, kubelet_harness_binary, name)
            yield E2EStack(cluster, client, controller, stack.metrics_url(port), nodes, root)
        finally:
            for rig in nodes.values():
                rig.stop_plugins()
                rig.harness.stop()
            if controller is not None:
                controller.terminate()
            _clean_up(root, keep_logs=request.session.stash.get(_E2E_FAILED, False))


_E2E_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember when an e2e test failed, so that the stack's logs are kept for it."""
    report = yield
    if report.failed and item.get_closest_marker("e2e") is not None:
        item.session.stash[_E2E_FAILED] = True
    return report


def _clean_up(root: Path, *, keep_logs: bool) -> None:
    """Remove the stack's folders; after a failure keep the component logs and say where."""
    if not keep_logs:
        stack.remove_tree(root)
        return
    for child in root.iterdir():
        if child.name != "logs":
            stack.remove_tree(child)
    warnings.warn(f"e2e: node plugin and controller logs kept in {root / 'logs'}", stacklevel=1)


@pytest.fixture
def api(e2e: E2EStack) -> Iterator[Api]:
    """A fresh namespace in the e2e cluster; the controller must still be running after."""
    namespace = create_namespace(e2e.client)
    yield Api(e2e.client, namespace)
    delete_namespace(e2e.client, namespace)
    assert e2e.controller.running(), (
        f"drakit controller exited during the test; log {e2e.controller.log_path}:\n"
        f"{e2e.controller.log_tail(40)}"
    )
