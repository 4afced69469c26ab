"""The kubelet harness drives a DRA plugin with the kubelet's own code.

Each test runs ``kubelet-harness`` (the real ``pkg/kubelet/cm/dra`` manager
and ``pkg/kubelet/pluginmanager`` of Kubernetes v1.37.2) for a fresh fake
Node against the session's real API server, and a fake DRA plugin that
serves the real registration and v1 DRAPlugin gRPC services on Unix sockets.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.cdi import assert_cdi_ids_resolve
from harness.fake_dra_plugin import FakeDRAPlugin
from harness.kubelet import KubeletHarness, build_harness_binary
from helpers.waiting import eventually
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drakit.localcluster import LocalCluster

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DRIVER = "gpu.harness.example.com"
REQUEST = "gpu"
EVENT_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def harness_binary() -> Path:
    try:
        return build_harness_binary(REPO)
    except FileNotFoundError as err:
        pytest.skip(f"kubelet harness not built: {err}")


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 108 bytes; pytest's tmp_path can be
    # longer than that once a driver name and socket file are appended.
    path = Path(tempfile.mkdtemp(prefix="kh-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def node(cluster: LocalCluster) -> Iterator[str]:
    core = client.CoreV1Api(cluster.api_client())
    name = f"harness-{uuid.uuid4().hex[:8]}"
    core.create_node({"metadata": {"name": name}})
    yield name
    core.delete_node(name)


@pytest.fixture
def harness(
    harness_binary: Path, cluster: LocalCluster, node: str, socket_dir: Path, tmp_path: Path
) -> Iterator[KubeletHarness]:
    registrar = socket_dir / "plugins_registry"
    state = tmp_path / "kubelet-state"
    registrar.mkdir()
    state.mkdir()
    with KubeletHarness(
        harness_binary,
        cluster.kubeconfig,
        node,
        registrar,
        state,
        feature_gates=cluster.feature_gates,
    ) as h:
        yield h


@pytest.fixture
def plugin(socket_dir: Path, tmp_path: Path, node: str) -> Iterator[FakeDRAPlugin]:
    """A fake plugin for ``DRIVER`` on ``node``; the test decides when it starts."""
    fake = FakeDRAPlugin(
        driver=DRIVER,
        registrar_dir=socket_dir / "plugins_registry",
        plugin_dir=socket_dir / "plugins" / DRIVER,
        cdi_dir=tmp_path / "cdi",
        pool=node,
        request_name=REQUEST,
    )
    yield fake
    fake.stop()


# -- API objects ---------------------------------------------------------------


def create_claim(cluster: LocalCluster, namespace: str, name: str) -> str:
    """Create a one-device claim and return its UID."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "devices": {"requests": [{"name": REQUEST, "exactly": {"deviceClassName": DRIVER}}]}
        },
    }
    claim = client.ResourceV1Api(cluster.api_client()).create_namespaced_resource_claim(
        namespace, body
    )
    return str(claim.metadata.uid)


def create_pod(cluster: LocalCluster, namespace: str, name: str, node: str, claim: str) -> str:
    """Create a pod bound to ``node`` whose container "main" uses ``claim``; return its UID."""
    body = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                },
                {"name": "sidecar", "image": "registry.k8s.io/pause:3.10"},
            ],
        },
    }
    pod = client.CoreV1Api(cluster.api_client()).create_namespaced_pod(namespace, body)
    return str(pod.metadata.uid)


def allocate_and_reserve(
    cluster: LocalCluster, namespace: str, claim: str, *, node: str, pod: str, pod_uid: str
) -> None:
    """Write what the scheduler would: an allocation on ``node`` reserved for the pod."""
    status: dict[str, Any] = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": REQUEST, "driver": DRIVER, "pool": node, "device": "dev-0"}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": pod_uid}],
        }
    }
    client.ResourceV1Api(cluster.api_client()).patch_namespaced_resource_claim_status(
        claim, namespace, status
    )


def wait_until_pod_is_gone(cluster: LocalCluster, namespace: str, name: str) -> None:
    core = client.CoreV1Api(cluster.api_client())

    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except ApiException as err:
            if err.status == 404:
                return True
            raise
        return False

    eventually(gone, f"pod {namespace}/{name} gone after its deletion", EVENT_TIMEOUT)


def start_and_wait_registered(plugin: FakeDRAPlugin, harness: KubeletHarness) -> dict[str, Any]:
    plugin.start()
    registered = harness.wait_for("registered", driver=DRIVER, timeout=EVENT_TIMEOUT)
    assert plugin.registered.wait(EVENT_TIMEOUT), "kubelet never sent NotifyRegistrationStatus"
    return registered


# -- tests ---------------------------------------------------------------------


@pytest.mark.compat
def test_real_kubelet_dra_manager_registers_plugin_and_prepares_pod(
    cluster: LocalCluster,
    namespace: str,
    node: str,
    harness: KubeletHarness,
    plugin: FakeDRAPlugin,
) -> None:
    registered = start_and_wait_registered(plugin, harness)
    assert registered["endpoint"] == str(plugin.endpoint)
    assert registered["versions"] == ["v1.DRAPlugin"]
    assert plugin.registration_statuses == [(True, "")]

    claim_uid = create_claim(cluster, namespace, "one-gpu")
    pod_uid = create_pod(cluster, namespace, "worker", node, "one-gpu")
    allocate_and_reserve(cluster, namespace, "one-gpu", node=node, pod="worker", pod_uid=pod_uid)

    prepared = harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert prepared["uid"] == pod_uid
    assert prepared["containers"] == {"main": [plugin.cdi_id(claim_uid)], "sidecar": []}
    assert plugin.prepare_calls == [[(namespace, "one-gpu", claim_uid)]]
    assert_cdi_ids_resolve(prepared["containers"]["main"], plugin.cdi_dir)


@pytest.mark.compat
def test_deleting_pod_unprepares_its_claim_and_removes_the_pod(
    cluster: LocalCluster,
    namespace: str,
    node: str,
    harness: KubeletHarness,
    plugin: FakeDRAPlugin,
) -> None:
    start_and_wait_registered(plugin, harness)
    claim_uid = create_claim(cluster, namespace, "one-gpu")
    pod_uid = create_pod(cluster, namespace, "worker", node, "one-gpu")
    allocate_and_reserve(cluster, namespace, "one-gpu", node=node, pod="worker", pod_uid=pod_uid)
    harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)

    client.CoreV1Api(cluster.api_client()).delete_namespaced_pod("worker", namespace)

    unprepared = harness.wait_for("unprepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert unprepared["uid"] == pod_uid
    assert plugin.unprepare_calls == [[(namespace, "one-gpu", claim_uid)]]
    # Acting as the kubelet, the harness finishes the graceful deletion.
    wait_until_pod_is_gone(cluster, namespace, "worker")


def test_prepare_fails_until_claim_is_reserved_for_the_pod(
    cluster: LocalCluster,
    namespace: str,
    node: str,
    harness: KubeletHarness,
    plugin: FakeDRAPlugin,
) -> None:
    start_and_wait_registered(plugin, harness)
    claim_uid = create_claim(cluster, namespace, "one-gpu")
    pod_uid = create_pod(cluster, namespace, "worker", node, "one-gpu")

    failed = harness.wait_for("prepare-failed", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert "not allowed to use ResourceClaim one-gpu" in failed["error"]
    assert plugin.prepare_calls == []

    allocate_and_reserve(cluster, namespace, "one-gpu", node=node, pod="worker", pod_uid=pod_uid)
    prepared = harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert prepared["containers"]["main"] == [plugin.cdi_id(claim_uid)]


def test_pod_waiting_for_unregistered_driver_is_prepared_once_plugin_registers(
    cluster: LocalCluster,
    namespace: str,
    node: str,
    harness: KubeletHarness,
    plugin: FakeDRAPlugin,
) -> None:
    claim_uid = create_claim(cluster, namespace, "one-gpu")
    pod_uid = create_pod(cluster, namespace, "worker", node, "one-gpu")
    allocate_and_reserve(cluster, namespace, "one-gpu", node=node, pod="worker", pod_uid=pod_uid)
    # Until the claim status is written the pod is refused for that reason
    # instead; wait for the refusal that names the missing driver.
    harness.wait_for(
        "prepare-failed",
        pod=f"{namespace}/worker",
        timeout=EVENT_TIMEOUT,
        where=lambda ev: f"DRA driver {DRIVER} is not registered" in ev["error"],
    )
    assert plugin.prepare_calls == []

    start_and_wait_registered(plugin, harness)

    prepared = harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert prepared["containers"]["main"] == [plugin.cdi_id(claim_uid)]


def test_restarted_harness_prepares_again_with_the_same_cdi_ids(
    cluster: LocalCluster,
    namespace: str,
    node: str,
    harness: KubeletHarness,
    plugin: FakeDRAPlugin,
) -> None:
    start_and_wait_registered(plugin, harness)
    claim_uid = create_claim(cluster, namespace, "one-gpu")
    pod_uid = create_pod(cluster, namespace, "worker", node, "one-gpu")
    allocate_and_reserve(cluster, namespace, "one-gpu", node=node, pod="worker", pod_uid=pod_uid)
    before = harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)

    assert harness.stop() == 0
    harness.start()

    # The registration socket is still there: the restarted plugin manager
    # finds it, and the DRA manager prepares the checkpointed claim again.
    harness.wait_for("registered", driver=DRIVER, timeout=EVENT_TIMEOUT)
    after = harness.wait_for("prepared", pod=f"{namespace}/worker", timeout=EVENT_TIMEOUT)
    assert after["containers"] == before["containers"]
    assert plugin.prepare_calls == [[(namespace, "one-gpu", claim_uid)]] * 2


def test_removing_registration_socket_deregisters_plugin(
    harness: KubeletHarness, plugin: FakeDRAPlugin
) -> None:
    start_and_wait_registered(plugin, harness)

    plugin.stop()

    gone = harness.wait_for("deregistered", driver=DRIVER, timeout=EVENT_TIMEOUT)
    assert gone["endpoint"] == str(plugin.endpoint)
