"""Fault tools of the injector against a real control plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import Gone
from drakit.kubeapi.resources import NAMESPACES, RESOURCE_CLAIMS, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from soak.faults import compact_etcd
from soak.stack import UNCACHED_WATCHES


@pytest.fixture(scope="module")
def uncached_cluster() -> Iterator[LocalCluster]:
    """A control plane whose DRA objects are watched from etcd, as in the soak."""
    config = ClusterConfig(extra_apiserver_args=(f"--watch-cache-sizes={UNCACHED_WATCHES}",))
    with LocalCluster(config) as cluster:
        yield cluster


def test_compacting_etcd_sends_a_claim_watch_from_an_older_revision_410_gone(
    uncached_cluster: LocalCluster,
) -> None:
    client = load_client(uncached_cluster.kubeconfig)
    Resource(client, NAMESPACES).create({"metadata": {"name": "compaction"}})
    claims = Resource(client, RESOURCE_CLAIMS)
    spec = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "none"}}]}}
    first = claims.create({"metadata": {"name": "before"}, "spec": spec}, "compaction")
    for i in range(3):  # the watch starts after ``old``: that revision must be compacted too
        claims.create({"metadata": {"name": f"after-{i}"}, "spec": spec}, "compaction")
    old = first["metadata"]["resourceVersion"]
    compact_etcd(uncached_cluster.etcd_url)
    with (
        pytest.raises(Gone),
        claims.watch("compaction", resource_version=old, timeout_seconds=5) as stream,
    ):
        for _ in stream:
            pass
