"""Metadata files (KEP-5304) written into a real directory: content, container paths, limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drakit.allocator.model import DeviceAttribute
from drakit.node_plugin.backends.base import DeviceMetadata, DeviceToPrepare, NetworkData
from drakit.node_plugin.device_metadata import (
    ClaimIdentity,
    DeviceMetadataError,
    MetadataFiles,
    UnsafeClaimNameError,
    container_path,
)

DRIVER = "gpu.example.com"
UID = "0f6b4c8e-1111-4d5e-9a7b-aaaaaaaaaaaa"
CLAIM = ClaimIdentity(uid=UID, namespace="ns", name="c")


def test_one_file_per_base_request_listing_its_devices_in_order(tmp_path: Path) -> None:
    devices = (
        DeviceToPrepare("gpu/big", "pool", "gpu-0"),
        DeviceToPrepare("nic", "pool", "nic-0"),
        DeviceToPrepare("gpu/big", "pool", "gpu-1"),
    )
    metadata = (
        DeviceMetadata(attributes={"index": DeviceAttribute("int", 0)}),
        DeviceMetadata(network_data=NetworkData("eth1", ("10.9.8.7/24",), "00:11:22:33:44:55")),
        None,
    )
    mounts = MetadataFiles(tmp_path, DRIVER).write(CLAIM, devices, metadata)
    assert [m.request for m in mounts] == ["gpu", "nic"]
    gpu_file = Path(mounts[0].edits.mounts[0].host_path)
    assert gpu_file == tmp_path / "dra-device-metadata" / UID / "gpu" / "metadata.json"
    written = json.loads(gpu_file.read_text())
    (request,) = written["requests"]
    assert request == {
        "name": "gpu/big",  # as the allocation names it; the path has the base request
        "devices": [
            {
                "driver": DRIVER,
                "pool": "pool",
                "name": "gpu-0",
                "attributes": {"index": {"int": 0}},
            },
            {"driver": DRIVER, "pool": "pool", "name": "gpu-1"},
        ],
    }
    nic = json.loads(Path(mounts[1].edits.mounts[0].host_path).read_text())
    assert nic["requests"][0]["devices"][0]["networkData"] == {
        "interfaceName": "eth1",
        "ips": ["10.9.8.7/24"],
        "hardwareAddress": "00:11:22:33:44:55",
    }


def test_list_attributes_are_written_as_json_lists(tmp_path: Path) -> None:
    devices = (DeviceToPrepare("r", "pool", "d"),)
    metadata = (DeviceMetadata(attributes={"numa": DeviceAttribute("ints", [0, 1])}),)
    (mount,) = MetadataFiles(tmp_path, DRIVER).write(CLAIM, devices, metadata)
    written = json.loads(Path(mount.edits.mounts[0].host_path).read_text())
    assert written["requests"][0]["devices"][0]["attributes"] == {"numa": {"ints": [0, 1]}}


def test_container_paths_are_upstreams_for_claims_and_template_claims() -> None:
    assert container_path(DRIVER, CLAIM, "gpu") == (
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/c/gpu/"
        "gpu.example.com-metadata.json"
    )
    templated = ClaimIdentity(uid=UID, namespace="ns", name="pod-gpu-x7k2", pod_claim_name="gpu")
    assert container_path(DRIVER, templated, "r") == (
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/r/"
        "gpu.example.com-metadata.json"
    )


def test_claim_identity_reads_the_pod_claim_name_annotation() -> None:
    obj = {
        "metadata": {
            "uid": UID,
            "namespace": "ns",
            "name": "pod-gpu-x7k2",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        }
    }
    assert ClaimIdentity.of(obj).pod_claim_name == "gpu"


def test_more_than_32_attributes_are_refused_naming_the_device(tmp_path: Path) -> None:
    attributes = {f"a{i}": DeviceAttribute("int", i) for i in range(33)}
    files = MetadataFiles(tmp_path, DRIVER)
    with pytest.raises(DeviceMetadataError, match="device pool/gpu-0: metadata attributes: 33"):
        files.write(CLAIM, (DeviceToPrepare("r", "pool", "gpu-0"),), (DeviceMetadata(attributes),))
    assert not (tmp_path / "dra-device-metadata").exists()


def test_remove_deletes_the_claims_folder_and_is_idempotent(tmp_path: Path) -> None:
    files = MetadataFiles(tmp_path, DRIVER)
    files.write(CLAIM, (DeviceToPrepare("r", "pool", "d"),), (None,))
    files.remove(UID)
    files.remove(UID)
    assert not (tmp_path / "dra-device-metadata" / UID).exists()


def test_a_uid_that_is_not_a_uuid_never_names_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a UUID"):
        MetadataFiles(tmp_path, DRIVER).remove("../../etc")


# Strings of a claim that would leave their folder, or are not what Kubernetes allows there.
NOT_LABELS = {
    "parent": "..",
    "self": ".",
    "climb": "../../../../etc",
    "slash": "a/b",
    "absolute": "/etc",
    "nul": "gpu\x00x",
    "newline": "gpu\nx",
    "dot": "a.b",  # a subdomain, but a pod's claim names are labels
    "upper": "My-GPU",
    "dash first": "-gpu",
    "too long": "a" * 64,
    "unicode": "gpü",
}


@pytest.mark.parametrize("value", NOT_LABELS.values(), ids=NOT_LABELS.keys())
def test_a_pod_claim_name_that_is_no_dns_label_is_refused_before_any_file_is_written(
    tmp_path: Path, value: str
) -> None:
    obj = {
        "metadata": {
            "uid": UID,
            "namespace": "ns",
            "name": "c",
            "annotations": {"resource.kubernetes.io/pod-claim-name": value},
        }
    }
    with pytest.raises(UnsafeClaimNameError) as refused:
        ClaimIdentity.of(obj)
    message = str(refused.value)
    assert "annotation resource.kubernetes.io/pod-claim-name" in message
    assert "is not a DNS label" in message
    # A ClaimIdentity made any other way is checked again where the path is built.
    claim = ClaimIdentity(uid=UID, namespace="ns", name="c", pod_claim_name=value)
    with pytest.raises(UnsafeClaimNameError):
        MetadataFiles(tmp_path, DRIVER).write(claim, (DeviceToPrepare("r", "pool", "d"),), (None,))
    with pytest.raises(UnsafeClaimNameError):
        container_path(DRIVER, claim, "r")
    assert list(tmp_path.iterdir()) == []


# "a/b" is request "a" with subrequest "b": its base request "a" is a fine folder name.
BAD_REQUESTS = {k: v for k, v in NOT_LABELS.items() if k != "slash"}


@pytest.mark.parametrize("value", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_a_request_name_that_is_no_dns_label_fails_the_claim_before_any_file_is_written(
    tmp_path: Path, value: str
) -> None:
    """The request names a host folder and a container folder: a good request first and a
    bad one second still write nothing."""
    devices = (DeviceToPrepare("good", "pool", "d0"), DeviceToPrepare(value, "pool", "d1"))
    with pytest.raises(UnsafeClaimNameError, match=r"request name .* is not a DNS label"):
        MetadataFiles(tmp_path, DRIVER).write(CLAIM, devices, (None, None))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "../x"), ("name", "a" * 254), ("name", "x\x00"), ("namespace", "a/b")],
)
def test_a_claim_name_or_namespace_that_cannot_name_a_folder_is_refused(
    field: str, value: str
) -> None:
    obj = {"metadata": {"uid": UID, "namespace": "ns", "name": "c", field: value}}
    with pytest.raises(UnsafeClaimNameError, match=rf"metadata\.{field} .* is not a DNS"):
        ClaimIdentity.of(obj)


def test_a_pod_claim_name_that_is_a_dns_label_is_used() -> None:
    for value in ("gpu", "a" * 63, "0", "gpu-1"):
        claim = ClaimIdentity(uid=UID, namespace="ns", name="c", pod_claim_name=value)
        assert f"/resourceclaimtemplates/{value}/r/" in container_path(DRIVER, claim, "r")
