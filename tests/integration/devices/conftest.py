"""Fixtures for ``drakit devices`` against the real apiserver: an admin client and the
two-node workload of ``devices_workload``, removed again after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from devices_workload import Workload

from drakit.kubeapi.client import RateLimitedApiClient, load_client
from drakit.localcluster import LocalCluster


@pytest.fixture(scope="session")
def admin_api(cluster: LocalCluster) -> RateLimitedApiClient:
    return load_client(cluster.kubeconfig, qps=0)


@pytest.fixture
def workload(admin_api: RateLimitedApiClient, namespace: str) -> Iterator[Workload]:
    w = Workload(admin_api, namespace)
    try:
        w.create()
        yield w
    finally:
        w.delete()
