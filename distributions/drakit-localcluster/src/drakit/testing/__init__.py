"""drakit's test kit for driver authors: a pytest plugin and builders.

Load it in your ``conftest.py`` with ``pytest_plugins = ["drakit.testing"]`` (it comes with
the drakit-localcluster distribution, which runs the local control plane and the kubelet
harness; see docs/writing-a-driver.md, "Testing your driver"). Fixtures:

``drakit_cluster`` (session)
    A local control plane (etcd + kube-apiserver) of ``$DRAKIT_KUBE_VERSION`` (default:
    drakit's pinned version), stopped at the end of the session.
``drakit_api``
    drakit's client for it (``drakit.kubeapi``; use :mod:`drakit.kubeapi.resources`).
``drakit_namespace``
    A fresh namespace, deleted after the test.
``drakit_node``
    A :class:`HarnessNode`: a schedulable Node with the kubelet harness as its kubelet (the
    kubelet's real plugin and DRA managers), in its own short folder under /tmp.
``drakit_plugin``
    A function ``start(backend, driver, backend_config=None)`` that runs ``drakit
    node-plugin`` with ``backend`` (a backend class, or ``module:Class``) on ``drakit_node``
    over real Unix sockets and returns the :class:`PluginUnderTest` once the kubelet
    registered it; every plugin started is stopped after the test.

Builders (:mod:`drakit.testing.claims`): :func:`claim`, :func:`opaque_config`, :func:`pod`
and :func:`allocate`, which writes the allocation and reservation kube-scheduler would.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from drakit.testing.claims import Allocated, allocate, claim, opaque_config, pod
from drakit.testing.node import HarnessNode, PluginUnderTest, backend_spec

if TYPE_CHECKING:
    from drakit.localcluster import LocalCluster

__all__ = [
    "Allocated",
    "HarnessNode",
    "PluginUnderTest",
    "StartPlugin",
    "allocate",
    "claim",
    "drakit_api",
    "drakit_cluster",
    "drakit_namespace",
    "drakit_node",
    "drakit_plugin",
    "opaque_config",
    "pod",
]

#: ``drakit_plugin``'s type: ``start(backend, driver, backend_config=None)``.
StartPlugin = Callable[..., PluginUnderTest]


@pytest.fixture(scope="session")
def drakit_cluster() -> Iterator[LocalCluster]:
    """The session's local control plane (no scheduler: tests allocate with ``allocate``)."""
    from drakit.localcluster import ClusterConfig, LocalCluster  # noqa: PLC0415

    with LocalCluster(ClusterConfig()) as cluster:
        yield cluster


@pytest.fixture
def drakit_api(drakit_cluster: LocalCluster) -> Iterator[Any]:
    """drakit's API client for ``drakit_cluster``, without a client-side rate limit.

    One per test, not per session: a conftest may give some folders another
    ``drakit_cluster``, and the client must reach the same cluster as ``drakit_node``.
    """
    from drakit.kubeapi.client import load_client  # noqa: PLC0415

    api = load_client(drakit_cluster.kubeconfig, qps=0)
    yield api
    close = getattr(api, "close", None)
    if close is not None:
        close()


@pytest.fixture
def drakit_namespace(drakit_api: Any) -> Iterator[str]:
    """A fresh namespace, deleted (with everything in it) after the test."""
    from drakit.kubeapi.resources import NAMESPACES, Resource  # noqa: PLC0415

    namespaces = Resource(drakit_api, NAMESPACES)
    name = f"t-{uuid.uuid4().hex[:10]}"
    namespaces.create({"metadata": {"name": name}})
    yield name
    namespaces.delete(name)


@pytest.fixture
def drakit_node(drakit_cluster: LocalCluster, drakit_api: Any) -> Iterator[HarnessNode]:
    """A schedulable Node run by the kubelet harness; stopped and deleted after the test."""
    from drakit.localcluster.stack import NodeFolders  # noqa: PLC0415

    # Unix socket paths are limited to 107 bytes: a short folder directly under /tmp.
    root = Path(tempfile.mkdtemp(prefix="dkt-", dir="/tmp"))
    node = HarnessNode(
        api=drakit_api,
        name=f"node-{uuid.uuid4().hex[:8]}",
        folders=NodeFolders(root),
        kubeconfig=drakit_cluster.kubeconfig,
        kube_version=drakit_cluster.kube_version,
        feature_gates=drakit_cluster.feature_gates,
    )
    try:
        node.start()
        yield node
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def drakit_plugin(drakit_node: HarnessNode) -> Iterator[StartPlugin]:
    """Start ``drakit node-plugin`` with a backend on ``drakit_node``; stopped after the test."""
    started: list[PluginUnderTest] = []

    def start(
        backend: str | type, driver: str, backend_config: Path | None = None
    ) -> PluginUnderTest:
        spec, python_path = backend_spec(backend)
        plugin = PluginUnderTest(drakit_node, spec, driver, backend_config, python_path)
        started.append(plugin)
        plugin.start()
        return plugin

    yield start
    for plugin in reversed(started):
        plugin.stop()
