"""Session fixtures: one real control plane per test session.

``cluster`` is etcd + kube-apiserver; ``cluster_with_scheduler`` is a second
control plane that also runs the real kube-scheduler (started only when a test
asks for it). Both are torn down when the session ends, fails or is
interrupted; a killed session's leftovers are swept by the next start.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drakit.localcluster import ClusterConfig, LocalCluster
from kubeapi.client import RateLimitedApiClient, load_client
from kubeapi.pool import widen_connection_pool
from kubeapi.resources import RESOURCE_CLAIMS, Resource

TESTS = Path(__file__).parent
# Each top-level folder is one tier, and its marker says so: `make unit` deselects the others.
_FOLDER_MARKERS = {
    "integration": "integration",
    "e2e": "e2e",
    "node": "node",
    "differential": "differential",
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


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(ClusterConfig()) as c:
        yield c


@pytest.fixture(scope="session")
def cluster_with_scheduler() -> Iterator[LocalCluster]:
    with LocalCluster(ClusterConfig(with_scheduler=True)) as c:
        yield c


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace in ``cluster``, deleted after the test."""
    from kubernetes import client  # noqa: PLC0415

    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="session")
def kubelet_harness_binary() -> Path:
    """The kubelet harness (the real v1.37.2 DRA manager), built once per cache."""
    from harness.kubelet import build_harness_binary  # noqa: PLC0415

    try:
        return build_harness_binary(Path(__file__).resolve().parents[1])
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
    """``eventually(fn)``: poll ``fn`` until it returns something truthy, and return that.

    The timeout only keeps a broken test from hanging; nothing asserts how long it took.
    """

    def wait(fn: Callable[[], Any], timeout: float = 120.0, message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = fn()
            if result:
                return result
            if time.monotonic() > deadline:
                pytest.fail(f"condition never became true: {message or fn}")
            time.sleep(0.05)

    return wait
