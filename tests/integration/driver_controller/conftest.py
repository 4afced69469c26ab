"""Fixtures for the tests of drakit's driver controller and of the companion controller beside
kube-scheduler's newer DRA features (binding conditions, extended resources, PodGroup claims).

One control plane for the folder: kube-apiserver, etcd and the real kube-scheduler, with the
PodGroup API (scheduling.k8s.io/v1beta1) and the gates of workload claims on, so that one
cluster serves every test here. Binding conditions and extended resources are on by default
in the pinned Kubernetes. There is no kube-controller-manager and no kubelet: claims are
created by the tests, nodes are fake (Ready, untainted).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drakit.kubeapi.client import load_client
from drakit.kubeapi.errors import ApiError
from drakit.kubeapi.resources import NAMESPACES, Resource
from drakit.localcluster import ClusterConfig, LocalCluster
from drakit.localcluster.kubeversions import default_feature_gates

#: Gates of PodGroup claims (KEP-5729) and of the PodGroup API they need (gang scheduling
#: is no gate of its own any more in 1.37).
WORKLOAD_GATES = "DRAWorkloadResourceClaims=true,GenericWorkload=true"
#: PodGroups are served as scheduling.k8s.io/v1beta1 by 1.37 (v1alpha2 is gone there).
WORKLOAD_RUNTIME_CONFIG = "--runtime-config=scheduling.k8s.io/v1beta1=true"


@pytest.fixture(scope="session")
def workload_cluster(kube_version: str) -> Iterator[LocalCluster]:
    gates = ",".join(filter(None, (default_feature_gates(kube_version), WORKLOAD_GATES)))
    config = ClusterConfig(
        with_scheduler=True,
        kube_version=kube_version,
        feature_gates=gates,
        extra_apiserver_args=(WORKLOAD_RUNTIME_CONFIG,),
    )
    with LocalCluster(config) as c:
        yield c


@pytest.fixture(scope="session")
def wapi(workload_cluster: LocalCluster) -> Any:
    """An admin client of ``workload_cluster`` (no client-side limit)."""
    return load_client(workload_cluster.kubeconfig, qps=0)


@pytest.fixture
def wnamespace(wapi: Any) -> Iterator[str]:
    """A fresh namespace in ``workload_cluster``."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    namespaces = Resource(wapi, NAMESPACES)
    namespaces.create({"metadata": {"name": name}})
    yield name
    with contextlib.suppress(ApiError):
        namespaces.delete(name)


class Background:
    """Runs ``target(stop)`` on a thread until the test ends."""

    def __init__(self) -> None:
        self._runs: list[tuple[threading.Event, threading.Thread]] = []

    def start(self, target: Callable[[threading.Event], None]) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=target, args=(stop,), daemon=True)
        thread.start()
        self._runs.append((stop, thread))

    def stop(self) -> None:
        for stop, _ in self._runs:
            stop.set()
        for _, thread in self._runs:
            thread.join(60)


@pytest.fixture
def background() -> Iterator[Background]:
    runs = Background()
    yield runs
    runs.stop()
