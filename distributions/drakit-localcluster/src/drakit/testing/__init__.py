"""drakit's test kit for driver authors: a pytest plugin, builders and checks.

Load it in your ``conftest.py`` with ``pytest_plugins = ["drakit.testing"]`` (it comes with
the drakit-localcluster distribution, which runs the local control plane and the kubelet
harness; see docs/writing-a-driver.md, "Test it"). A driver's tests need nothing of drakit
but this package and ``drakit.plugin``. Fixtures:

``drakit_cluster`` (session)
    A local control plane (etcd + kube-apiserver) of ``$DRAKIT_KUBE_VERSION`` (default:
    drakit's pinned version), stopped at the end of the session. Its ``kubeconfig`` is the
    path of an admin kubeconfig, ``server`` its URL and ``kube_version`` its version.
``drakit_api``
    A :class:`KubeAPI` for it: get, list, create, patch, delete and wait on claims, pods,
    slices, device classes, nodes, events and any other kind; ServiceAccount tokens.
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
``drakit_helm`` (session)
    The path of a helm binary (:func:`find_helm`); the test is skipped, saying where helm
    was looked for, when there is none (``--drakit-require-tools`` fails it instead).

Builders (:mod:`drakit.testing.claims`): :func:`claim`, :func:`opaque_config`, :func:`pod`
and :func:`allocate`, which writes the allocation and reservation kube-scheduler would.
Checks: :func:`validate_config` and :func:`admission_verdict` judge opaque config as the
node plugin and ``drakit webhook`` do; :meth:`HarnessNode.container` and
:func:`container_edits` give what a container gets from its CDI devices;
:func:`metrics_text` and :func:`metric_samples` read a backend's metrics as ``/metrics``
serves them; :func:`eventually` waits for a condition.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from drakit.testing.api import APIError, KubeAPI, Objects
from drakit.testing.cdi import (
    CDIContainer,
    CDIMount,
    cdi_specs,
    container_edits,
    unresolved_cdi_ids,
)
from drakit.testing.claims import Allocated, allocate, claim, opaque_config, pod
from drakit.testing.config import InvalidConfigError, admission_verdict, validate_config
from drakit.testing.metrics import metric_samples, metrics_text
from drakit.testing.node import HarnessNode, PluginUnderTest, backend_spec
from drakit.testing.tools import find_helm, helm_or_skip
from drakit.testing.waiting import eventually

if TYPE_CHECKING:
    from drakit.localcluster import LocalCluster

__all__ = [
    "APIError",
    "Allocated",
    "CDIContainer",
    "CDIMount",
    "HarnessNode",
    "InvalidConfigError",
    "KubeAPI",
    "Objects",
    "PluginUnderTest",
    "StartPlugin",
    "admission_verdict",
    "allocate",
    "cdi_specs",
    "claim",
    "container_edits",
    "drakit_api",
    "drakit_cluster",
    "drakit_helm",
    "drakit_namespace",
    "drakit_node",
    "drakit_plugin",
    "eventually",
    "find_helm",
    "metric_samples",
    "metrics_text",
    "opaque_config",
    "pod",
    "unresolved_cdi_ids",
    "validate_config",
]

#: ``drakit_plugin``'s type: ``start(backend, driver, backend_config=None)``.
StartPlugin = Callable[..., PluginUnderTest]
REQUIRE_TOOLS = "--drakit-require-tools"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        REQUIRE_TOOLS,
        action="store_true",
        default=False,
        help="drakit.testing: fail, rather than skip, a test whose tool (helm) is not found "
        "(for CI, where a missing tool is a broken set-up)",
    )


@pytest.fixture(scope="session")
def drakit_cluster() -> Iterator[LocalCluster]:
    """The session's local control plane (no scheduler: tests allocate with ``allocate``)."""
    from drakit.localcluster import ClusterConfig, LocalCluster  # noqa: PLC0415

    with LocalCluster(ClusterConfig()) as cluster:
        yield cluster


@pytest.fixture
def drakit_api(drakit_cluster: LocalCluster) -> Iterator[KubeAPI]:
    """A :class:`KubeAPI` for ``drakit_cluster`` as its admin, without a client-side rate limit.

    One per test, not per session: a conftest may give some folders another
    ``drakit_cluster``, and the client must reach the same cluster as ``drakit_node``.
    """
    with KubeAPI(drakit_cluster.kubeconfig) as api:
        yield api


@pytest.fixture
def drakit_namespace(drakit_api: KubeAPI) -> Iterator[str]:
    """A fresh namespace, deleted (with everything in it) after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    drakit_api.namespaces.create({"metadata": {"name": name}})
    yield name
    drakit_api.namespaces.delete(name, missing_ok=True)


@pytest.fixture
def drakit_node(drakit_cluster: LocalCluster, drakit_api: KubeAPI) -> Iterator[HarnessNode]:
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


@pytest.fixture(scope="session")
def drakit_helm(request: pytest.FixtureRequest) -> Path:
    """helm (:func:`find_helm`); the test is skipped when there is none, or fails with
    ``--drakit-require-tools``."""
    return helm_or_skip(required=request.config.getoption(REQUIRE_TOOLS))
