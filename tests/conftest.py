"""Session fixtures: one real control plane per test session.

``cluster`` is etcd + kube-apiserver; ``cluster_with_scheduler`` is a second
control plane that also runs the real kube-scheduler (started only when a test
asks for it). Both are torn down when the session ends, fails or is
interrupted; a killed session's leftovers are swept by the next start.

``--kube-version`` (default ``$DRAKIT_KUBE_VERSION``, else the pinned version)
picks the Kubernetes version of every control plane and kubelet harness of the
session; ``make test-compat`` runs the ``compat`` tests once per supported
version this way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import eventually as wait_until

from drakit.kubeapi.client import RateLimitedApiClient, load_client
from drakit.kubeapi.clusterversion import MinorFacts, facts_for
from drakit.kubeapi.pool import widen_connection_pool
from drakit.kubeapi.resources import RESOURCE_CLAIMS, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.assets import selected_version
from drakit.localcluster.kubeversions import minor_of, resolve_version

TESTS = Path(__file__).parent
# drakit's public test kit (drakit_node, drakit_plugin, ...), as a driver's own tests load it.
pytest_plugins = ["drakit.testing"]
# Each top-level folder is one tier, and its marker says so: `make unit` deselects the others.
_FOLDER_MARKERS = {
    "integration": "integration",
    "e2e": "e2e",
    "node": "node",
    "differential": "differential",
    "soak": "soak",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = Path(item.path).relative_to(TESTS).parts[0]
        except ValueError:
            continue
        marker = _FOLDER_MARKERS.get(top)
        if marker is not None:
            item.add_marker(marker)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kube-version",
        default=None,
        help="Kubernetes version (v1.36.3 or v1.36) of the session's control planes and "
        "kubelet harnesses (default: $DRAKIT_KUBE_VERSION, else drakit's pinned version)",
    )


def pytest_configure(config: pytest.Config) -> None:
    wanted = config.getoption("--kube-version")
    if wanted:
        # Subprocesses (hack/build-binaries.sh, the launcher) read the same variable.
        os.environ["DRAKIT_KUBE_VERSION"] = resolve_version(wanted)


@pytest.fixture(scope="session")
def kube_version() -> str:
    """The Kubernetes version this session runs against (see --kube-version)."""
    return selected_version()


@pytest.fixture(scope="session")
def kube_facts(kube_version: str) -> MinorFacts:
    """What that version's minor offers (gates on by default, kubelet gRPC services)."""
    return facts_for(minor_of(kube_version))


@pytest.fixture(scope="session")
def cluster(drakit_cluster: LocalCluster) -> LocalCluster:
    """The session's control plane: drakit.testing's ``drakit_cluster`` (of the session's
    version, $DRAKIT_KUBE_VERSION), so drakit's tests and the example driver's, which know
    only drakit.testing, share one."""
    return drakit_cluster


@pytest.fixture(scope="session")
def cluster_with_scheduler(kube_version: str) -> Iterator[LocalCluster]:
    with LocalCluster(ClusterConfig(with_scheduler=True, kube_version=kube_version)) as c:
        yield c


def _fresh_namespace(cluster: LocalCluster) -> Iterator[str]:
    from kubernetes import client  # noqa: PLC0415

    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace in ``cluster``, deleted after the test."""
    yield from _fresh_namespace(cluster)


@pytest.fixture
def other_namespace(cluster: LocalCluster) -> Iterator[str]:
    """A second fresh namespace, for tests about two tenants."""
    yield from _fresh_namespace(cluster)


@pytest.fixture(scope="session")
def kubelet_harness_binary(kube_version: str) -> Path:
    """The kubelet harness (the real DRA manager of ``kube_version``), built once per cache."""
    from harness.kubelet import build_harness_binary  # noqa: PLC0415

    try:
        return build_harness_binary(Path(__file__).resolve().parents[1], kube_version)
    except FileNotFoundError as err:
        pytest.skip(f"kubelet harness not built: {err}")


# -- shared by the integration tests (a conftest in tests/integration would put that folder
# on sys.path, where tests/integration/node_plugin/ shadows the node_plugin package) ------

Wait = Callable[..., Any]


@pytest.fixture(scope="session")
def api(cluster: LocalCluster) -> RateLimitedApiClient:
    """No client-side limit (QPS 0): tests measure drakit, not a token bucket; a pool wide
    enough for the informers and workers of a controller under test."""
    client = load_client(cluster.kubeconfig, qps=0)
    widen_connection_pool(client, 32)
    return client


@pytest.fixture
def claims(api: RateLimitedApiClient) -> Resource:
    return Resource(api, RESOURCE_CLAIMS)


@pytest.fixture
def eventually() -> Wait:
    """:func:`helpers.waiting.eventually` as a fixture: ``eventually(fn, what=, timeout=)``."""
    return partial(wait_until, interval=0.05)
