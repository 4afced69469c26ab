"""Shares of one multi-allocatable device, prepared for the kubelet's own DRA manager.

The kubelet harness (``pkg/kubelet/cm/dra`` of Kubernetes 1.37) drives a real node plugin
(gRPC over Unix sockets, the real core and the example backend) for pods whose claims
were allocated shares (``shareID``, ``consumedCapacity``) of one device: two shares in one
claim, and two claims with a share each in one container. Both must prepare, with a CDI
device per share that a runtime can resolve.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claims import DRIVER, claims_resource
from conftest import EXAMPLE_CONFIG
from harness.cdi import assert_cdi_ids_resolve
from harness.kubelet import KubeletHarness, build_harness_binary

from drakit.backends.example import ExampleBackend
from drakit.kubeapi.resources import NODES, PODS, Resource
from drakit.localcluster import LocalCluster
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import PluginConfig
from drakit.node_plugin.metrics import PluginMetrics
from drakit.plugin import BackendContext, BackendPrepared, ClaimToPrepare, RequestContext

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 60.0
SHARED = "shared-gpu-0"


class RecordingBackend(ExampleBackend):
    """The example backend, keeping every device it was asked to prepare."""

    def __init__(self, context: BackendContext) -> None:
        super().__init__(context)
        self.seen: list[Any] = []

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        self.seen.extend(claim.devices)
        return super().prepare(claim, context)


@pytest.fixture
def node(api: Any) -> Iterator[str]:
    name = f"shares-{uuid.uuid4().hex[:8]}"
    Resource(api, NODES).create({"metadata": {"name": name}})
    yield name
    Resource(api, NODES).delete(name)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="shr-", dir="/tmp"))  # short: socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(cluster: LocalCluster, node: str, root: Path) -> Iterator[KubeletHarness]:
    try:
        binary = build_harness_binary(REPO)
    except FileNotFoundError as err:
        pytest.skip(f"kubelet harness not built: {err}")
    for folder in ("registry", "state"):
        (root / folder).mkdir()
    with KubeletHarness(
        binary,
        cluster.kubeconfig,
        node,
        root / "registry",
        root / "state",
        feature_gates=cluster.feature_gates,
    ) as harness:
        yield harness


@pytest.fixture
def backend(node: str) -> RecordingBackend:
    return RecordingBackend(BackendContext(DRIVER, node, EXAMPLE_CONFIG))


@pytest.fixture
def plugin(
    api: Any, node: str, root: Path, kubelet: KubeletHarness, backend: RecordingBackend
) -> Iterator[PluginConfig]:
    for folder in ("plugins", "cdi"):
        (root / folder).mkdir()
    (root / "plugins" / DRIVER).mkdir()
    config = PluginConfig(
        driver_name=DRIVER,
        node_name=node,
        kubeconfig=None,
        registrar_dir=root / "registry",
        plugins_dir=root / "plugins",
        cdi_root=root / "cdi",
        backend="example",
    )
    core = PrepareCore(config, PluginMetrics(), backend, claims_resource(api))
    running = NodePlugin(config, core=core)
    running.start()
    kubelet.wait_for("registered", driver=DRIVER, timeout=TIMEOUT)
    yield config
    running.stop(grace=1)


def _share(request: str, node: str, memory: str) -> dict[str, Any]:
    return {
        "request": request,
        "driver": DRIVER,
        "pool": node,
        "device": SHARED,
        "shareID": str(uuid.uuid4()),
        "consumedCapacity": {"memory": memory},
    }


def _claim(api: Any, namespace: str, name: str, results: list[dict[str, Any]]) -> str:
    claims = claims_resource(api)
    requests = sorted({r["request"] for r in results})
    obj = claims.create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": r, "exactly": {"deviceClassName": DRIVER}} for r in requests
                    ]
                }
            },
        }
    )
    obj["status"] = {"allocation": {"devices": {"results": results}}}
    return str(claims.update_status(obj)["metadata"]["uid"])


def _pod_using(api: Any, namespace: str, node: str, claim_names: list[str]) -> str:
    """A pod on ``node`` whose container "main" uses every claim; reserves them for it."""
    name = f"pod-{uuid.uuid4().hex[:6]}"
    pod = Resource(api, PODS).create(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "nodeName": node,
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claim_names],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": c} for c in claim_names]},
                    }
                ],
            },
        }
    )
    claims = claims_resource(api)
    for claim_name in claim_names:
        obj = claims.get(claim_name, namespace)
        obj["status"]["reservedFor"] = [
            {"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}
        ]
        claims.update_status(obj)
    return f"{namespace}/{name}"


def test_two_shares_of_one_device_in_one_claim_get_two_cdi_devices(
    *,
    api: Any,
    namespace: str,
    node: str,
    kubelet: KubeletHarness,
    plugin: PluginConfig,
    backend: RecordingBackend,
) -> None:
    results = [_share("a", node, "10Gi"), _share("b", node, "20Gi")]
    uid = _claim(api, namespace, "two-shares", results)
    pod = _pod_using(api, namespace, node, ["two-shares"])

    prepared = kubelet.wait_for("prepared", pod=pod, timeout=TIMEOUT)
    ids = prepared["containers"]["main"]
    assert sorted(ids) == sorted(
        f"k8s.{DRIVER}/claim={uid}-{SHARED}-{r['shareID']}" for r in results
    )
    assert_cdi_ids_resolve(ids, plugin.cdi_root)
    assert {(d.share_id, str(d.consumed_capacity["memory"])) for d in backend.seen} == {
        (results[0]["shareID"], "10Gi"),
        (results[1]["shareID"], "20Gi"),
    }


def test_two_claims_with_a_share_each_in_one_container_both_prepare(
    *,
    api: Any,
    namespace: str,
    node: str,
    kubelet: KubeletHarness,
    plugin: PluginConfig,
    backend: RecordingBackend,
) -> None:
    first, second = _share("gpu", node, "30Gi"), _share("gpu", node, "40Gi")
    uids = [_claim(api, namespace, "share-1", [first]), _claim(api, namespace, "share-2", [second])]
    pod = _pod_using(api, namespace, node, ["share-1", "share-2"])

    prepared = kubelet.wait_for("prepared", pod=pod, timeout=TIMEOUT)
    ids = prepared["containers"]["main"]
    assert sorted(ids) == sorted(
        [
            f"k8s.{DRIVER}/claim={uids[0]}-{SHARED}-{first['shareID']}",
            f"k8s.{DRIVER}/claim={uids[1]}-{SHARED}-{second['shareID']}",
        ]
    )
    assert_cdi_ids_resolve(ids, plugin.cdi_root)
    assert sorted(str(d.consumed_capacity["memory"]) for d in backend.seen) == ["30Gi", "40Gi"]
