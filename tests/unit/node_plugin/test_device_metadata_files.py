"""Metadata files (KEP-5304) written into a real directory: content, container paths, limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drakit.allocator.model import DeviceAttribute
from drakit.node_plugin.device_metadata import (
    ClaimIdentity,
    DeviceMetadataError,
    MetadataFiles,
    container_path,
)
from drakit.plugin import DeviceMetadata, DeviceToPrepare, NetworkData

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
