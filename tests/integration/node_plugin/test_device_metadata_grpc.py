"""Device metadata (KEP-5304) through the kubelet-facing socket: the real core and the example
backend with ``deviceMetadata``, claims on the real apiserver, CDI specs and metadata files
in real directories. The DRA protos have no metadata field (v1 and v1beta1 alike): the
plugin returns the metadata as one more CDI device ID on a request's first device, whose
spec bind-mounts the request's metadata file read-only at the path upstream defines."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from claims import DRIVER, NODE, claims_resource, create_claim, make_config, result
from conftest import EXAMPLE_CONFIG, RecordingEvents

from drakit.kubeapi.client import RateLimitedApiClient
from drakit.kubeapi.resources import Resource
from drakit.kubeletapi.gen.dra.v1 import api_pb2 as v1
from drakit.kubeletapi.gen.dra.v1 import api_pb2_grpc as v1_grpc
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2 as v1beta1
from drakit.kubeletapi.gen.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from drakit.node_plugin.app import NodePlugin
from drakit.node_plugin.backends.registry import load_backend
from drakit.node_plugin.core import PrepareCore
from drakit.node_plugin.driver import ClaimRef
from drakit.node_plugin.metrics import PluginMetrics

pytestmark = pytest.mark.integration

METADATA_DIR = "/var/run/kubernetes.io/dra-device-attributes"


@pytest.fixture
def plugin_with(api: RateLimitedApiClient) -> Iterator[Any]:
    """Starts a plugin with the example backend and ``device_metadata`` on or off."""
    started: list[tuple[NodePlugin, tempfile.TemporaryDirectory[str]]] = []

    def start(device_metadata: bool, **backend_config: Any) -> NodePlugin:
        root = tempfile.TemporaryDirectory(prefix="drk-", dir="/tmp")  # short socket paths
        config = make_config(Path(root.name))
        backend = load_backend(
            "example",
            driver_name=DRIVER,
            node_name=NODE,
            config={**EXAMPLE_CONFIG, "deviceMetadata": device_metadata, **backend_config},
        )
        metrics = PluginMetrics()
        core = PrepareCore(
            config, metrics, backend, claims_resource(api), events=RecordingEvents(),
            boot_id=lambda: "boot-1",
        )  # fmt: skip
        plugin = NodePlugin(config, core=core, metrics=metrics)
        plugin.start()
        started.append((plugin, root))
        return plugin

    yield start
    for plugin, root in started:
        plugin.stop(grace=1)
        root.cleanup()


def prepare_v1(plugin: NodePlugin, ref: ClaimRef) -> v1.NodePrepareResourceResponse:
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1.NodePrepareResourcesRequest(
                claims=[v1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)]
            ),
            timeout=10,
        )
    answer = response.claims[ref.uid]
    assert answer.error == ""
    return answer


def metadata_mount(plugin: NodePlugin, ref: ClaimRef, cdi_id: str) -> dict[str, Any]:
    """The ``mounts`` entry of the CDI device ``cdi_id`` in the claim's spec file."""
    kind, _, name = cdi_id.partition("=")
    spec = json.loads(plugin.core.cdi.spec_path(ref.uid).read_text())  # type: ignore[attr-defined]
    assert spec["kind"] == kind
    (device,) = [d for d in spec["devices"] if d["name"] == name]
    (mount,) = device["containerEdits"]["mounts"]
    return dict(mount)


def test_v1_prepare_returns_a_metadata_file_with_the_claim_request_and_attributes(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    plugin = plugin_with(device_metadata=True)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0"), result("gpu", "gpu-1")])
    first, second = prepare_v1(plugin, ref).devices
    assert len(second.cdi_device_ids) == 1  # one metadata file per request, on its first device
    claim_id, metadata_id = first.cdi_device_ids
    assert claim_id == f"k8s.{DRIVER}/claim={ref.uid}-gpu-0"
    mount = metadata_mount(plugin, ref, metadata_id)
    assert mount["containerPath"] == (
        f"{METADATA_DIR}/resourceclaims/{ref.name}/gpu/{DRIVER}-metadata.json"
    )
    assert mount["options"] == ["ro", "bind"]
    written = json.loads(Path(mount["hostPath"]).read_text())
    assert (written["kind"], written["apiVersion"]) == (
        "DeviceMetadata",
        "metadata.resource.k8s.io/v1beta1",
    )
    assert {k: written["metadata"][k] for k in ("name", "namespace", "uid")} == {
        "name": ref.name,
        "namespace": ref.namespace,
        "uid": ref.uid,
    }
    (request,) = written["requests"]
    assert request["name"] == "gpu"
    assert [(d["driver"], d["pool"], d["name"]) for d in request["devices"]] == [
        (DRIVER, NODE, "gpu-0"),
        (DRIVER, NODE, "gpu-1"),
    ]
    assert request["devices"][1]["attributes"]["index"] == {"int": 1}
    assert request["devices"][0]["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}


def test_v1beta1_prepare_returns_the_same_metadata_device_as_v1(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    """Upstream's helper serves v1beta1 through its v1 implementation: same CDI IDs."""
    plugin = plugin_with(device_metadata=True)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-2")])
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        response = v1beta1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1beta1.NodePrepareResourcesRequest(
                claims=[v1beta1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)]
            ),
            timeout=10,
        )
    (device,) = response.claims[ref.uid].devices
    assert list(device.cdi_device_ids) == list(prepare_v1(plugin, ref).devices[0].cdi_device_ids)
    assert len(device.cdi_device_ids) == 2


def test_claim_from_a_template_is_mounted_under_the_pods_claim_name(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    plugin = plugin_with(device_metadata=True)
    ref = create_claim(
        claims,
        namespace,
        [result("gpu", "gpu-0")],
        annotations={"resource.kubernetes.io/pod-claim-name": "my-gpu"},
    )
    (device,) = prepare_v1(plugin, ref).devices
    mount = metadata_mount(plugin, ref, device.cdi_device_ids[1])
    assert mount["containerPath"] == (
        f"{METADATA_DIR}/resourceclaimtemplates/my-gpu/gpu/{DRIVER}-metadata.json"
    )
    assert json.loads(Path(mount["hostPath"]).read_text())["podClaimName"] == "my-gpu"


def test_unprepare_removes_the_metadata_file(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    plugin = plugin_with(device_metadata=True)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-3")])
    (device,) = prepare_v1(plugin, ref).devices
    host_file = Path(metadata_mount(plugin, ref, device.cdi_device_ids[1])["hostPath"])
    assert host_file.is_file()
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        done = v1_grpc.DRAPluginStub(channel).NodeUnprepareResources(
            v1.NodeUnprepareResourcesRequest(
                claims=[v1.Claim(namespace=ref.namespace, uid=ref.uid, name=ref.name)]
            ),
            timeout=10,
        )
    assert done.claims[ref.uid].error == ""
    assert not host_file.exists()
    assert not host_file.parent.parent.exists()  # the claim's folder


def test_backend_without_metadata_returns_no_metadata_device(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    plugin = plugin_with(device_metadata=False)
    ref = create_claim(claims, namespace, [result("gpu", "gpu-0")])
    (device,) = prepare_v1(plugin, ref).devices
    assert list(device.cdi_device_ids) == [f"k8s.{DRIVER}/claim={ref.uid}-gpu-0"]
    data_dir = plugin.config.plugin_data_dir
    assert not (data_dir / "dra-device-metadata").exists()


# pod-claim-name annotations the apiserver stores (annotation values are free text) but that
# are no pod claim name (a DNS label): each would put the file somewhere else in the container.
HOSTILE_POD_CLAIM_NAMES = {
    "climb": "../../../../../usr/lib",
    "parent": "..",
    "slash": "my-gpu/../../x",
    "absolute": "/etc",
    "nul": "gpu\x00x",
    "too long": "g" * 64,
    "upper": "My-GPU",
}


def test_a_hostile_pod_claim_name_is_refused_per_claim_and_nothing_is_written_outside(
    plugin_with: Any, claims: Resource, namespace: str
) -> None:
    """One NodePrepareResources call with every hostile annotation and one good claim: each
    hostile claim gets its own error naming it, the annotation and the reason; the good claim
    is prepared; the refused claims leave no CDI spec and no metadata folder, and every
    container path in the specs stays inside the metadata directory."""
    plugin = plugin_with(device_metadata=True, gpus=len(HOSTILE_POD_CLAIM_NAMES) + 1)
    hostile = {
        create_claim(
            claims,
            namespace,
            [result("gpu", f"gpu-{i}")],
            annotations={"resource.kubernetes.io/pod-claim-name": value},
        ): value
        for i, value in enumerate(HOSTILE_POD_CLAIM_NAMES.values())
    }
    good = create_claim(
        claims,
        namespace,
        [result("gpu", f"gpu-{len(hostile)}")],
        annotations={"resource.kubernetes.io/pod-claim-name": "my-gpu"},
    )
    refs = [*hostile, good]
    with grpc.insecure_channel(f"unix:{plugin.sockets.dra}") as channel:
        response = v1_grpc.DRAPluginStub(channel).NodePrepareResources(
            v1.NodePrepareResourcesRequest(
                claims=[v1.Claim(namespace=r.namespace, uid=r.uid, name=r.name) for r in refs]
            ),
            timeout=20,
        )
    for ref, value in hostile.items():
        error = response.claims[ref.uid].error
        assert f"ResourceClaim {ref.namespace}/{ref.name}" in error, error
        assert "annotation resource.kubernetes.io/pod-claim-name" in error, error
        assert repr(value[:64]) in error, error
        assert "is not a DNS label" in error, error
        assert not response.claims[ref.uid].devices
    assert response.claims[good.uid].error == ""

    data_dir = plugin.config.plugin_data_dir
    assert sorted(p.name for p in (data_dir / "dra-device-metadata").iterdir()) == [good.uid]
    specs = sorted(plugin.config.cdi_root.iterdir())
    assert [p.name for p in specs] == [plugin.core.cdi.spec_path(good.uid).name]  # type: ignore[attr-defined]
    for spec in specs:
        for device in json.loads(spec.read_text())["devices"]:
            for mount in device["containerEdits"].get("mounts", []):
                path = mount["containerPath"]
                assert path.startswith(f"{METADATA_DIR}/") and "/../" not in path, path
    # Nothing anywhere under the plugin's folders but what the good claim and the plugin
    # itself own: no stray metadata file outside the metadata folder.
    root = Path(plugin.config.plugins_dir).parent
    stray = [
        p
        for p in root.rglob("*metadata*")
        if p.is_file() and (data_dir / "dra-device-metadata" / good.uid) not in p.parents
    ]
    assert stray == []
