"""Fixtures every integration test shares: a kubeapi client on the session's cluster, a
claims resource and ``eventually``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from drakit.localcluster import LocalCluster
from kubeapi.client import RateLimitedApiClient, load_client
from kubeapi.pool import widen_connection_pool
from kubeapi.resources import RESOURCE_CLAIMS, Resource

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
