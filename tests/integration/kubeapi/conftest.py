"""Fixtures for the kubeapi integration tests: a kubeapi client on the session's cluster."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from drakit.localcluster import LocalCluster

Wait = Callable[..., Any]


@pytest.fixture
def compact_etcd(cluster: LocalCluster) -> Callable[[], int]:
    """Compact etcd at its current revision (what the apiserver does every 5 minutes), so that
    watches from older resourceVersions fail with 410 Gone. Returns the revision."""

    def compact() -> int:
        key = base64.b64encode(b"/registry").decode()
        revision = int(_etcd_post(cluster, "/v3/kv/range", {"key": key})["header"]["revision"])
        _etcd_post(cluster, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    return compact


def _etcd_post(cluster: LocalCluster, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        cluster.etcd_url + path, data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.load(response)
        return result
